"""The precision contract inside a task (`curation.steps.device`): the device comes from what torch sees."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from curation.errors import InputError  # noqa: E402
from curation.steps.device import on_device, place  # noqa: E402

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback")


@needs_no_cuda
def test_without_cuda_cpu_and_auto_encode_on_the_cpu_in_float32(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")   # a declared-only GPU slot, as Ray sets it on a test cluster
    for requested in ("cpu", "auto"):
        p = place("image", requested, "tf32", "captioned")
        assert (p.device, p.precision, p.device_name, p.gpus, p.requested) == ("cpu", "float32", "cpu", "1", requested)


@needs_no_cuda
def test_cuda_without_cuda_is_refused_naming_the_source_and_the_way_out():
    with pytest.raises(InputError, match=r"source 'captioned'.*`device: cuda`.*no CUDA device.*`device: auto`"):
        place("image", "cuda", "tf32", "captioned")


def test_on_the_cpu_the_codec_is_the_cached_codec_itself():
    codec = object()
    runner, p = on_device(codec, "audio", "cpu", "tf32")
    assert runner is codec and p.device == "cpu" and p.precision == "float32"
