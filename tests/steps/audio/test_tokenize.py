"""The audio tokenize step on a shard that has nothing left to encode."""
from __future__ import annotations

import pytest

from tests.conftest import REPO, VOCAB


@pytest.mark.slow
def test_a_shard_whose_clips_were_all_quarantined_tokenizes_to_nothing(tmp_path):
    """Its Shar shard holds no cuts file (lhotse's reader asserts on that): the step emits nothing, so the
    run reaches the source checks (`keeps no document`, or `allow_empty`) instead of failing the task."""
    from curation.core.vocab import Vocabulary
    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.audio.tokenize import AudioTokenizer
    from curation.steps.codecs import load_codec
    (tmp_path / "00000.shar").mkdir()
    step = AudioTokenizer(Vocabulary.load(VOCAB), load_codec(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml",
                                                             WavTokenizerEncoder),
                          max_batch_seconds=30, shar_dir=tmp_path / "00000.shar", source="s")
    assert list(step.run([])) == [] and step.stats.records_in == step.stats.records_out == 0
