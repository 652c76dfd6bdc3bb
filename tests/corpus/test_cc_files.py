"""The resolve parts of the partitioned clustering (`curation.corpus.cc_files`): written in row groups of a fixed
number of rows, not one per shard, and read back by the assembly one shard at a time as a stream."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.corpus.cc_files import RESOLVED_GROUP_ROWS, ShardRuns, write_resolved


def _shard_of(table: pa.Table) -> np.ndarray:
    return table.column("shard").to_numpy()


def _part(rng, rows: int, shards: int) -> pa.Table:
    """`rows` rows over `shards` shards (many absent), sorted by shard, each with its position."""
    numbers = np.sort(rng.choice(shards, size=rows))
    return pa.table({"shard": numbers, "at": np.arange(rows)})


def test_a_part_over_many_shards_has_row_groups_by_rows_and_is_handed_out_shard_by_shard(tmp_path):
    rng = np.random.default_rng(3)
    shards = 5_000
    table = _part(rng, 2 * RESOLVED_GROUP_ROWS + 123, shards)
    path = tmp_path / "000.parquet"
    write_resolved(path, table)
    # the footer follows the rows: 3 row groups, where one per shard with rows would have been ~5,000
    assert pq.ParquetFile(path).num_row_groups == 3
    assert not list(tmp_path.glob("*.tmp"))
    runs = ShardRuns(path, _shard_of)
    numbers = table.column("shard").to_numpy()
    for number in range(shards):   # an absent shard gives no piece; one across a batch boundary comes whole
        pieces = runs.take(number)
        got = pa.concat_tables(pieces).column("at").to_pylist() if pieces else []
        assert got == np.flatnonzero(numbers == number).tolist()


def test_every_shard_asked_once_gives_every_row_once_in_order(tmp_path):
    rng = np.random.default_rng(4)
    table = _part(rng, RESOLVED_GROUP_ROWS + 7, 50)   # long runs of one shard cross batches
    write_resolved(tmp_path / "p.parquet", table)
    runs = ShardRuns(tmp_path / "p.parquet", _shard_of)
    pieces = [piece for number in range(60) for piece in runs.take(number)]
    assert pa.concat_tables(pieces).column("at").to_pylist() == list(range(table.num_rows))


def test_a_part_of_one_row_group_per_shard_from_earlier_versions_reads_the_same(tmp_path):
    rng = np.random.default_rng(5)
    table = _part(rng, 3_000, 400)
    old = tmp_path / "old.parquet"
    with pq.ParquetWriter(old, table.schema) as w:   # as resolve tasks wrote them before
        numbers = table.column("shard").to_numpy()
        for number in np.unique(numbers):
            w.write_table(table.filter(pa.array(numbers == number)))
    write_resolved(tmp_path / "new.parquet", table)
    a, b = ShardRuns(old, _shard_of), ShardRuns(tmp_path / "new.parquet", _shard_of)
    for number in range(400):
        got_a, got_b = a.take(number), b.take(number)
        rows = lambda pieces: pa.concat_tables(pieces).to_pylist() if pieces else []  # noqa: E731
        assert rows(got_a) == rows(got_b)


def test_an_empty_part_has_no_rows_for_any_shard(tmp_path):
    write_resolved(tmp_path / "e.parquet", pa.table({"shard": pa.array([], pa.int64()), "at": pa.array([], pa.int64())}))
    runs = ShardRuns(tmp_path / "e.parquet", _shard_of)
    assert all(runs.take(n) == [] for n in range(10))


def test_shards_asked_out_of_order_or_a_part_out_of_order_are_refused(tmp_path):
    write_resolved(tmp_path / "p.parquet", pa.table({"shard": [1, 1, 2], "at": [0, 1, 2]}))
    runs = ShardRuns(tmp_path / "p.parquet", _shard_of)
    runs.take(1)
    with pytest.raises(ValueError, match="ascending order"):
        runs.take(1)
    pq.write_table(pa.table({"shard": [3, 1], "at": [0, 1]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="bad.parquet is not sorted by shard"):
        ShardRuns(tmp_path / "bad.parquet", _shard_of).take(0)
    write_resolved(tmp_path / "skipped.parquet", pa.table({"shard": [1, 2], "at": [0, 1]}))
    skipped = ShardRuns(tmp_path / "skipped.parquet", _shard_of)
    with pytest.raises(ValueError, match="holds rows of shard 1 after shard 2 was asked for"):
        skipped.take(2)   # shard 1 never asked for: its rows would be lost
