"""Tokenizing interleaved documents: text runs and image blocks in reading order, images removed by the phases
counted by reason, codes independent of batching and windows, resumable from the per-batch checkpoint."""
from __future__ import annotations

import numpy as np
import pytest

from curation.core.record import QuarantineSink
from curation.steps.interleaved.check import InterleavedCheck
from tests.conftest import REPO, VOCAB
from tests.interleaved_data import encoded, english, picture
from tests.interleaved_data import record as _doc

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tools():
    from curation.core.vocab import Vocabulary
    from curation.steps.codecs import load_codec
    from curation.steps.image.codec import IBQEncoder
    torch.set_num_threads(1)
    return Vocabulary.load(VOCAB), load_codec(REPO / "tokenizers" / "curate-demo-ibq.yaml", IBQEncoder)


class Counting:
    """Our codec, counting how many images it encodes (to see a resumed task re-encode nothing)."""

    def __init__(self, codec):
        self.codec, self.patch, self.config, self.images = codec, codec.patch, codec.config, 0

    def encode(self, pixels):
        self.images += pixels.shape[0]
        return self.codec.encode(pixels)


def _tokenize(tools, records, **kw):
    from curation.steps.interleaved.tokenize import InterleavedTokenizer
    vocab, codec = tools
    checked = list(InterleavedCheck(min_side=32, domain="natural", sink=QuarantineSink()).run(records))
    step = InterleavedTokenizer(vocab, kw.pop("codec", codec), area=kw.pop("area", 4096), sink=QuarantineSink(), **kw)
    return list(step.run(checked)), step


def _alone(tools, data: bytes, area: int = 4096) -> np.ndarray:
    """The image's block when it is encoded alone: what batching must not change."""
    from curation.steps.image.codec import layout, to_pixels
    from curation.steps.image.decode import decode
    from curation.steps.image.resize import target_size
    vocab, codec = tools
    img = decode(data)
    pixels = to_pixels(img, target_size(img.width, img.height, area, codec.patch))[None]
    return layout(codec.encode(pixels).numpy()[0], vocab)


def _docs():
    imgs = [encoded(picture(s, size)) for s, size in ((1, (96, 80)), (2, (80, 96)), (3, (96, 80)), (4, (64, 64)))]
    return imgs, [_doc("d0", [english(0), imgs[0], english(1), imgs[1], english(2)]),
                  _doc("d1", [imgs[2], english(3), imgs[3]]), _doc("d2", [english(4), imgs[0], b"broken"])]


def test_text_runs_and_image_blocks_in_reading_order(tools):
    vocab, _ = tools
    imgs, docs = _docs()
    out, step = _tokenize(tools, docs, batch_tokens=32, window=2)   # several batches and windows
    assert [r.id for r in out] == ["d0", "d1", "d2"]                    # shard order, whatever the plan did

    def text(s):
        return vocab.tokenizer.encode(s, add_special_tokens=False).ids
    seq = out[0].shards[""][0]
    expected = np.concatenate([text(english(0)), _alone(tools, imgs[0]), text(english(1)), _alone(tools, imgs[1]),
                               text(english(2)), [vocab.eod_id]])
    assert seq.dtype == np.int32 and seq.tolist() == expected.tolist()
    d1 = out[1].shards[""][0]
    assert d1.tolist() == np.concatenate([_alone(tools, imgs[2]), text(english(3)), _alone(tools, imgs[3]),
                                          [vocab.eod_id]]).tolist()
    n = step.stats.notes
    assert (n["documents"], n["images"], n["images_listed"], n["images_dropped:corrupt_image"]) == (3, 5, 6, 1)
    assert n["batches"] >= 3 and n["image_codes"] == 5 * 16 and step.stats.balanced()


def test_images_the_phases_listed_leave_their_document_and_are_counted(tools):
    vocab, _ = tools
    imgs, docs = _docs()
    docs[0].meta["drop_images"] = {"1": "image_near_duplicate"}     # as DropListed notes it
    docs[1].meta["drop_images"] = {"0": "image_near_duplicate", "1": "image_near_duplicate"}
    out, step = _tokenize(tools, docs)
    assert [r.id for r in out] == ["d0", "d2"] and step.stats.dropped == {"too_few_images": 1}
    seq = out[0].shards[""][0].tolist()
    assert seq.count(vocab.marker("image_start")) == 1
    blank = vocab.tokenizer.encode(english(1) + "\n\n" + english(2), add_special_tokens=False).ids
    assert seq[-len(blank) - 1:-1] == blank                          # the text around the removed image is one run
    assert out[0].meta["image_drops"] == {"image_near_duplicate": 1}
    # d0's one, and d1's two: a document dropped whole keeps its images' reasons in the counts (issue 22.9)
    assert step.stats.notes["images_dropped:image_near_duplicate"] == 3
    assert step.sink.decisions[-1][1:4] == ("d1", "dropped", "too_few_images")
    assert "2 image_near_duplicate" in step.sink.decisions[-1][4]


def test_a_killed_task_resumes_from_its_saved_batches(tools, tmp_path):
    from curation.steps.encode import BatchCodes
    _, docs = _docs()
    first, _ = _tokenize(tools, docs, batch_tokens=32, checkpoint=BatchCodes(tmp_path / "codes", "fp"))
    counting = Counting(tools[1])
    _, docs = _docs()
    again, _ = _tokenize(tools, docs, batch_tokens=32, codec=counting, checkpoint=BatchCodes(tmp_path / "codes", "fp"))
    assert counting.images == 0                                       # every batch came from the checkpoint
    assert [r.shards[""][0].tolist() for r in again] == [r.shards[""][0].tolist() for r in first]
