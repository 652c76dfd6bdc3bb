"""Which of a source's shard sets a stage trains on.

A source's merge writes its main shards (`tokenized/<source>/<source>`) and, for some sources, other
sets beside them (`curation.core.layout`):
- `<source>.no_reasoning`: a text source with `reasoning:`, the same documents with every reasoning
  span removed. A stage with `reasoning: strip` takes this copy instead of the main shards;
  `reasoning: keep` (the default) takes the main shards.
- `<source>.long_context`: an audio source's sequences longer than the stage-2 maximum (interleaved
  speech-text of long recordings). Long-context stages draw an audio source from this pool (its
  documents are what the length buckets are for), and so does an extension step for an audio source of
  one of its classes; every other stage from the main shards.
The choice is a property of (stage, source) alone, so planning, manifests and the Megatron hand-off
agree on it; the manifest records it per source as `variant` ("" for the main shards).
"""
from __future__ import annotations

from curation.core.layout import LONG_CONTEXT, NO_REASONING
from curation.recipe.schema import Source, Stage


def shard_variant(stage: Stage, source: Source) -> str:
    """The prefix suffix of the shards `stage` draws `source` from ("" = the main shards)."""
    if stage.long_context is not None and source.modality == "audio":
        return LONG_CONTEXT
    if (stage.extension is not None and source.modality == "audio"
            and any(source.name in c.sources for c in stage.extension.classes.values())):
        return LONG_CONTEXT   # an extension step's audio class: the interleaved long recordings
    if stage.reasoning == "strip" and source.gives("reasoning"):
        return NO_REASONING
    return ""
