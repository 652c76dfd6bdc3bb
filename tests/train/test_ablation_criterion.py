"""Soofi S Appendix C's criterion, checked against independent computations on known inputs: fractional
ranks with ties, the average rank, the acc_norm normalisation on a hand-made item, the checkpoints of
the learning curve, the Table 13 marks and the recipe settings' refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.stats import rankdata

from curation.commands.ablate import checkpoint_steps
from curation.errors import RecipeError
from curation.mixture.ranks import average_ranks, best_two, fractional_ranks, order_candidates
from curation.recipe.stages import Ablation, ChoiceSet
from curation.report.ablation import markdown, terminal_rows
from curation.train.choice import load_choice_set, pick  # torch and duckdb load at collection, not in a test


def _rank_by_counting(values: dict[str, float], higher_is_better: bool) -> dict[str, float]:
    """The fractional rank from its definition, without sorting: 1 + the candidates strictly better
    + half of the others tied with it (a tie over places p..q has the mean (p + q) / 2)."""
    better = (lambda a, b: a > b) if higher_is_better else (lambda a, b: a < b)
    return {k: 1 + sum(better(w, v) for w in values.values())
            + (sum(w == v for w in values.values()) - 1) / 2 for k, v in values.items()}


def test_fractional_ranks_share_the_mean_of_the_tied_places():
    # bits per byte, lower is better: b and c tie for places 2 and 3, so both get 2.5
    assert fractional_ranks({"a": 0.8, "b": 0.9, "c": 0.9, "d": 1.2}, higher_is_better=False) == \
        {"a": 1.0, "b": 2.5, "c": 2.5, "d": 4.0}
    # accuracy, higher is better: all three tied share place 2
    assert fractional_ranks({"x": 0.5, "y": 0.5, "z": 0.5}, higher_is_better=True) == {"x": 2.0, "y": 2.0, "z": 2.0}
    with pytest.raises(ValueError, match="non-finite"):
        fractional_ranks({"a": float("nan"), "b": 1.0}, False)


def test_fractional_ranks_match_the_counting_definition_on_random_tables_with_ties():
    rng = np.random.default_rng(13)
    for trial in range(200):
        n = int(rng.integers(2, 9))
        # few distinct values, so most tables hold ties (two-, three-way, all equal)
        values = {f"D{i:02d}": float(rng.choice([0.61, 0.7, 0.7000001, 0.85])) for i in range(n)}
        for higher in (False, True):
            got = fractional_ranks(values, higher)
            assert got == _rank_by_counting(values, higher), (trial, values, higher)
            keys = list(values)          # and scipy's average-method ranking of the same numbers
            x = np.array([values[k] for k in keys])
            assert got == dict(zip(keys, rankdata(-x if higher else x, method="average").tolist()))
            assert sum(got.values()) == n * (n + 1) / 2          # ranks always fill the places 1..n
        flipped = fractional_ranks({k: -v for k, v in values.items()}, True)
        assert flipped == fractional_ranks(values, False)        # direction: lower-better = negated higher-better


def test_average_rank_over_four_signals_matches_a_hand_computation():
    table = {"D01": {"en_bpb": 0.70, "de_bpb": 0.52, "en_acc": 0.40, "de_acc": 0.61},
             "D02": {"en_bpb": 0.72, "de_bpb": 0.50, "en_acc": 0.42, "de_acc": 0.55},
             "D03": {"en_bpb": 0.75, "de_bpb": 0.52, "en_acc": 0.38, "de_acc": 0.55}}
    higher = {"en_bpb": False, "de_bpb": False, "en_acc": True, "de_acc": True}
    got = average_ranks(table, higher)
    # by hand: en_bpb 1,2,3; de_bpb 2.5,1,2.5; en_acc 2,1,3; de_acc 1,2.5,2.5
    assert got["D01"]["ranks"] == {"en_bpb": 1, "de_bpb": 2.5, "en_acc": 2, "de_acc": 1}
    assert got["D01"]["average_rank"] == pytest.approx((1 + 2.5 + 2 + 1) / 4)
    assert got["D02"]["average_rank"] == pytest.approx((2 + 1 + 1 + 2.5) / 4)
    assert got["D03"]["average_rank"] == pytest.approx((3 + 2.5 + 3 + 2.5) / 4)
    # D01 and D02 tie on the terminal rank (1.625): R_all decides, then the name
    terminal = {c: r["average_rank"] for c, r in got.items()}
    assert order_candidates(terminal, {"D01": 2.0, "D02": 1.8, "D03": 2.9}) == ["D02", "D01", "D03"]
    assert order_candidates(terminal, {"D01": 2.0, "D02": 2.0, "D03": 2.9}) == ["D01", "D02", "D03"]


def test_best_and_second_best_marks_share_ties():
    assert best_two({"a": 0.5, "b": 0.4, "c": 0.4, "d": 0.6}, higher_is_better=False) == ({"b", "c"}, {"a"})
    assert best_two({"a": 1.0, "b": 1.0}, higher_is_better=True) == ({"a", "b"}, set())


def test_average_ranks_match_an_independent_computation_on_random_tables():
    rng = np.random.default_rng(7)
    higher = {"en_bpb": False, "de_bpb": False, "en_acc": True, "de_acc": True}
    for _ in range(50):
        cands = [f"D{i:02d}" for i in range(int(rng.integers(2, 7)))]
        table = {c: {"en_bpb": float(rng.choice([0.9, 1.0, 1.1])), "de_bpb": float(rng.choice([0.8, 0.95])),
                     "en_acc": float(rng.choice([0.25, 0.3, 0.35])), "de_acc": float(rng.choice([0.2, 0.4]))}
                 for c in cands}
        got = average_ranks(table, higher)
        for c in cands:
            mine = [_rank_by_counting({d: table[d][s] for d in cands}, hi)[c] for s, hi in higher.items()]
            assert got[c]["ranks"] == dict(zip(higher, mine))
            assert got[c]["average_rank"] == pytest.approx(sum(mine) / 4)


def test_acc_norm_divides_the_log_likelihood_by_the_choice_length():
    choices = ("cat", "elephant")          # 3 and 8 characters
    ll = [-6.0, -12.0]                     # unnormalized: "cat" wins; per character -2.0 vs -1.5: "elephant"
    assert pick(ll, choices, None) == 0
    assert pick(ll, choices, "chars") == 1
    # characters and bytes differ on umlauts: "Bär" is 3 characters, 4 UTF-8 bytes
    de = ("Bär", "Baer")
    assert pick([-3.3, -4.2], de, "chars") == 1 and pick([-3.3, -4.2], de, "bytes") == 0   # -1.1 < -1.05; -0.825 > -1.05
    assert pick([-2.0, -2.0], ("ab", "ab"), "chars") == 0   # a tie goes to the first choice


def test_choice_sets_load_arc_mmlu_and_the_shipped_german_set(tmp_path):
    from tests.conftest import REPO
    base = REPO / "recipes"
    arc = load_choice_set(ChoiceSet(name="a", path="demo/benchmarks/choice/arc_challenge_en.jsonl", format="arc",
                                    language="en"), base)
    row = json.loads((base / "demo/benchmarks/choice/arc_challenge_en.jsonl").read_text().splitlines()[0])
    assert arc[0].choices[arc[0].answer] == row["choices"]["text"][row["choices"]["label"].index(row["answerKey"])]
    de = load_choice_set(ChoiceSet(name="d", path="demo/benchmarks/choice/parlspeech_cloze_de.jsonl", language="de",
                                   template="{question}", limit=5), base)
    assert len(de) == 5 and all(len(i.choices) == 4 for i in de)
    (tmp_path / "bad.jsonl").write_text('{"question": "q", "choices": ["a", "b"], "answer": 2}\n')
    with pytest.raises(RecipeError, match=r"bad.jsonl:1: not a 'choices' multiple-choice row .*answer 2"):
        load_choice_set(ChoiceSet(name="b", path="bad.jsonl", language="en"), tmp_path)


def test_checkpoints_every_fixed_number_of_tokens_and_the_last_step():
    assert checkpoint_steps(60, 12288, 1024) == [12, 24, 36, 48, 60]
    assert checkpoint_steps(50, 12288, 1024) == [12, 24, 36, 48, 50]   # the last step is always measured
    assert checkpoint_steps(60, None, 1024) == [60]


def test_ablation_settings_are_checked():

    base = dict(stage="s", candidates={"a": {"x": {"weight": 1}}, "b": {"x": {"weight": 2}}},
                heldout=[{"name": "h", "source": "x"}], batch_size=4, seq_length=256)
    with pytest.raises(ValidationError, match="not a whole number of steps of 1024 tokens"):
        Ablation(**base, checkpoint_tokens=1000)
    with pytest.raises(ValidationError, match="must contain \\{question\\}"):
        Ablation(**base, choice_sets=[{"name": "c", "path": "p", "language": "de", "template": "Frage:"}])
    with pytest.raises(ValidationError, match="names must be unique"):
        Ablation(**base, choice_sets=[{"name": "h", "path": "p", "language": "de"}])


def test_table_13_shape_marks_best_and_second_best():
    sig = lambda n, k, L, hi: {"name": n, "kind": k, "language": L, "higher_is_better": hi, "sets": [n]}  # noqa: E731
    sigs = [sig("en_bpb", "bpb", "en", False), sig("en_acc", "acc", "en", True)]
    cands = [{"candidate": "b", "signals": {"en_bpb": 0.5, "en_acc": 0.25}, "ranks": {"en_bpb": 1, "en_acc": 2},
              "average_rank": 1.5, "average_rank_all": 1.5},
             {"candidate": "a", "signals": {"en_bpb": 0.6, "en_acc": 0.5}, "ranks": {"en_bpb": 2, "en_acc": 1},
              "average_rank": 1.5, "average_rank_all": 1.75}]
    summary = {"stage": "s", "steps": 2, "terminal_tokens": 2048, "signals": sigs, "candidates": cands, "seed": 0,
               "checkpoints": [{"tokens": 1024, "average_rank": {"a": 2.0, "b": 1.5}},
                               {"tokens": 2048, "average_rank": {"a": 1.5, "b": 1.5}}]}
    md = markdown(summary)
    assert "| candidate | EN bpb (rank) | EN acc. (%) (rank) | R_T | R_all |" in md
    assert "| b | **0.5000 (1)** | <u>25.00 (2)</u> | **1.50** | **1.50** |" in md
    assert "| a | <u>0.6000 (2)</u> | **50.00 (1)** | **1.50** | <u>1.75</u> |" in md
    head, rows = terminal_rows(summary)
    assert rows[0] == ["b", "0.5000 (1) *", "25.00 (2) +", "1.50 *", "1.50 *"]


def test_choice_logliks_in_one_padded_batch_equal_one_full_forward_per_choice():
    """The batched, head-on-the-continuation scoring against the plain computation: each context +
    choice alone through the whole model, log-softmax at every position, the continuation's summed."""
    from types import SimpleNamespace

    import torch
    import torch.nn.functional as F

    from curation.train.choice import continuation_logliks
    from curation.train.model import HybridLM, ModelConfig
    from tests.train.test_train import TINY

    class Chars:   # a byte-level tokenizer: the test is about the model's arithmetic, not a vocabulary
        def encode(self, text, add_special_tokens=False):
            return SimpleNamespace(ids=list(text.encode("utf-8")))

    torch.manual_seed(3)
    mc = ModelConfig.tiny(**TINY)
    mc.vocab_size, mc.output_vocab = 257, 257
    eod = 256
    trainer = SimpleNamespace(model=HybridLM(mc).eval(), manifest={"vocabulary": {"eod": eod}},
                              cfg=SimpleNamespace(seq_length=32), lut=torch.arange(257))
    context, choices = "Q: Gas?\nA:", [" CO2", " oxygen", " Stickstoff üb"]   # unequal lengths: padding
    got = continuation_logliks(trainer, Chars(), context, choices)
    for cont, g in zip(choices, got):
        seq = torch.tensor([eod] + list((context + cont).encode("utf-8")))[-33:][None]
        n = len(cont.encode("utf-8"))
        with torch.no_grad():
            logits, _ = trainer.model(seq[:, :-1], torch.zeros_like(seq[:, :-1]))
        logp = F.log_softmax(logits.float()[0], dim=-1)
        want = float(logp[torch.arange(seq.shape[1] - 1), seq[0, 1:]][-n:].sum())
        assert g == pytest.approx(want, rel=1e-5, abs=1e-4)
    assert len({round(g, 3) for g in got}) == 3          # three different scores: no row read another's


def test_quick_look_overrides_are_validated_as_the_recipe_is():
    from curation.commands.ablate import quick_look
    from curation.errors import UsageError
    ab = Ablation(stage="s", candidates={"a": {"x": {"weight": 1}}, "b": {"x": {"weight": 2}}},
                  heldout=[{"name": "h", "source": "x"}], batch_size=4, seq_length=256, checkpoint_tokens=12288,
                  choice_sets=[{"name": "c", "path": "p", "language": "de"},
                               {"name": "d", "path": "q", "language": "en", "limit": 3}])
    assert quick_look(ab) is ab
    q = quick_look(ab, checkpoint_tokens=2048, choice_limit=5)
    assert q.checkpoint_tokens == 2048 and [c.limit for c in q.choice_sets] == [5, 3]   # never more than the recipe's
    assert ab.checkpoint_tokens == 12288                                                # the recipe's is untouched
    with pytest.raises(UsageError, match="--checkpoint-tokens 1000: ablation.checkpoint_tokens 1000 is not a whole "
                                         "number of steps of 1024 tokens"):
        quick_look(ab, checkpoint_tokens=1000)
    with pytest.raises(UsageError, match="--choice-limit 0"):
        quick_look(ab, choice_limit=0)


def test_a_heldout_set_needs_a_known_language():
    """Its bits-per-byte suite: `language:`, else the one language its source's language filters keep."""
    from types import SimpleNamespace

    from curation.recipe.filters import LanguageFilter
    from curation.recipe.stages import check_heldout_languages
    one = SimpleNamespace(name="x", filters=[LanguageFilter(type="language", languages=["de"])])
    two = SimpleNamespace(name="x", filters=[LanguageFilter(type="language", languages=["de", "en"])])
    bare = SimpleNamespace(name="x", filters=[])
    ab = Ablation(stage="s", candidates={"a": {"x": {"weight": 1}}, "b": {"x": {"weight": 2}}},
                  heldout=[{"name": "h", "source": "x"}])
    check_heldout_languages(ab, [one])
    with pytest.raises(ValueError, match=r"'h': give `language:` \(source 'x' declares languages \['de', 'en'\]"):
        check_heldout_languages(ab, [two])
    with pytest.raises(ValueError, match="declares no language filter"):
        check_heldout_languages(ab, [bare])
    named = ab.model_copy(update={"heldout": [ab.heldout[0].model_copy(update={"language": "en"})]})
    check_heldout_languages(named, [bare])
