from curation.core.vocab import Vocabulary
from tests.conftest import VOCAB


def test_block_boundaries_follow_the_design():
    v = Vocabulary.load(VOCAB)
    assert [(b.name, b.start, b.stop - 1) for b in v.blocks] == [
        ("text", 0, 131_071), ("reserved", 131_072, 131_271),
        ("image", 131_272, 262_343), ("audio", 262_344, 266_439)]
    assert v.size == 266_440
    assert v.padded_size == 266_752 and v.padded_size % 128 == 0
    assert v.modality_of(131_271) == "reserved" and v.modality_of(131_272) == "image"
    assert v.modality_of(262_343) == "image" and v.modality_of(262_344) == "audio"


def test_markers_and_text_tokenizer_fit_their_blocks():
    v = Vocabulary.load(VOCAB)
    assert v.marker("image_start") == 131_072
    assert all(v.modality_of(v.marker(m)) == "reserved" for m in v.reserved)
    assert v.tokenizer.get_vocab_size() <= v.block("text").size
    assert (v.eod_id, v.pad_id) == (0, 1)
    ids = v.tokenizer.encode("Über die Brücke, then home.").ids
    assert ids and max(ids) < v.tokenizer.get_vocab_size()
    assert v.tokenizer.decode(ids) == "Über die Brücke, then home."
