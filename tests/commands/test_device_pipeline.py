"""`images.device`/`audio.device` end to end on this machine: the device choice does not change CPU outputs,
the ledger records device, precision and codec per part, and `curate verify` reports mixed precisions."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO

RECIPE = REPO / "recipes" / "images.yaml"


def _with_device(tmp_path, device: str):
    data = yaml.safe_load(RECIPE.read_text())
    for key in ("vocabulary", "image_tokenizer"):
        data[key] = str((RECIPE.parent / data[key]).resolve())
    for src in data["sources"]:
        src["images"] = {**(src.get("images") or {}), "device": device}
    (tmp_path / "images").symlink_to(REPO / "recipes" / "images")
    path = tmp_path / f"{device}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU fallback of device: auto")
def test_auto_on_a_cpu_machine_writes_the_cpu_bytes_and_says_where_it_ran(images_run, tmp_path, capsys):
    from curation.commands.cli import main
    from curation.commands.run import run
    from curation.ledger.store import write_ledger

    a, cpu = images_run, images_run.out   # the recipe as shipped (device unset: the CPU), local executor
    b = run(_with_device(tmp_path, "auto"), tmp_path / "auto", progress=False, executor="local")
    for source in ("captioned", "uncaptioned"):
        for ext in ("bin", "idx"):
            assert (cpu / "tokenized" / source / f"{source}.{ext}").read_bytes() == \
                (tmp_path / "auto" / "tokenized" / source / f"{source}.{ext}").read_bytes()
    rows = b.rows["encoders"]
    assert {(r["source"], r["codec"], r["requested"], r["device"], r["precision"]) for r in rows} == \
        {("captioned", "image", "auto", "cpu", "float32"), ("uncaptioned", "image", "auto", "cpu", "float32")}
    assert len(rows) == len(b.plan.tokenize) and all(r["codec_sha256"] for r in rows)
    assert {r["requested"] for r in a.rows["encoders"]} == {"cpu"}
    # the run's image batches per rank: per source and in all, at the simulated rank counts and at its own (1)
    ranks = {r["source"]: r for r in b.rows["rank_plan"]}
    assert set(ranks) == {"captioned", "uncaptioned", "(all)"} and ranks["(all)"]["run_ranks"] == 1
    assert ranks["(all)"]["images"] == ranks["captioned"]["images"] + ranks["uncaptioned"]["images"] == 13
    assert ranks["(all)"]["run_imbalance"] == 0.0 and ranks["(all)"]["imbalance_8"] > 0
    # the manifests do not depend on the device request when the codes do not: the same shards, same digests
    assert {p.name: p.read_bytes() for p in (cpu / "tokenized").rglob("*.bin")} == \
        {p.name: p.read_bytes() for p in (tmp_path / "auto" / "tokenized").rglob("*.bin")}
    # one part re-labelled as encoded on CUDA in TF32: verify reports the mix and still passes
    ledger = tmp_path / "auto" / "ledger"
    tables = {p.stem: pq.read_table(p).to_pylist() for p in ledger.glob("*.parquet")}
    tables["encoders"][0] |= {"device": "cuda", "precision": "tf32", "device_name": "NVIDIA H200", "gpus": "0"}
    write_ledger(tables, ledger)
    manifest = tmp_path / "auto" / "manifests" / "stage1.json"
    if not manifest.is_file():
        manifest = sorted((tmp_path / "auto" / "manifests").glob("*.json"))[0]
    capsys.readouterr()
    assert main(["verify", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "warning: the image codes of this stage mix precisions: cpu float32: " in out
    assert "cuda tf32: 1 part(s)" in out and "verified" in out
