"""The image batch plan per rank (`Plan.for_ranks`, `rank_plan`): re-planned for any rank count from the same
batches, conserving every image, within one image of the even share, under 2% imbalance at 8, 64 and 800
ranks on a 100k-image synthetic manifest."""
from __future__ import annotations

import numpy as np
import pytest

from curation.steps.image.plan import plan, rank_plan


def synthetic(n: int = 100_000, seed: int = 0):
    """Web-like image sizes: widths 200-2048 px, common aspect ratios, one image per document."""
    rng = np.random.default_rng(seed)
    w = rng.integers(200, 2048, n)
    h = (w * rng.choice([0.5, 0.75, 1.0, 4 / 3, 1.5, 2.0], n)).astype(np.int64)
    return w, h, np.arange(n)


@pytest.fixture(scope="module")
def planned():
    w, h, doc = synthetic()
    return plan(w, h, doc, area=256 * 256, budget=16384, ranks=1)


@pytest.mark.parametrize("ranks", [8, 64, 800])
def test_100k_images_are_balanced_below_two_percent(planned, ranks):
    rp = planned.for_ranks(ranks)
    assert rp.imbalance < 0.02
    per_image = planned.tokens // planned.images
    assert rp.load.max() <= -(-int(planned.tokens.sum()) // ranks) + int(per_image.max())   # one image over the share


@pytest.mark.parametrize("ranks", [1, 8, 800])
def test_every_image_of_every_batch_lands_on_exactly_one_rank(planned, ranks):
    rp = planned.for_ranks(ranks)
    assert (np.bincount(rp.batch, weights=rp.images, minlength=planned.tokens.size) == planned.images).all()
    assert (np.bincount(rp.batch, weights=rp.tokens, minlength=planned.tokens.size) == planned.tokens).all()
    assert rp.rank.min() >= 0 and rp.rank.max() < ranks and int(rp.load.sum()) == int(planned.tokens.sum())


def test_replanning_reuses_the_batches_and_is_deterministic(planned):
    batch = planned.batch.copy()
    a, b = planned.for_ranks(64), planned.for_ranks(64)
    assert (planned.batch == batch).all()   # dealing to ranks changes no batch: nothing is rescanned
    assert all((getattr(a, f) == getattr(b, f)).all() for f in ("batch", "images", "tokens", "rank"))
    # one rank: every batch whole, nothing split
    one = planned.for_ranks(1)
    assert one.batch.size == planned.tokens.size and one.imbalance == 0.0


def test_splitting_beats_whole_batches_where_batches_are_few_per_rank(planned):
    w, h, doc = synthetic()
    whole = plan(w, h, doc, area=256 * 256, budget=16384, ranks=800).imbalance(800)
    assert planned.for_ranks(800).imbalance < whole


def test_fewer_images_than_ranks_and_bad_input():
    rp = rank_plan(np.array([512, 256]), np.array([2, 1]), 8)   # 3 images, 8 ranks: 5 ranks stay idle
    assert sorted(rp.load.tolist()) == [0] * 5 + [256] * 3 and rp.imbalance == pytest.approx(8 / 3 - 1)
    assert rank_plan(np.zeros(0), np.zeros(0), 4).imbalance == 0.0
    with pytest.raises(ValueError, match="ranks 0"):
        rank_plan(np.array([1]), np.array([1]), 0)
