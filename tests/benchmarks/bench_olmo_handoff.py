"""Planned vs drawn per recipe, stage and source for the OLMo-core hand-off: each shipped recipe run as it
ships, every stage then handed off to OLMo-core as well (`trainers: [megatron, olmo_core]`, through the
same seam `curate run` uses, `curation.mixture.handoffs.write_stage`), and one epoch of OLMo-core's own
`NumpyFSLDatasetConfig.from_file(dataset.json)` dataset and data loader drawn and counted per source
(`tests/olmo_draws.py`). Needs the `olmo` extra (`pip install -e '.[olmo]'`).

Usage (acquisition.yaml needs its loopback servers: `python recipes/acquisition/serve.py &`):
    .venv/bin/python tests/benchmarks/bench_olmo_handoff.py [--out-root /tmp/olmo-handoff] [RECIPE ...]
        → reports/benchmarks/olmo_handoff.md
Each recipe runs into OUT-ROOT/<name> (completed tasks of an earlier run there are skipped).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

RECIPES = ("demo", "text", "images", "audio", "interleaved", "acquisition")


def hand_off(out: Path, result) -> list[Path]:
    """Every stage of the run at `out` written for OLMo-core too; returns the manifests (with the section)."""
    from curation.mixture.handoffs import check, write_stage
    from curation.mixture.manifests import handoff_mode
    from curation.mixture.sequences import stage_sequences
    from curation.shards.formats import StageInput

    r, mdir, paths = result.plan.recipe.recipe, out / "manifests", []
    for stage in r.stages:
        manifest = mdir / f"{stage.name}.json"
        m = json.loads(manifest.read_text())
        packing = np.load(mdir / m["long_context"]["packing"]["path"]) if m["long_context"] else None
        sections = write_stage(["megatron", "olmo_core"], StageInput(
            out, mdir, stage.name, m["seq_length"], m["sources"], packing, m["vocabulary"], out,
            m["stage_fingerprint"], handoff_mode(r, stage),
            partial(stage_sequences, mdir, m["sources"], m["stage_fingerprint"], m["seq_length"], packing=packing)))
        assert sections["megatron"] == m["megatron"], f"{stage.name}: the seam changed Megatron's hand-off"
        m["olmo_core"] = sections["olmo_core"]
        problems = check(m, mdir, True)[0]
        assert not problems, problems
        manifest.write_text(json.dumps(m))     # a scratch run: `curate run` there writes it again as shipped
        paths.append(manifest)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipes", nargs="*", default=list(RECIPES))
    ap.add_argument("--out-root", default=None)
    ap.add_argument("--report", default=str(REPO / "reports" / "benchmarks" / "olmo_handoff.md"))
    args = ap.parse_args()
    from importlib.metadata import version

    from curation.commands.run import run
    from tests.olmo_draws import olmo_draws

    root = Path(args.out_root or tempfile.mkdtemp(prefix="olmo-handoff-"))
    work = Path(tempfile.mkdtemp(prefix="olmo-handoff-work-"))
    lines, bad = [], []
    for name in args.recipes:
        result = run(REPO / "recipes" / f"{name}.yaml", root / name, progress=False)
        for manifest in hand_off(root / name, result):
            m = json.loads(manifest.read_text())
            got = olmo_draws(manifest, work / name / m["stage"])
            for source, planned in got["planned"].items():
                drawn = got["drawn"][source]
                lines.append(f"| {name} | {m['stage']} | {source} | {planned:,} | {drawn:,} | {drawn - planned:+,} |")
                if drawn != planned:
                    bad.append(f"{name}/{m['stage']}/{source}: drawn {drawn} of {planned}")
            p, d = sum(got["planned"].values()), sum(got["drawn"].values())
            lines.append(f"| {name} | **{m['stage']}** | **total** ({got['drawn_instances']} of {got['instances']} "
                         f"instances of {m['seq_length']}, batch {got['batch']}, {got['pad']:,} padding masked) | "
                         f"**{p:,}** | **{d:,}** | **{d - p:+,}** |")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    text = f"""# Planned vs drawn: what stock OLMo-core draws from each shipped recipe's OLMo-core hand-off

Per recipe, stage and planned source: the tokens of the stage's sampling plans and the tokens OLMo-core
{version("ai2-olmo-core")} draws in one epoch of its `NumpyFSLDatasetConfig` dataset (built from the stage's
`dataset.json`) through its `NumpyDataLoaderConfig` data loader, each instance located in the stage's stream
rebuilt from the shards and the plans and attributed per source (`tests/olmo_draws.py`). The global batch is the
largest of 1..8 instances that divides the stage's instances (OLMo-core's loader leaves out the last
`instances % batch` of an epoch). Every stage is handed off with `trainers: [megatron, olmo_core]` through
`curation.mixture.handoffs.write_stage` over the run as shipped, which also checks that Megatron's hand-off is
unchanged by the seam.

Command: `.venv/bin/python tests/benchmarks/bench_olmo_handoff.py {' '.join(args.recipes)}`; machine:
{platform.machine()}, {os.cpu_count()} CPUs, load average {load} (shared).

| recipe | stage | source | planned tokens | drawn by OLMo-core | drawn − planned |
|---|---|---|---:|---:|---:|
""" + "\n".join(lines) + "\n"
    if bad:
        text += "\n**Not drawn as planned:** " + "; ".join(bad) + "\n"
    Path(args.report).write_text(text)
    print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
