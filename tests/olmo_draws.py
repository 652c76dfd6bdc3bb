"""What stock OLMo-core draws from a stage's hand-off, counted with OLMo-core itself.

`NumpyFSLDatasetConfig.from_file(OUT/handoff/olmo_core/<stage>/dataset.json)` is built as a trainer would
build it, and one epoch of its `NumpyDataLoaderConfig` data loader (world size 1, a global batch that
divides the stage's instances) is drawn. Each instance the loader yields is located in the stage's stream,
rebuilt independently from the source shards and the plans (`tests.megatron_draws._stream_map`: the
occurrences in the stage's seeded order, or the long-context packing; the packed Megatron layout is the
same stream plus one label token), its tokens must be the stream's there and its label mask the stream's
non-padding, and its tokens are counted per source. Used by `tests/mixture/test_olmo_core_handoff.py`."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from tests.megatron_draws import _stream_map


def batch_instances(instances: int, most: int = 8) -> int:
    """The largest global batch (in instances) up to `most` that divides the stage's instances: OLMo-core's
    loader leaves out the last `instances % batch` instances of an epoch."""
    return max(b for b in range(1, most + 1) if instances % b == 0)


def olmo_draws(manifest: Path, work: Path, batch: int | None = None) -> dict:
    """{"instances", "batch", "drawn_instances", "planned": {source: tokens}, "drawn": {source: tokens},
    "pad": padding positions drawn, "masked": positions the label mask leaves out}."""
    from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig

    m = json.loads(manifest.read_text())
    base = manifest.resolve().parent
    sec, seq = m["olmo_core"], m["seq_length"]
    config = NumpyFSLDatasetConfig.from_file(Path(os.path.normpath(base / sec["files"]["dataset.json"]["path"])))
    config.work_dir = str(work)
    dataset = config.build()
    dataset.prepare()
    assert len(dataset) == sec["instances"], (len(dataset), sec["instances"])
    batch = batch or batch_instances(len(dataset))
    loader = NumpyDataLoaderConfig(global_batch_size=batch * seq, seed=1234, work_dir=str(work),
                                   num_workers=0, target_device_type="cpu").build(dataset)
    loader.reshuffle(epoch=1)
    tokens, source = _stream_map(m, base)
    names = [s["name"] for s in m["sources"]]
    planned = {s["name"]: s["plan"]["tokens"] for s in m["sources"] if "plan" in s and s["effective_tokens"] > 0}
    drawn, pad, masked, seen = dict.fromkeys(planned, 0), 0, 0, np.zeros(len(dataset), dtype=bool)
    for b in loader:
        for index, ids, mask in zip(b["index"].tolist(), b["input_ids"], b["label_mask"]):
            assert not seen[index], "no instance is drawn twice in an epoch"
            seen[index] = True
            at = index * seq
            want = source[at:at + seq]
            assert (ids.numpy() == tokens[at:at + seq]).all(), "OLMo-core reads the stage's stream"
            assert (mask.numpy() == (want >= 0)).all(), "the label mask is the stream's non-padding"
            pad += int((want < 0).sum())
            masked += int((~mask.numpy()).sum())
            for i, c in zip(*np.unique(want[want >= 0], return_counts=True)):
                drawn[names[int(i)]] += int(c)
    loader.reset()
    return {"instances": len(dataset), "batch": batch, "drawn_instances": int(seen.sum()), "planned": planned,
            "drawn": drawn, "pad": pad, "masked": masked}
