"""MinHash-LSH near-duplicate detection: estimates, buckets, components, and quality on planted pairs."""
import gzip
import json
import random

import numpy as np
import pytest

from curation.core.graph import components
from curation.corpus.minhash import bucket_edges
from curation.recipe.lsh import candidate_probability, params_for_threshold
from curation.recipe.schema import MinHashDedup
from curation.steps.text.minhash import Shingler, band_keys, permutations, signature, signatures_batch
from tests.conftest import REPO

SHINGLES = Shingler(5)


def _jaccard(a: str, b: str) -> float:
    x, y = set(SHINGLES(a).tolist()), set(SHINGLES(b).tolist())
    return len(x & y) / len(x | y) if x | y else 1.0


def _demo_docs(limit=80):
    docs = []
    for path in sorted((REPO / "recipes" / "demo" / "corpus").glob("*/*.jsonl.gz")):
        docs += [json.loads(line)["text"] for line in gzip.open(path, "rt", encoding="utf-8")]
    return [d for d in docs if len(d.split()) > 150][:limit]


TRICKY = ["Hello,   World! 2024 — ÉTÉ_x on Monday in March", "I dont think we cant, 10km and 5kg or 3% of $4bn",
          "naïve café coöperate résumé; 12:30pm... e.g. U.S.A. i.e. o'clock gonna wanna", "", "two words",
          "emoji 🙂 and ＦＵＬＬＷＩＤＴＨ and tabs\tand\nnewlines  and\u00a0nbsp", "C++ c# .net node.js www.x.org"]


@pytest.mark.slow
def test_signatures_are_datatrove_signatures():
    """The memoised chunk tokenisation gives datatrove's words, shingles and signatures, bit for bit."""
    from datatrove.pipeline.dedup import MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.text import simplify_text

    theirs = MinhashDedupSignature("/tmp", config=MinhashConfig())
    a, b = permutations(112, 1)
    shingler = Shingler(5)
    assert shingler._spacy is not None  # English takes the memoised path, the one that needs proving
    docs = _demo_docs(40) + TRICKY
    for text in docs + docs:  # second pass: everything from the memo
        assert shingler.words(text) == theirs.word_tokenizer.word_tokenize(simplify_text(text))
        ours, their_shingles = signature(shingler(text), a, b), theirs.get_shingles(text)
        if their_shingles.size == 0:
            assert ours is None
        else:
            assert ours.reshape(14, 8).tolist() == theirs.get_signature(their_shingles)
    # the signature phase's input: every n-gram's hash, repeats included, gives the same minima
    full, empty = signatures_batch([shingler.hashes(t) for t in docs], a, b)
    for text, row, none in zip(docs, full, empty, strict=True):
        want = signature(shingler(text), a, b)
        assert none if want is None else np.array_equal(row, want)


@pytest.mark.slow
def test_a_memo_cleared_mid_text_gives_the_same_words(monkeypatch):
    """When the chunk memo reaches its bound it is cleared before the text's new chunks are learnt: every chunk
    of that text is learnt again (clearing after picking the unseen ones left the others out of the memo)."""
    import curation.steps.text.minhash as minhash
    docs = _demo_docs(20) + TRICKY
    want = [Shingler(5).words(t) for t in docs]
    monkeypatch.setattr(minhash, "_MEMO_LIMIT", 7)
    small = Shingler(5)
    assert [small.words(t) for t in docs + docs] == want + want
    assert len(small._memo) < 200


def test_signature_agreement_estimates_jaccard():
    a, b = permutations(512, seed=3)
    doc = _demo_docs(1)[0]
    words = doc.split()
    rng = random.Random(0)
    for frac in (0.02, 0.1, 0.3):
        edited = " ".join(w if rng.random() > frac else "zq" + w for w in words)
        est = float((signature(SHINGLES(doc), a, b) == signature(SHINGLES(edited), a, b)).mean())
        assert abs(est - _jaccard(doc, edited)) < 0.08


def test_params_from_threshold_and_recipe_rules():
    bands, rows = params_for_threshold(0.8)
    assert bands * rows <= 112 and candidate_probability(0.9, bands, rows) > 0.9
    assert candidate_probability(0.5, bands, rows) < 0.05
    assert MinHashDedup().lsh() == (14, 8)
    with pytest.raises(ValueError, match="either threshold or bands and rows"):
        MinHashDedup(threshold=0.8, bands=10)


def test_bucket_edges_and_components_keep_the_smallest_index():
    keys = np.array([5, 3, 5, 7, 3, 5], dtype=np.uint64)
    edges = bucket_edges(keys, np.zeros(6, np.int32))
    assert sorted(map(tuple, edges.tolist())) == [(0, 2), (0, 5), (1, 4)]
    assert components(6, edges).tolist() == [0, 1, 0, 3, 1, 0]
    # key 0 marks texts without shingles: they never form a bucket
    assert bucket_edges(np.array([0, 0, 4, 4], dtype=np.uint64), np.zeros(4, np.int32)).tolist() == [[2, 3]]
    # scope "source": same key in different groups is no edge
    assert bucket_edges(keys, np.array([0, 0, 1, 0, 0, 1], np.int32)).tolist() == [[1, 4], [2, 5]]
    # chains collapse to their minimum whatever the edge order
    chain = np.array([[8, 9], [3, 4], [4, 9], [1, 3]])
    assert components(10, chain)[[1, 3, 4, 8, 9]].tolist() == [1] * 5
    assert components(10, chain[::-1].copy()).tolist() == components(10, chain).tolist()


@pytest.mark.slow
def test_precision_and_recall_on_planted_near_duplicates():
    """Real documents with planted copies at measured Jaccard levels; truth by brute force.

    Positives are pairs with true Jaccard >= 0.75 (where the 14x8 S-curve passes 0.77), negatives
    everything else. The S-curve gives a candidate probability >= 0.988 at J >= 0.85 and <= 0.053 at
    J <= 0.5, so with copies planted at J ~0.9 and J ~0.3-0.5 we require recall >= 0.95 and
    precision >= 0.9."""
    rng = random.Random(7)
    originals = _demo_docs(60)
    docs, truth_pairs = list(originals), []
    for i, doc in enumerate(originals):
        words = doc.split()
        frac = 0.01 if i % 2 == 0 else 0.12
        edited = [w if rng.random() > frac else "zz" + w for w in words]
        if i % 3 == 0:
            edited = ["Cookie", "settings", "|", "Subscribe", "|", "Login"] + edited  # boilerplate change
        docs.append(" ".join(edited))
        truth_pairs.append((i, len(docs) - 1))
    a, b = permutations(112, 1)
    sigs = np.stack([signature(SHINGLES(d), a, b) for d in docs])
    keys = band_keys(sigs, 14, 8)
    edges = np.concatenate([bucket_edges(keys[:, band].copy(), np.zeros(len(docs), np.int32))
                            for band in range(14)])
    labels = components(len(docs), edges)
    detected = {(i, j) for i in range(len(docs)) for j in range(i + 1, len(docs)) if labels[i] == labels[j]}
    positives = {(i, j) for i, j in truth_pairs if _jaccard(docs[i], docs[j]) >= 0.75}
    positives |= {p for p in detected if _jaccard(docs[p[0]], docs[p[1]]) >= 0.75}
    assert 20 <= len(positives) <= 45  # the plant produced both kinds
    tp = len(detected & positives)
    recall, precision = tp / len(positives), tp / max(len(detected), 1)
    assert recall >= 0.95, (recall, precision)
    assert precision >= 0.9, (recall, precision)


def _docs(prefix: str, texts: list[str]) -> list[dict]:
    return [{"id": f"{prefix}{i}", "text": t} for i, t in enumerate(texts)]


@pytest.mark.slow
def test_incremental_dedup_against_an_earlier_run(tmp_path):
    from curation.commands.run import run
    from curation.errors import RecipeError
    from curation.recipe import load_recipe
    from tests.conftest import make_recipe, write_jsonl

    originals = _demo_docs(12)
    write_jsonl(tmp_path / "old" / "a.jsonl", _docs("old", originals[:6]))
    first = make_recipe(tmp_path / "old", {"web": [tmp_path / "old" / "a.jsonl"]},
                        extra="dedup: {exact: null, minhash: {}}")
    old = run(first, tmp_path / "out-old", progress=False)
    assert old.rows["clusters"] == []

    # new data: three re-crawls of old documents and three fresh ones
    new_texts = ["Cookie settings | Log in\n" + t + "\nAll rights reserved." for t in originals[:3]] + originals[6:9]
    write_jsonl(tmp_path / "new" / "b.jsonl", _docs("new", new_texts))
    extra = f"dedup: {{exact: null, minhash: {{index: [{tmp_path / 'out-old'}]}}}}"
    second = make_recipe(tmp_path / "new", {"web": [tmp_path / "new" / "b.jsonl"]}, extra=extra)
    res = run(second, tmp_path / "out-new", progress=False)
    assert res.rows["tokens"][0]["documents"] == 3
    near = {(d["reason"], d["records"]) for d in res.rows["drops"]}
    assert near == {("near_duplicate", 3)}
    kept = sorted(c["kept_source"] for c in res.rows["clusters"])
    assert kept == ["index:web"] * 3  # the earlier run's documents win and are not re-processed
    assert not (tmp_path / "out-new" / "processed" / "old").exists()

    mismatched = make_recipe(tmp_path / "new", {"web": [tmp_path / "new" / "b.jsonl"]},
                             extra=f"dedup: {{minhash: {{ngram: 3, index: [{tmp_path / 'out-old'}]}}}}")
    with pytest.raises(RecipeError, match="the settings must match"):
        from curation.plan.graph import load_plan
        load_plan(mismatched)
    assert load_recipe(second).recipe.dedup.minhash.index


def test_band_partitions_give_the_same_edges(tmp_path):
    """Splitting a band by hash range (the shuffle) changes which task finds an edge, never the edges
    (the signature files are laid out for 4 partitions: the other counts read whole bands, filtered)."""
    from curation.core.layout import edges_path, sig_path
    from curation.core.node import Node
    from curation.corpus.minhash import run_band
    from curation.corpus.minhash_sig import write_signatures

    rng = np.random.default_rng(0)
    shards = [("a", "0"), ("a", "1"), ("b", "0")]
    for source, shard in shards:  # few distinct keys, so buckets span shards and sources
        write_signatures(sig_path(tmp_path, source, shard), rng.integers(0, 40, (50, 3)).astype(np.uint64), 4,
                         "0" * 16)

    def edges(parts: int, scope: str) -> list:
        found = []
        for part in range(parts):
            spec = {"band": 1, "part": part, "partitions": parts, "scope": scope, "index": [], "shards": shards}
            run_band(tmp_path, Node("band", None, f"{parts}-{part}-{scope}", "fp", spec=spec))
            found += np.load(edges_path(tmp_path, 1, part)).tolist()
        return sorted(map(tuple, found))

    for scope in ("global", "source"):
        assert edges(1, scope) == edges(4, scope) == edges(7, scope)
    assert len(edges(1, "global")) > len(edges(1, "source")) > 0


def test_signatures_batch_equals_per_document_signatures():
    """The batched permutation pass gives bit-identical minima to `signature` per document, empty texts flagged."""
    import numpy as np

    from curation.steps.text.minhash import permutations, signature, signatures_batch
    rng = np.random.default_rng(7)
    a, b = permutations(112, 1)
    docs = [rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64) for n in (5, 0, 1, 300, 0, 2)]
    full, empty = signatures_batch(docs, a, b)
    assert empty.tolist() == [False, True, False, False, True, False]
    for d, sh in enumerate(docs):
        want = signature(sh, a, b)
        assert (full[d] == 0).all() if want is None else np.array_equal(full[d], want)
    assert signatures_batch([], a, b)[0].shape == (0, 112)


def test_the_mersenne_remainder_without_a_division():
    import numpy as np

    from curation.steps.text.minhash import MERSENNE, _mod_mersenne
    m = (1 << 61) - 1
    edges = [0, 1, m - 1, m, m + 1, 2 * m - 1, 2 * m, 2 * m + 1, 7 * (1 << 61) + m - 1, 2**63, 2**64 - 1]
    x = np.array(edges + list(np.random.default_rng(3).integers(0, 2**64 - 1, 10_000, dtype=np.uint64)), np.uint64)
    want = x % MERSENNE
    _mod_mersenne(x, np.empty_like(x))
    assert np.array_equal(x, want)


def _simplify_differences(code_points) -> list[str]:
    from datatrove.utils.text import TextNormConfig, simplify_text

    from curation.steps.text.minhash import _simplify
    cfg = TextNormConfig(norm_unicode_diacritics=False)   # Shingler strips diacritics itself, after
    bad = []
    for cp in code_points:
        c = chr(cp)
        for text in (f"{c}1{c}2 x{c}y {c}{c} z{c}", c):   # alone, paired, at either end, between digits
            if _simplify(text) != simplify_text(text, cfg):
                bad.append(f"U+{cp:04X} in {text!r}")
    return bad


def test_simplify_is_datatrove_simplify_text_on_the_common_code_points():
    """One substitution for punctuation and whitespace runs gives `simplify_text`'s text: every code point
    below U+3000 (Latin, Greek, Cyrillic, general punctuation, symbols) and one in 97 above, alone, paired,
    at either end and next to digits."""
    assert _simplify_differences([*range(0x3000), *range(0x3000, 0x110000, 97)]) == []


@pytest.mark.slow
def test_simplify_is_datatrove_simplify_text_on_every_assigned_code_point():
    import unicodedata
    assert _simplify_differences(cp for cp in range(0x110000) if unicodedata.category(chr(cp)) not in ("Cn", "Cs")) == []
