"""Our writer's bytes, read back by megatron-core itself."""
import struct

import numpy as np
import pytest

from curation.shards import IndexedWriter, merge, read_index, read_tokens


def _write(prefix, docs):
    w = IndexedWriter(prefix)
    for d in docs:
        w.add(np.asarray(d, dtype=np.int32))
    w.close()


def test_byte_layout_of_index(tmp_path):
    _write(tmp_path / "a", [[1, 2, 3], [266_439]])
    raw = (tmp_path / "a.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack_from("<QBQQ", raw, 9) == (1, 4, 2, 3)
    dtype, lengths, pointers, doc_idx = read_index(tmp_path / "a.idx")
    assert dtype == np.int32 and lengths.tolist() == [3, 1]
    assert pointers.tolist() == [0, 12] and doc_idx.tolist() == [0, 1, 2]
    assert (tmp_path / "a.bin").stat().st_size == 16
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_megatron_core_reads_written_and_merged_shards(tmp_path):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    docs_a = [[5, 6, 7, 0], [131_072, 200_000, 0]]
    docs_b = [[9, 0], [262_344, 266_439, 4, 0]]
    _write(tmp_path / "parts" / "a", docs_a)
    _write(tmp_path / "parts" / "b", docs_b)
    merge([tmp_path / "parts" / "a", tmp_path / "parts" / "b"], tmp_path / "all")
    ds = IndexedDataset(str(tmp_path / "all"))
    assert len(ds) == 4
    assert [ds[i].tolist() for i in range(4)] == docs_a + docs_b
    assert ds.sequence_lengths.tolist() == [4, 3, 2, 4]
    assert ds.document_indices.tolist() == [0, 1, 2, 3, 4]
    assert read_tokens(tmp_path / "all").tolist() == [t for d in docs_a + docs_b for t in d]


def test_abort_leaves_nothing_that_looks_complete(tmp_path):
    w = IndexedWriter(tmp_path / "x")
    w.add(np.arange(4, dtype=np.int32))
    w.abort()
    assert list(tmp_path.iterdir()) == []


def test_read_index_rejects_other_files(tmp_path):
    (tmp_path / "bad.idx").write_bytes(b"NOTMEGATRON" + bytes(40))
    with pytest.raises(ValueError, match="not a Megatron index"):
        read_index(tmp_path / "bad.idx")


def test_an_empty_merge_writes_no_bin_a_trainer_could_open(tmp_path):
    """megatron-core cannot map a 0-byte `.bin` ("cannot mmap an empty file"): an empty pool is its `.idx`
    alone, which reads as 0 sequences, counts as 0 tokens, and removes an earlier run's empty `.bin`."""
    from curation.core.vocab import Block
    from curation.shards.counting import count_tokens_by_modality
    from curation.shards.indexed import has_tokens, iter_tokens

    _write(tmp_path / "parts" / "a", [])
    _write(tmp_path / "parts" / "b", [])
    (tmp_path / "pool.bin").write_bytes(b"")          # what an earlier version left
    assert merge([tmp_path / "parts" / "a", tmp_path / "parts" / "b"], tmp_path / "pool") == 0
    assert not (tmp_path / "pool.bin").exists() and (tmp_path / "pool.idx").is_file()
    assert not list(tmp_path.glob("*.tmp"))
    assert read_index(tmp_path / "pool.idx")[1].size == 0 and not has_tokens(tmp_path / "pool")
    assert list(iter_tokens(tmp_path / "pool")) == []
    counts = count_tokens_by_modality(tmp_path / "pool", [Block("text", 0, 10)], {})
    assert counts == {"text": 0, "image": 0, "audio": 0, "documents": 0, "total": 0}
    _write(tmp_path / "parts" / "c", [[1, 2]])
    assert merge([tmp_path / "parts" / "a", tmp_path / "parts" / "c"], tmp_path / "pool") == 1
    assert has_tokens(tmp_path / "pool") and read_tokens(tmp_path / "pool").tolist() == [1, 2]
