"""The ledger balances with every shard on every shipped recipe: the `tokens` table (one row per source and
pool: main, long-context, reasoning-stripped) sums to the tokens of every merged `.idx` a trainer can open.
Each recipe runs once per session (`tests/sessions.py`); acquisition needs its loopback site and is checked in
`acquire/test_acquire.py`."""
from __future__ import annotations

import pytest

from curation.shards.merging import PART
from tests.conftest import REPO
from tests.outputs import token_balance


def _balanced(out) -> None:
    ledger, shards, pools = token_balance(out)
    assert ledger == shards > 0
    sets = {(p.parent, p.stem.split(PART)[0]) for p in out.glob("tokenized/*/*.idx")}   # parts: one set
    assert len(pools) == len(sets)   # a row per merged shard set


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["text_run", "demo_run", "audio_run", "images_run", "interleaved_run",
                                     "long_context_run"])
def test_the_shipped_recipes_balance(fixture, request):
    _balanced(request.getfixturevalue(fixture).out)


def test_every_shipped_recipe_is_checked():
    checked = {"text", "demo", "audio", "images", "interleaved", "long_context", "acquisition"}
    assert {p.stem for p in (REPO / "recipes").glob("*.yaml")} == checked
