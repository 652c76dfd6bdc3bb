"""Top-fraction selection per language (`curation.corpus.select`): exact thresholds against a full sort,
the tie rule (canonical order), the same bytes for any worker count and task order, the ledger tables
checked against the step's counts, recipe validation, and memory that does not grow with the corpus."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from curation.commands.run import run
from curation.core.layout import drops_path, processed_path
from curation.corpus.select_radix import GroupStats, resolve_groups, to_key
from curation.errors import RecipeError
from curation.recipe import load_recipe
from curation.recipe.selection import Select
from tests.conftest import REPO, VOCAB, english_doc, write_jsonl

TOXICITY = REPO / "recipes" / "classifiers" / "models" / "demo-toxicity.ftz"
TOXIC = ["You are a pathetic idiot, so shut up.", "Du bist ein erbärmlicher Versager, also halt die Klappe."]


def _sorted_top(scores: np.ndarray, groups: np.ndarray, fraction: float) -> tuple[np.ndarray, dict]:
    """The reference: per group, a full sort by (score desc, position), the first ceil(f n) kept."""
    keep = np.zeros(scores.size, bool)
    thresholds = {}
    for g in np.unique(groups).tolist():
        idx = np.flatnonzero(groups == g)
        order = sorted(idx.tolist(), key=lambda i: (-scores[i], i))
        k = math.ceil(Decimal(repr(fraction)) * idx.size)
        keep[order[:k]] = True
        thresholds[g] = scores[order[k - 1]]
    return keep, thresholds


@pytest.mark.parametrize("kind", ["uniform", "float32", "ties", "wide"])
def test_radix_thresholds_equal_a_full_sort(kind):
    rng = np.random.default_rng(7)
    for trial in range(40):
        shards = []
        for _ in range(int(rng.integers(1, 6))):
            m = int(rng.integers(0, 80))
            if kind == "uniform":
                s = rng.random(m)
            elif kind == "float32":
                s = rng.random(m).astype(np.float32).astype(np.float64)
            elif kind == "ties":
                s = rng.choice([1.0000100135803223, 0.5, 0.5, 1e-5, 0.0, -2.0], m)
            else:
                s = rng.normal(size=m) * 10.0 ** rng.integers(-300, 300)
            shards.append((rng.integers(0, 4, m).astype(np.int64), s + 0.0))
        fraction = float(rng.choice([0.1, 0.3, 0.5, 1.0]))
        stats = GroupStats()
        for g, s in shards:
            stats.add("src", g, s)
        k = [math.ceil(Decimal(repr(fraction)) * n) for n in stats.counts(4)]
        found = resolve_groups(lambda shards=shards: iter(shards), stats, k)
        keep = np.concatenate([found.keep("src", g, s) for g, s in shards] + [np.zeros(0, bool)])
        groups = np.concatenate([g for g, _ in shards] + [np.zeros(0, np.int64)])
        scores = np.concatenate([s for _, s in shards] + [np.zeros(0)])
        want, thresholds = _sorted_top(scores, groups, fraction)
        assert (keep == want).all(), (kind, trial)
        for g, t in thresholds.items():
            assert found.key[g] == to_key(np.array([t]))[0]
        assert found.passes <= (4 if kind in ("float32", "ties") else 7)


def test_equal_scores_need_no_pass_and_the_earliest_are_kept():
    shards = [(np.zeros(3, np.int64), np.full(3, 0.7)), (np.zeros(4, np.int64), np.full(4, 0.7))]
    stats = GroupStats()
    for g, s in shards:
        stats.add("src", g, s)
    found = resolve_groups(lambda: iter(shards), stats, [5])
    assert found.passes == 0 and int(found.tied[0]) == 7 and int(found.quota[0]) == 5
    assert [found.keep("src", g, s).tolist() for g, s in shards] == [[True] * 3, [True, True, False, False]]


def test_top_fraction_is_the_decimal_the_recipe_writes():
    assert math.ceil(0.07 * 100) == 8   # the float 0.07 times 100 is 7.000000000000001
    assert math.ceil(Select(top_fraction=0.07).fraction("en") * 100) == 7
    per = Select(top_fraction={"default": 0.1, "deu": 0.25})
    assert per.fraction("deu_Latn") == Decimal("0.25") and per.fraction("fr") == Decimal("0.1")
    for bad in ({"top_fraction": 0}, {"top_fraction": 1.5}, {"top_fraction": {"en": 0.2}},
                {"by": "none", "top_fraction": {"default": 0.1}}):
        with pytest.raises(ValueError):
            Select(**bad)


# --- end to end --------------------------------------------------------------------------------

# (language, score) per document: ties at 0.5 straddle shards a/00000, a/00001 and source b
A0 = [("en", 0.9), ("en", 0.5), ("de", 0.8), ("en", 0.1), ("de", 0.5), ("en", 0.5)]
A1 = [("en", 0.5), ("de", 0.5), ("en", 0.95), ("en", 0.2), ("de", 0.3), ("en", 0.5)]
B0 = [("en", 0.5), ("de", 0.9), ("en", 0.05), ("de", 0.5), ("en", 0.5), ("de", 0.5)]


def _corpus(tmp: Path, reverse_a: bool = False, toxicity: bool = False) -> Path:
    def rows(prefix, docs, start):
        return [{"id": f"{prefix}{i}", "text": english_doc(start + i) + (" Grüße aus Bern." if lang == "de" else ""),
                 "language": lang, "score": score} for i, (lang, score) in enumerate(docs)]
    a0 = write_jsonl(tmp / "a0.jsonl", rows("a0-", A0, 0))
    a1 = write_jsonl(tmp / "a1.jsonl", rows("a1-", A1, 10))
    b_rows = rows("b0-", B0, 20)
    # an exact copy of the best English document of a/00001: exact dedup removes it before selection
    b_rows.append({"id": "b0-copy", "text": english_doc(12), "language": "en", "score": 0.95})
    if toxicity:
        b_rows += [{"id": f"b0-tox{i}", "text": t, "language": lang, "score": 0.99}
                   for i, (t, lang) in enumerate(zip(TOXIC, ("en", "de")))]
    b0 = write_jsonl(tmp / "b0.jsonl", b_rows)
    paths_a = [str(a1), str(a0)] if reverse_a else [str(a0), str(a1)]
    tox = f"filters: [{{type: toxicity, model: {TOXICITY}}}]" if toxicity else "filters: []"
    select = "{top_fraction: 0.3, by: language, field: score}"
    lines = ["name: t", f"vocabulary: {VOCAB}", "dedup: {exact: {scope: global}}", "sources:"]
    for name, paths in (("a", paths_a), ("b", [str(b0)])):
        lines += [f"  - name: {name}", "    license: MIT",
                  f"    input: {{paths: {json.dumps(paths)}, id_field: id, metadata_fields: [language, score]}}",
                  f"    {tox}", f"    select: {select}"]
    path = tmp / "recipe.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _canonical(res) -> list[dict]:
    """Every processed document that reached `select`, in canonical order (source order, shard, row)."""
    out = res.out
    docs = []
    for node in res.plan.process:
        earlier = set()
        for phase in ("exact",):
            earlier |= set(pq.read_table(drops_path(out, phase, node.source, node.shard)).column("id").to_pylist())
        t = pq.read_table(processed_path(out, node.source, node.shard), columns=["id", "meta"]).to_pylist()
        docs += [{"source": node.source, "id": r["id"], **json.loads(r["meta"])} for r in t if r["id"] not in earlier]
    return docs


def _kept(res) -> set[str]:
    dropped = set()
    for node in res.plan.process:
        t = pq.read_table(drops_path(res.out, "select", node.source, node.shard)).to_pylist()
        assert {r["reason"] for r in t} <= {"below_quality_quantile"}
        dropped |= {f"{node.source}/{r['id']}" for r in t}
    return {f"{d['source']}/{d['id']}" for d in _canonical(res)} - dropped


def _expect(res, fraction=0.3):
    docs = _canonical(res)
    scores = np.array([d["score"] for d in docs])
    langs = np.array([d["language"] for d in docs])
    keep, thresholds = _sorted_top(scores, langs, fraction)
    return {f"{d['source']}/{d['id']}" for d, k in zip(docs, keep) if k}, thresholds, docs


@pytest.mark.slow
def test_selection_keeps_exactly_the_top_fraction_per_language_ties_in_canonical_order(tmp_path):
    res = run(_corpus(tmp_path), tmp_path / "out", progress=False)
    want, thresholds, docs = _expect(res)
    assert "b/b0-copy" not in {f"{d['source']}/{d['id']}" for d in docs}   # dedup ran first
    assert _kept(res) == want
    rows = {r["language"]: r for r in res.rows["quality_thresholds"]}
    n = {lang: sum(d["language"] == lang for d in docs) for lang in ("en", "de")}
    assert n == {"en": 11, "de": 7}
    for lang, r in rows.items():
        assert (r["documents"], r["kept"]) == (n[lang], math.ceil(Decimal("0.3") * n[lang]))
        assert r["threshold"] == thresholds[lang] and r["top_fraction"] == 0.3 and r["field"] == "score"
    # en keeps 0.95 and 0.9, then two of the six documents at 0.5: the earliest, a/00000's; de likewise one of four
    assert [(rows[g]["threshold"], rows[g]["above"], rows[g]["tied"], rows[g]["tied_kept"]) for g in ("en", "de")] == \
        [(0.5, 2, 6, 2), (0.5, 2, 4, 1)]
    assert want == {"a/a1-2", "a/a0-0", "a/a0-1", "a/a0-5", "b/b0-1", "a/a0-2", "a/a0-4"}
    sel = {(r["source"], r["language"]): (r["documents"], r["kept"]) for r in res.rows["quality_selected"]}
    assert sum(d for d, _ in sel.values()) == len(docs) and sum(k for _, k in sel.values()) == len(want)
    steps = {(r["source"], r["step"]): r for r in res.rows["steps"]}
    for src in ("a", "b"):
        st = steps[(src, "select")]
        assert st["records_in"] == sum(d for (s, _), (d, _) in sel.items() if s == src)
        assert st["records_out"] == sum(k for (s, _), (_, k) in sel.items() if s == src)
    hist = [h for h in res.rows["quality_histogram"] if h["language"] == "en"]
    assert sum(h["documents"] for h in hist) == 11 and sum(h["kept"] for h in hist) == 4
    report = (res.out / "reports" / "report.md").read_text()
    assert "## Quality selection" in report and "quality.png" in report
    assert (res.out / "reports" / "quality.png").stat().st_size > 5000


@pytest.mark.slow
def test_a_different_shard_order_moves_only_the_tie_breaks(tmp_path):
    """Thresholds are a property of the scores alone; which of the tied documents are kept follows the
    canonical order, here with a/00001 listed first."""
    one = run(_corpus(tmp_path / "x"), tmp_path / "o1", progress=False)
    two = run(_corpus(tmp_path / "y", reverse_a=True), tmp_path / "o2", progress=False)
    cols = ("language", "documents", "kept", "threshold", "above", "tied", "tied_kept")
    assert [{c: r[c] for c in cols} for r in one.rows["quality_thresholds"]] == \
        [{c: r[c] for c in cols} for r in two.rows["quality_thresholds"]]
    assert _kept(two) == _expect(two)[0] and _kept(one) == _expect(one)[0]
    assert _kept(two) - _kept(one) == {"a/a1-0", "a/a1-5", "a/a1-1"}


@pytest.mark.slow
def test_ray_with_two_workers_selects_the_same_documents(tmp_path, ray_local):
    """Two Ray workers, tasks at once in other processes, against the local executor's one at a time here."""
    recipe = _corpus(tmp_path, toxicity=True)
    local = run(recipe, tmp_path / "local", progress=False)
    ray = run(recipe, tmp_path / "ray", progress=False, executor="ray", workers=2)
    assert ray.executor == "ray"
    files = sorted(p.relative_to(local.out) for p in (local.out / "work" / "select").rglob("*.*"))
    assert len(files) >= 3 + 3 + 1
    assert [f for f in files if (local.out / f).read_bytes() != (ray.out / f).read_bytes()] == []
    for table in ("quality_thresholds", "quality_selected", "quality_histogram", "toxicity"):
        assert local.rows[table] == ray.rows[table]
    tox = {(r["source"], r["language"]): (r["scored"], r["toxic"]) for r in local.rows["toxicity"]}
    assert tox[("b", "en")][1] == 1 and tox[("b", "de")][1] == 1 and tox[("a", "en")] == (8, 0)


def _validate(tmp_path, select: str = "{field: score}", filters: str = "[]", fields: str = "[language, score]",
              extra: str = "", modality: str = "") -> None:
    f = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "x", "score": 1}])
    tmp_path.joinpath("r.yaml").write_text("\n".join([
        "name: t", f"vocabulary: {VOCAB}", extra, "sources:", "  - name: a", "    license: MIT",
        f"    input: {{paths: [{f}], id_field: id, metadata_fields: {fields}}}", f"    filters: {filters}",
        f"    select: {select}", modality]) + "\n")
    load_recipe(tmp_path / "r.yaml", resolve_inputs=False)


def test_validation_refuses_selection_on_a_score_nobody_writes(tmp_path):
    _validate(tmp_path)   # the input carries language and score
    with pytest.raises(RecipeError, match=r"never writes meta\['quality_score'\].*type: quality"):
        _validate(tmp_path, select="{}")
    with pytest.raises(RecipeError, match="has no language"):
        _validate(tmp_path, fields="[score]")
    _validate(tmp_path, select="{field: score, by: none}", fields="[score]")
    _validate(tmp_path, select="{}", fields="[]",
              filters=f"[{{type: quality, model: {REPO}/recipes/classifiers/models/demo-quality.ftz}}]")
    with pytest.raises(RecipeError, match="needs dedup.minhash.score_field"):
        _validate(tmp_path, extra="dedup: {minhash: {keep: highest_quality}}")
    with pytest.raises(RecipeError, match=r"dedup.minhash.keep: highest_quality: source 'a' never writes"):
        _validate(tmp_path, extra="dedup: {minhash: {keep: highest_quality, score_field: nope}}")
    _validate(tmp_path, extra="dedup: {minhash: {keep: highest_quality, score_field: score}}")


def test_validation_refuses_a_pool_with_two_rules(tmp_path):
    f = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": "x"}])
    body = ["name: t", f"vocabulary: {VOCAB}", "sources:"]
    for n, sel in (("a", "{field: score, top_fraction: 0.1}"), ("b", "{field: score, top_fraction: 0.2}")):
        body += [f"  - name: {n}", "    license: MIT",
                 f"    input: {{paths: [{f}], metadata_fields: [language, score]}}", f"    select: {sel}"]
    tmp_path.joinpath("r.yaml").write_text("\n".join(body) + "\n")
    with pytest.raises(RecipeError, match="select pool 'default': sources 'a' and 'b' declare different"):
        load_recipe(tmp_path / "r.yaml", resolve_inputs=False)
    tmp_path.joinpath("r.yaml").write_text("\n".join(body).replace("top_fraction: 0.2", "top_fraction: 0.2, pool: b"))
    loaded = load_recipe(tmp_path / "r.yaml", resolve_inputs=False)
    assert [s.select.pool for s in loaded.recipe.sources] == ["default", "b"]


MEMORY_PROBE = r"""
import sys, tracemalloc
from pathlib import Path
import numpy as np, pyarrow as pa
from curation.core.atomic import atomic_write_parquet
from curation.core.node import Node
from curation.corpus.select import SCORES, SelectPhase, run_resolve, scores_path
from curation.recipe.selection import Select
out, shards, rows = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
names = []
for s in range(shards):
    ids = [f"doc-{s}-{i:07d}" for i in range(rows)]
    groups = rng.choice(["en", "de", "fr"], rows).tolist()
    scores = rng.random(rows).astype(np.float32).astype(np.float64)
    atomic_write_parquet(scores_path(out, "src", f"{s:05d}"), pa.table({"id": ids, "group": groups, "score": scores}, schema=SCORES))
    names.append(("src", f"{s:05d}"))
node = Node("select_resolve", None, "default", "fp", spec={"cfg": Select().model_dump(mode="json"), "shards": names})
pool = pa.default_memory_pool()
tracemalloc.start()
result = run_resolve(out, node, SelectPhase())
print(tracemalloc.get_traced_memory()[1] + pool.max_memory(), result["kept"], result["passes"])
"""


def _resolve_peak(tmp: Path, shards: int, rows: int) -> tuple[int, int]:
    p = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(tmp), str(shards), str(rows)], capture_output=True,
                       text=True, check=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    peak, kept, _ = map(int, p.stdout.split())
    return peak, kept


@pytest.mark.slow
def test_resolve_memory_follows_the_shard_not_the_corpus(tmp_path):
    """Four times the corpus in four times as many shards of the same size: the resolve task's peak
    (Python and numpy heap, tracemalloc, plus Arrow's pool) stays that of one shard."""
    small, kept_small = _resolve_peak(tmp_path / "s", 4, 20_000)
    large, kept_large = _resolve_peak(tmp_path / "l", 16, 20_000)
    assert 8_000 <= kept_small <= 8_003 and 32_000 <= kept_large <= 32_003   # ceil per language
    assert large < 1.25 * small, (small, large)
