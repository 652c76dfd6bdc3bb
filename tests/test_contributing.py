"""docs/CONTRIBUTING.md's how-tos stay true: every file and anchor a how-to names exists, and the
code the how-tos show runs on the real contracts (the filter counts and drops by reason; the phase
plans, counts its nodes, and writes a drop list per covered shard)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, english_doc, make_recipe, write_jsonl

GUIDE = (REPO / "docs" / "CONTRIBUTING.md").read_text()


def _section(title: str) -> str:
    start = GUIDE.index(f"## {title}")
    end = GUIDE.find("\n## ", start + 3)
    return GUIDE[start: end if end > 0 else None]


def _code(title: str) -> dict:
    block = re.search(r"```python\n(.*?)```", _section(title), re.S).group(1)
    scope: dict = {}
    exec(compile(block, f"CONTRIBUTING.md: {title}", "exec"), scope)   # noqa: S102 - the repository's own doc
    return scope


HOWTOS = [t for t in re.findall(r"^## (How to .+)$", GUIDE, re.M)]


def test_there_are_four_howtos():
    assert HOWTOS == ["How to add a text filter", "How to add a corpus-wide phase", "How to add a modality",
                      "How to add an output format"]


@pytest.mark.parametrize("title", HOWTOS)
def test_every_file_and_anchor_a_howto_names_exists(title):
    bullets = re.findall(r"^- `([^`]+)`: (.*)$", _section(title).split("Files touched", 1)[1], re.M)
    assert bullets, f"{title}: no files listed"
    for path, said in bullets:
        path, _, test = path.partition("::")
        if "<name>" in path:                      # the new module itself: its folder exists
            assert (REPO / path.split("<name>")[0]).is_dir(), path
            continue
        target = REPO / path
        assert target.exists(), f"{title}: {path} does not exist"
        if test:
            assert f"def {test}(" in target.read_text(), f"{title}: {path} has no {test}"
        if target.is_file():
            text = target.read_text()
            for anchor in re.findall(r"`([^`\"]+)`", said):
                if re.fullmatch(r"[A-Za-z_][\w.]*(\s*(=\s*\{|:\s*dict\[[^\]]+\]))?", anchor) and "." not in anchor:
                    assert anchor in text, f"{title}: {path} has no `{anchor}`"


def test_the_filter_howto_counts_and_drops_by_reason():
    from curation.core.record import Record
    step = _code("How to add a text filter")["MaxUrlShare"](max_share=0.5)
    records = [Record("a", "s", english_doc(1)), Record("b", "s", "https://x.test https://y.test see")]
    kept = list(step.run(iter(records)))
    assert [r.id for r in kept] == ["a"]
    assert step.stats.dropped == {"url_share": 1} and step.stats.balanced()


def test_the_phase_howto_plans_counts_and_writes_drop_lists(tmp_path, monkeypatch):
    from curation.corpus.base import PlanContext
    from curation.plan import phases
    from curation.plan.graph import load_plan
    from curation.plan.size import plan_nodes
    phase = _code("How to add a corpus-wide phase")["LongestOnlyPhase"]()
    files = [write_jsonl(tmp_path / f"{i}.jsonl", [{"id": f"{i}", "text": english_doc(i)}]) for i in range(3)]
    recipe = make_recipe(tmp_path, {"web": files})
    monkeypatch.setattr(phases, "CORPUS_PHASES", [*phases.CORPUS_PHASES, phase])
    plan = load_plan(recipe)
    built = dict(plan.phases)[phase]
    assert len(built) == phase.node_count(plan.recipe.recipe, {"web": 3}) == \
        plan_nodes(plan.recipe.recipe, {"web": 3})["longest_only"]
    tokenize = [n for n in plan.nodes() if n.phase == "tokenize"]
    assert all(built[0].key in str(n.spec) or "longest_only" in str(n.spec) for n in tokenize)
    ctx = PlanContext(plan.recipe, [n for n in plan.nodes() if n.phase == "process"], {})
    assert len(ctx.shards(phase.covers)) == 3
    outputs = phase.runners()["longest_only"](tmp_path / "out", built[0])["outputs"]
    assert len(outputs) == 3 and all((tmp_path / "out" / p).is_file() for p in outputs)


def test_the_output_format_howto_writes_lists_and_checks_through_the_seam(tmp_path, monkeypatch):
    """The how-to's toy format, registered next to Megatron's and OLMo-core's, goes through the same seam:
    written per stage, its files in the Merkle leaves, its problems found by verify's check."""
    import json
    from functools import partial

    from curation.mixture import handoffs
    from curation.mixture.megatron import blend_of
    from curation.mixture.sequences import stage_sequences
    from curation.shards.formats import StageInput
    from tests.mixture.test_megatron_handoff import VOCAB, _source

    flat = _code("How to add an output format")["FlatTokens"]()
    monkeypatch.setitem(handoffs.FORMATS, "flat", flat)
    out, seq = tmp_path / "out", 4
    sources = [_source(out, "a", [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0]], [2, 0, 1])]
    mdir = out / "manifests"
    sections = handoffs.write_stage(["megatron", "flat"], StageInput(
        out, mdir, "s", seq, sources, None, VOCAB, out, "fp", "packed",
        partial(stage_sequences, mdir, sources, "fp", seq, packing=None)))
    m = {"stage": "s", "seq_length": seq, "vocabulary": VOCAB, "sources": sources, "stage_fingerprint": "fp",
         "long_context": None, "samples": sections["megatron"]["train_samples"],
         "blend": blend_of(sections["megatron"]), **sections}
    assert sections["flat"]["draws"] == [{"name": "a", "planned_tokens": 8, "drawn_tokens": 8}]
    assert any(leaf.startswith("../handoff/flat/s/tokens.bin:") for leaf in handoffs.leaves(m))
    problems, ok = handoffs.check(m, mdir, True)
    assert problems == [] and ok[-1] == "flat hand-off: 8 tokens"
    assert json.loads((out / "handoff" / "flat" / "s" / "flat.json").read_text())["path"] == \
        f"{out}/handoff/flat/s/tokens.bin"
    (out / "handoff" / "flat" / "s" / "tokens.bin").write_bytes(b"\0" * 32)
    assert handoffs.check(m, mdir, True)[0] == ["flat: ../handoff/flat/s/tokens.bin is not the stage's sequences"]
