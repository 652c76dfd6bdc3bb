"""How a run writes its merged shards (`shards:` in a recipe).

    shards: {max_part_bytes: 4294967296}   # the default: 4 GiB of `.bin` per part

A source's merge writes each shard set (its main shards, `.no_reasoning`, `.long_context`) as parts of at
most `max_part_bytes` of tokens each, cut between documents (`curation.shards.merging.split_merge`): a set
that fits one part keeps the one prefix `tokenized/<source>/<source><suffix>`; a larger one is written as
`<prefix>.part-00000`, `<prefix>.part-00001`, ... (a document larger than a part is a part of its own). An
unset `shards:` is left out of the recipe's fingerprint (`curation.recipe.load._fingerprinted`), so recipes
written before the setting keep their fingerprints and manifests.

    shards: {max_handoff_bytes: 1073741824}   # packed hand-off prefixes of at most 1 GiB of `.bin` each

A stage's packed Megatron hand-off (`curation.mixture.megatron_packed`) is one prefix up to megatron-core's
int32 document length (8 GiB of tokens), then several of nearly equal size. `max_handoff_bytes` caps them lower
(each holds at least one sequence), and a run whose executor writes the output folder writes each prefix in
its own task, so the copy of the stage's tokens is spread over the cluster instead of the driver. Unset: left
out of the fingerprint, as before the setting.
"""
from __future__ import annotations

from pydantic import Field

from curation.recipe.base import Strict

MAX_PART_BYTES = 4 * 2**30   # the default: one part per source up to 4 GiB of `.bin` (1 Gi int32 tokens)
MIN_PART_BYTES = 1024        # 256 int32 tokens: smaller parts would hold one short document each


class Shards(Strict):
    # the most `.bin` bytes of one part of a merged shard set; at least 1 KiB, at most 1 PiB
    max_part_bytes: int = Field(default=MAX_PART_BYTES, ge=MIN_PART_BYTES, le=2**50)
    # the most `.bin` bytes of one prefix of a packed hand-off (4 per token); unset: megatron-core's limit
    max_handoff_bytes: int | None = Field(default=None, ge=MIN_PART_BYTES, le=2**50)


def max_part_bytes(recipe) -> int:
    """The recipe's part size (`shards.max_part_bytes`, else the default)."""
    return recipe.shards.max_part_bytes if recipe.shards is not None else MAX_PART_BYTES


def max_handoff_tokens(recipe) -> int | None:
    """The most tokens of one packed hand-off prefix the recipe asks for (`shards.max_handoff_bytes` / 4), or None."""
    limit = recipe.shards.max_handoff_bytes if recipe.shards is not None else None
    return None if limit is None else limit // 4


def set_part_bytes(recipe) -> int | None:
    """`shards.max_part_bytes` where the recipe sets it, else None: what the merge tasks' fingerprints hold (a
    `shards:` that sets only `max_handoff_bytes` changes no merge)."""
    shards = recipe.shards
    return shards.max_part_bytes if shards is not None and "max_part_bytes" in shards.model_fields_set else None
