"""Long-context extension steps (`curation.mixture.extension`, Apertus 1.5 §3.3 and Table 5): the planner on
known lengths, the recipe checks, and recipes/long_context.yaml end to end. Expected plans are recomputed
here from the recipe's numbers with exact fractions, and the drawn tokens from the shards' lengths and the
manifests' selection plans, not from the planner's own bookkeeping."""
from __future__ import annotations

import gzip
import json
import unicodedata
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from curation.mixture.extension import COOLDOWN, apportion, plan_extension
from curation.recipe.load import _fingerprinted
from curation.recipe.schema import Recipe
from curation.recipe.stages import Extension
from tests.conftest import REPO, VOCAB

LC_RECIPE = REPO / "recipes" / "long_context.yaml"


def _largest_remainder(total: int, weights: list) -> list[int]:
    """The split the recipe asks for, with exact fractions (independent of the planner's floats)."""
    w = [Fraction(str(x)) for x in weights]
    exact = [total * x / sum(w) for x in w]
    out = [int(x) for x in exact]   # floor: every part is >= 0
    order = sorted(range(len(w)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:total - sum(out)]:
        out[i] += 1
    return out


def test_apportion_adds_up_exactly_and_follows_the_weights():
    for total, weights in [(1000, [0.256, 0.171, 0.281, 0.055, 0.237]), (7, [1, 1, 1]), (0, [1, 2]), (5, [0, 0])]:
        got = apportion(total, weights)
        assert sum(got) == (total if sum(weights) else 0)
        if sum(weights):
            assert got == _largest_remainder(total, weights)


def _ext(**over) -> Extension:
    spec = {"start_from": "cool", "budget_tokens": 20_000,
            "cooldown_subsample": {"stage": "cool", "share": 0.5},
            "classes": {"text": {"share": 0.6, "sources": ["a", "b"]},
                        "image": {"share": 0.4, "sources": ["img"], "top_up": {"min_tokens": 20, "max_tokens": 200}}}}
    spec.update(over)
    return Extension.model_validate(spec)


def _lengths() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"a": rng.integers(10, 1000, 400), "b": rng.integers(10, 1000, 100),
            "img": np.concatenate([rng.integers(5, 300, 300), rng.integers(501, 1000, 3)]),
            "c": rng.integers(10, 500, 200)}


def test_plan_draws_each_part_from_its_length_range_and_no_document_twice():
    ext, lens = _ext(), _lengths()
    plan, classes = plan_extension("s", 1000, ext, 500, ({"a": 0.25, "c": 0.75}, 500), lens, ["a", "b", "img", "c"])
    by = {c.name: c for c in classes}
    assert [c.name for c in classes] == [COOLDOWN, "text", "image"]
    # planned: half the budget for the subsample, the rest 60/40
    assert by[COOLDOWN].planned_tokens == 10_000 and by["text"].planned_tokens == 6_000
    assert by["image"].planned_tokens == 4_000
    picked = {s: [] for s in lens}
    for c in classes:
        for (src, part), idx in c.picks.items():
            length = lens[src][idx]
            if part == "native":
                assert ((length > 500) & (length <= 1000)).all()
            elif part == "top_up":
                assert ((length >= 20) & (length <= 200)).all(), "the top-up drew outside its range"
            else:
                assert (length <= 500).all()
            picked[src] += list(idx)
        assert c.realised_tokens == sum(int(lens[s][i].sum()) for (s, _), i in c.picks.items())
    for src, idx in picked.items():
        assert len(idx) == len(set(idx)), f"{src}: a document drawn twice"
        assert sorted(idx) == list(np.flatnonzero(plan.counts[src]))
    # the image class's native pool (3 documents) falls short, so the top-up fills it to its tokens
    img = by["image"]
    assert img.native_tokens == int(lens["img"][lens["img"] > 500].sum()) < 4_000
    assert img.topup_tokens > 0 and abs(img.realised_tokens - 4_000) <= 200 // 2
    # the text class splits over a and b in proportion to their native pools
    pool = {s: int(lens[s][lens[s] > 500].sum()) for s in ("a", "b")}
    want = _largest_remainder(6_000, [pool["a"], pool["b"]])
    for s, w in zip(("a", "b"), want):
        assert abs(by["text"].by_source[s] - w) <= 1000 // 2
    # every drawn document is packed once, into sequences no longer than the step's
    assert sorted(map(tuple, plan.packing[:, :2].tolist())) == sorted(
        ((["a", "b", "img", "c"].index(s)), int(i)) for s in lens for i in np.flatnonzero(plan.counts[s]))
    seqs = {}
    order = ["a", "b", "img", "c"]
    for src, doc, seq in plan.packing.tolist():
        seqs[seq] = seqs.get(seq, 0) + int(lens[order[src]][doc])
    assert max(seqs.values()) <= 1000 and len(seqs) == plan.sequences


def test_same_inputs_same_plan():
    a = plan_extension("s", 1000, _ext(), 500, ({"a": 1.0}, 500), _lengths(), ["a", "b", "img", "c"])[0]
    b = plan_extension("s", 1000, _ext(), 500, ({"a": 1.0}, 500), _lengths(), ["a", "b", "img", "c"])[0]
    assert all(np.array_equal(a.counts[s], b.counts[s]) for s in a.counts)
    assert np.array_equal(a.packing, b.packing)


def _recipe(stages: list, sources=("a", "b", "img")) -> dict:
    return {"name": "t", "vocabulary": str(VOCAB), "stages": stages,
            "sources": [{"name": s, "license": "MIT", "input": {"paths": ["x.jsonl"]}} for s in sources]}


COOL = {"name": "cool", "seq_length": 128, "budget_tokens": 1000, "mixture": {"a": {"weight": 1}}}


def _step(name="s1", seq=512, **ext):
    spec = {"start_from": "cool", "budget_tokens": 1000, "native_above": 256,
            "cooldown_subsample": {"stage": "cool", "share": 0.5},
            "classes": {"text": {"share": 0.5, "sources": ["a"]},
                        "image": {"share": 0.5, "sources": ["img"], "top_up": {"min_tokens": 16, "max_tokens": 256}}}}
    spec.update(ext)
    return {"name": name, "seq_length": seq, "extension": spec}


@pytest.mark.parametrize("stages, message", [
    ([COOL, _step(classes={"t": {"share": 0.5, "sources": ["a"]}})], "must add up to 1"),
    ([COOL, _step(start_from="later"), {**COOL, "name": "later"}], "not an earlier stage"),
    ([COOL, _step(seq=128, native_above=None, classes={"t": {"share": 1.0, "sources": ["a"]}})],
     "must extend the context"),
    ([COOL, _step(native_above=None, start_from="cool")], "overlaps the native range"),
    ([COOL, _step(native_above=600)], "none fits its seq_length"),
    ([COOL, _step(name="s1"), _step(name="s2", seq=1024, start_from="s1", cooldown_subsample={"stage": "s1",
                                                                                              "share": 0.5})],
     "planned from a mixture"),
    ([COOL, _step(cooldown_subsample={"stage": "cool", "share": 0.5, "max_tokens": 300})], "overlap the native"),
    ([COOL, _step(classes={"t": {"share": 0.5, "sources": ["a"]}, "u": {"share": 0.5, "sources": ["a"]}})],
     "give each source one class"),
    ([COOL, _step(classes={"t": {"share": 1.0, "sources": ["zz"]}})], "unknown source(s) ['zz']"),
    ([COOL, {**_step(), "budget_tokens": 5}], "drop mixture, category_targets and budget_tokens"),
    ([COOL, {**_step(), "handoff": "blend"}], "drop `handoff: blend`"),
])
def test_recipe_checks_refuse_a_step_that_cannot_be_planned(stages, message):
    with pytest.raises(ValidationError) as err:
        Recipe.model_validate(_recipe(stages))
    assert message in str(err.value)


def test_an_unset_extension_stays_out_of_the_recipe_fingerprint():
    plain = Recipe.model_validate(_recipe([COOL]))
    assert all("extension" not in st for st in _fingerprinted(plain)["stages"])
    stepped = Recipe.model_validate(_recipe([COOL, _step()]))
    assert "extension" in _fingerprinted(stepped)["stages"][1]
    from curation.mixture.manifests import stage_fingerprint
    settings = plain.stages[0].model_dump(mode="json", exclude={"handoff", "trainers", "reasoning", "extension"})
    from curation.core.hashing import fingerprint
    assert stage_fingerprint(plain.stages[0], []) == fingerprint({"stage": settings, "sources": []})


# --- recipes/long_context.yaml end to end --------------------------------------------------------------

@pytest.fixture(scope="module")
def lc_run(long_context_run):
    """The output folder of recipes/long_context.yaml, run once per session (`tests/sessions.py`)."""
    return long_context_run.out


def _rows(out: Path, table: str) -> list[dict]:
    import pyarrow.parquet as pq
    return pq.read_table(out / "ledger" / f"{table}.parquet").to_pylist()


def _selected(out: Path, manifest: dict, source: str) -> np.ndarray:
    """Lengths of the documents a step's plan selects from `source` (read from the shards' index)."""
    from curation.shards import read_index
    entry = next(s for s in manifest["sources"] if s["name"] == source)
    _, lengths, _, _ = read_index(out / "manifests" / f"{entry['prefix']}.idx")
    if "plan" not in entry:
        return np.zeros(0, dtype=np.int64)
    counts = np.load(out / "manifests" / entry["plan"]["path"])
    assert set(np.unique(counts)) <= {0, 1}
    return np.asarray(lengths, dtype=np.int64)[counts.astype(bool)]


@pytest.mark.slow
def test_the_four_steps_are_planned_as_the_recipe_asks(lc_run):
    spec = yaml.safe_load(LC_RECIPE.read_text())
    stages = spec["stages"]
    steps = [st for st in stages if "extension" in st]
    assert [st["seq_length"] for st in steps] == [512, 1024, 2048, 4096]
    rows = _rows(lc_run, "lc_classes")
    seq = {st["name"]: st["seq_length"] for st in stages}
    cool_rows = {r["source"]: r for r in _rows(lc_run, "mixture") if r["stage"] == "cooldown"}
    prev = "cooldown"
    for st in steps:
        ext = st["extension"]
        manifest = json.loads((lc_run / "manifests" / f"{st['name']}.json").read_text())
        # each step starts from the one before, and says so in its manifest and the ledger
        assert ext["start_from"] == prev
        assert manifest["training"]["start_from"] == prev and manifest["long_context"]["start_from"] == prev
        stage_row = next(r for r in _rows(lc_run, "stages") if r["stage"] == st["name"])
        assert json.loads(stage_row["training"])["start_from"] == prev
        prev = st["name"]
        mine = {r["class"]: r for r in rows if r["stage"] == st["name"]}
        assert list(mine) == [COOLDOWN, *ext["classes"]]
        budget, share = ext["budget_tokens"], Fraction(str(ext["cooldown_subsample"]["share"]))
        sub = round(share * budget)
        assert mine[COOLDOWN]["planned_tokens"] == sub
        want = _largest_remainder(budget - sub, [c["share"] for c in ext["classes"].values()])
        assert [mine[k]["planned_tokens"] for k in ext["classes"]] == want
        assert sum(r["planned_tokens"] for r in mine.values()) == budget
        native_above = ext.get("native_above", seq[ext["start_from"]])
        # native tokens: what the plans select of the class's sources in the native range
        for name, c in ext["classes"].items():
            r = mine[name]
            assert r["share"] == c["share"] and r["native_lower"] == native_above
            assert r["native_upper"] == st["seq_length"] and r["seq_length"] == st["seq_length"]
            native = sum(int(x[x > native_above].sum()) for x in (_selected(lc_run, manifest, s) for s in c["sources"]))
            assert r["native_tokens"] == native, (st["name"], name)
            short = sum(int(x[x <= native_above].sum()) for x in (_selected(lc_run, manifest, s) for s in c["sources"]))
            cooled = sum(int(p.split("=")[1]) for p in mine[COOLDOWN]["sources"].split(", ")
                         if p.split("=")[0] in c["sources"])
            assert r["topup_tokens"] == short - cooled
            assert r["realised_tokens"] == r["native_tokens"] + r["topup_tokens"]
            if c.get("top_up"):
                lo, hi = c["top_up"]["min_tokens"], c["top_up"]["max_tokens"]
                assert (r["topup_min"], r["topup_max"]) == (lo, hi)
                # sources outside the cooldown subsample: every short document they give is a top-up one
                for s in c["sources"]:
                    if cool_rows[s]["effective_tokens"] == 0:
                        x = _selected(lc_run, manifest, s)
                        assert ((x[x <= native_above] >= lo) & (x[x <= native_above] <= hi)).all()
            else:
                assert r["topup_tokens"] == 0 and r["topup_min"] is None
        # the subsample: documents up to native_above, from the cooldown's sources only
        assert mine[COOLDOWN]["native_upper"] == ext["cooldown_subsample"].get("max_tokens", native_above)
        for part in mine[COOLDOWN]["sources"].split(", "):
            assert cool_rows[part.split("=")[0]]["effective_tokens"] > 0
        # what the manifest plans is what the classes realised, packed into sequences of the step's length
        total = sum(r["realised_tokens"] for r in mine.values())
        assert sum(s["plan"]["tokens"] for s in manifest["sources"] if "plan" in s) == total
        assert manifest["megatron"]["mode"] == "packed" and manifest["seq_length"] == st["seq_length"]
        flags = {f["message"].split(" reached")[0] for f in _rows(lc_run, "mixture_flags")
                 if f["stage"] == st["name"] and f["kind"] == "class_short"}
        assert flags == {("the cooldown subsample" if k == COOLDOWN else f"class '{k}'")
                         for k, r in mine.items() if r["realised_tokens"] < r["planned_tokens"]}
    # the image class is topped up where its native pool falls short (the demo's images are short)
    image = [r for r in rows if r["class"] == "image"]
    assert all(r["topup_tokens"] > 0 for r in image) and image[0]["native_tokens"] > 0


@pytest.mark.slow
def test_the_report_holds_table_5_as_the_ledger_does(lc_run):
    md = (lc_run / "reports" / "report.md").read_text()
    rows = _rows(lc_run, "lc_classes")
    head = md.index("### Long-context extension: tokens per class and step")
    lines = [ln for ln in md[head:].split("\n\n")[2].splitlines() if ln.startswith("| lc-")]
    assert [ln.split(" | ")[0].strip("| ") for ln in lines] == ["lc-32k", "lc-65k", "lc-131k", "lc-262k"]
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        step = cells[0]
        mine = [r for r in rows if r["stage"] == step and r["class"] != COOLDOWN]
        beyond = sum(r["realised_tokens"] for r in mine)
        assert cells[3:3 + len(mine)] == [f"{r['realised_tokens']:,} ({100 * r['realised_tokens'] / beyond:.1f}%)"
                                          for r in mine]
        assert cells[3 + len(mine)] == f"{beyond:,}"
    assert "### Long-context extension: tokens per source and step" in md


@pytest.mark.slow
def test_the_synthetic_task_examples_the_steps_train_on_have_verified_answers(lc_run):
    """Each task example a step selects is, token for token, the one `make_task` builds from its page,
    and its answers hold against the independent computation of tests/steps/text/test_longtasks.py."""
    from curation.core.record import QuarantineSink, Record
    from curation.shards import read_index
    from curation.shards.indexed import read_tokens
    from curation.steps.text import longtasks as lt
    from curation.steps.text.tokenize import TextTokenizer
    from tests.chats import vocab
    from tests.steps.text.test_longtasks import _check

    spec = yaml.safe_load(LC_RECIPE.read_text())
    tasks = next(s for s in spec["sources"] if s["name"] == "tasks")["synthetic_tasks"]
    settings = {"weights": {"cwe": 0.5, "docorder": 0.3, "needles": 0.2}, "seed": 0, **tasks}
    pages = {}
    for path in sorted((REPO / "recipes/demo/corpus/web_de").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                pages[str(row["id"])] = unicodedata.normalize("NFC", row["text"])
    step = TextTokenizer(vocab(), tasks=settings, source="tasks", sink=QuarantineSink())
    built = {}
    for rec in step.handle([Record(i, "tasks", t) for i, t in pages.items()]):
        if isinstance(rec, Record):
            built[rec.shards[""][0].tobytes()] = rec.id
    prefix = lc_run / "tokenized" / "tasks" / "tasks"
    _, lengths, pointers, _ = read_index(prefix.with_suffix(".idx"))
    tokens = read_tokens(prefix)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    checked = set()
    for st in ("lc-32k", "lc-65k", "lc-131k", "lc-262k"):
        plan = np.load(lc_run / "manifests" / "plans" / st / "tasks.npy")
        for i in np.flatnonzero(plan):
            doc = tokens[starts[i]:starts[i] + lengths[i]]
            doc_id = built.get(doc.astype(np.int32).tobytes())
            assert doc_id is not None, f"{st}: task example {i} is not one make_task builds from a page"
            task = lt.make_task(pages[doc_id], doc_id, seed=settings["seed"], weights=settings["weights"],
                                hard_below_words=settings["hard_below_words"])
            _check(task, pages[doc_id])
            checked.add(task.kind)
    assert checked, "no step selected a task example"
