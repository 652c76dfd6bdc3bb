"""The multimodal demo (recipes/demo.yaml, run once per session: `demo_run` in tests/sessions.py): every
stage verifies, Table 3 has vision and audio budgets in every stage, the committed manifests are what it
writes, and the reference trainer runs on stages 1 and 2."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO

STAGES = ("stage1", "stage2", "cooldown", "long-context-4k")

pytestmark = pytest.mark.slow


def _budget_per_modality(rows: dict) -> dict[str, dict[str, int]]:
    from curation.steps.registry import MODALITIES
    family = {s["source"]: MODALITIES[s["modality"]].budget_family for s in rows["sources"]}
    out: dict[str, dict[str, int]] = {}
    for m in rows["mixture"]:
        out.setdefault(m["stage"], {"text": 0, "image": 0, "audio": 0})[family[m["source"]]] += m["effective_tokens"]
    return out


def test_every_stage_has_text_image_and_audio_tokens_and_verifies(demo_run):
    from curation.mixture.verify import verify_manifest
    assert {s["modality"] for s in demo_run.rows["sources"]} == {"text", "image", "audio"}
    budget = _budget_per_modality(demo_run.rows)
    assert list(budget) == list(STAGES)
    for stage, b in budget.items():
        assert b["text"] > 0 and b["image"] > 0 and b["audio"] > 0, (stage, b)
    for stage in ("stage1", "stage2", "cooldown"):
        assert sum(budget[stage].values()) == json.loads((demo_run.out / "manifests" / f"{stage}.json").read_text())[
            "budget_tokens"]
    assert not demo_run.rows.get("mixture_flags"), demo_run.rows.get("mixture_flags")
    for stage in STAGES:      # raises VerifyError listing every problem; returns the checks passed
        passed = verify_manifest(demo_run.out / "manifests" / f"{stage}.json")
        assert any(p.startswith("megatron hand-off (packed): ") for p in passed), (stage, passed)
        m = json.loads((demo_run.out / "manifests" / f"{stage}.json").read_text())
        draws = m["megatron"]["draws"]        # every planned token of every source reaches Megatron-LM
        assert draws and all(d["drawn_tokens"] == d["planned_tokens"] > 0 for d in draws), (stage, draws)
    report = (demo_run.out / "reports" / "report.md").read_text()
    assert "Apertus 1.5 Table 3" in report
    assert f"| stage1 | {budget['stage1']['text']:,} (" in report


def test_stages_follow_apertus_table_2(demo_run):
    """Stage 1: unpaired data, every token a target; stage 2: paired data joins, text targets only;
    the long-context stage draws the speech source's long-context pool and image documents."""
    manifests = {s: json.loads((demo_run.out / "manifests" / f"{s}.json").read_text()) for s in STAGES}
    used = {s: {src["name"] for src in m["sources"] if src["effective_tokens"] > 0} for s, m in manifests.items()}
    assert {"uncaptioned", "unpaired"} <= used["stage1"] and not {"captioned", "speech"} & used["stage1"]
    assert {"captioned", "speech"} <= used["stage2"] and not {"uncaptioned", "unpaired"} & used["stage2"]
    assert manifests["stage1"]["training"]["targets"] == "all"
    assert {manifests[s]["training"]["targets"] for s in STAGES[1:]} == {"text"}
    speech = next(src for src in manifests["long-context-4k"]["sources"] if src["name"] == "speech")
    assert speech["variant"] == ".long_context" and speech["effective_tokens"] > 0
    assert "captioned" in used["long-context-4k"]


def test_committed_demo_manifests_are_what_the_demo_writes(demo_run):
    for stage in STAGES:
        committed = REPO / "manifests" / "demo" / f"{stage}.json"
        assert (demo_run.out / "manifests" / f"{stage}.json").read_bytes() == committed.read_bytes(), \
            f"{committed} is stale: rerun recipes/demo.yaml and copy its manifests/ into manifests/demo/"
    for plan in sorted((demo_run.out / "manifests" / "plans").rglob("*.npy")):
        rel = plan.relative_to(demo_run.out / "manifests")
        assert plan.read_bytes() == (REPO / "manifests" / "demo" / rel).read_bytes(), rel


def test_the_tokens_table_sums_to_every_merged_shard(demo_run):
    """One row per source and pool (main, the audio sources' long-context pools): the ledger's total is the
    sum of every merged `.idx`, and no merged pool is a 0-byte `.bin` (megatron-core cannot map one)."""
    import duckdb

    from curation.shards import read_index
    con = duckdb.connect(str(demo_run.out / "ledger" / "ledger.duckdb"), read_only=True)
    pools = con.sql("SELECT source, pool, total_tokens FROM tokens").fetchall()
    total = sum(t for _, _, t in pools)
    idx = [p for p in (demo_run.out / "tokenized").glob("*/*.idx")]
    assert len(idx) == len(pools)
    assert total == sum(int(read_index(p)[1].sum()) for p in idx)
    assert ("speech", "long_context") in {(s, p) for s, p, t in pools if t > 0}
    assert ("unpaired", "long_context", 0) in pools
    assert all(b.stat().st_size > 0 for b in (demo_run.out / "tokenized").glob("*/*.bin"))
    assert not (demo_run.out / "tokenized" / "unpaired" / "unpaired.long_context.bin").exists()


@pytest.mark.parametrize("stage", ["stage1", "stage2"])
def test_curate_train_runs_on_the_stage(demo_run, tmp_path, stage, capsys):
    from curation.commands.cli import main
    from curation.mixture.handoffs import relocate_handoff
    out = tmp_path / "demo"        # a private copy: training writes consumed tokens into the ledger
    shutil.copytree(demo_run.out, out, symlinks=True, ignore=shutil.ignore_patterns("raw", "work", "processed"))
    for manifest in (out / "manifests").glob("*.json"):
        relocate_handoff(manifest)
    code = main(["train", str(out / "manifests" / f"{stage}.json"), "--out", str(tmp_path / "train"),
                 "--max-steps", "2", "--batch-size", "2", "--seq-length", "128"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"stage {stage}, targets {'all' if stage == 'stage1' else 'text'}" in printed
    log = [json.loads(line) for line in (tmp_path / "train" / "train.jsonl").read_text().splitlines()]
    steps = [r for r in log if "loss" in r]
    assert len(steps) == 2
    # a batch of two 128-token windows can fall wholly inside one clip or image (stage 2 targets text only):
    # it then has no targets and a loss of 0; every batch that has targets has a positive loss
    assert all(r["loss"] > 0 for r in steps if r["targets"] > 0) and any(r["targets"] > 0 for r in steps)
    assert all(r["loss"] == 0 for r in steps if r["targets"] == 0)
