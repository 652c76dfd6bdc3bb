"""Resources per task and what the Ray executor asks for (`curation.core.resources`)."""
from __future__ import annotations

import pytest

from curation.core.resources import Resources, merged, ray_options
from curation.errors import CurateError


def test_a_task_without_a_codec_asks_for_one_cpu():
    assert ray_options({}, cluster_gpus=4) == {"num_cpus": 1.0}
    assert ray_options(Resources().to_json(), cluster_gpus=0) == {"num_cpus": 1.0}


def test_cuda_asks_for_one_whole_gpu_and_auto_only_where_there_are_gpus():
    assert ray_options(Resources(device="cuda").to_json(), cluster_gpus=2) == {"num_cpus": 1.0, "num_gpus": 1}
    assert ray_options(Resources(device="auto").to_json(), cluster_gpus=2) == {"num_cpus": 1.0, "num_gpus": 1}
    assert ray_options(Resources(device="auto").to_json(), cluster_gpus=0) == {"num_cpus": 1.0}
    assert ray_options(Resources(memory=2**30).to_json(), cluster_gpus=0) == {"num_cpus": 1.0, "memory": 2**30}


def test_cuda_on_a_cluster_without_gpus_is_refused_with_what_to_do():
    with pytest.raises(CurateError, match=r"tokenize/x/s0.*no(ne)?.*--num-gpus.*device: auto"):
        ray_options(Resources(device="cuda").to_json(), cluster_gpus=0, key="tokenize/x/s0")


def test_resources_validate_and_merge():
    with pytest.raises(ValueError, match="device 'tpu'"):
        Resources(device="tpu")
    assert merged(Resources(), Resources(device="auto")).device == "auto"
    assert merged(Resources(device="auto"), Resources(device="cuda")).device == "cuda"
    assert merged().device == "cpu"
    assert Resources(device="cuda").describe() == "cpus=1,gpus=1"
