"""The phase table: the one description of a run's graph, in the order phases run.

    process(source, shard)   read → the source's process chain        → processed/<source>/<shard>.parquet
    <corpus-wide phases>     in the order below, each a `CorpusPhase` (its stages, the sources it
                             covers, the drop lists it writes, its ledger tables)
    tokenize(source, shard)  the drop steps of the covering phases → the modality's encoder
                                                                        → tokenized/<source>/parts/<shard>*
    merge(source)            the parts in shard order, per output      → tokenized/<source>/<source>*

Adding a corpus-wide phase is one class in `curation/corpus/` and one entry in `CORPUS_PHASES`.
"""
from __future__ import annotations

from curation.corpus.audio_near import AudioNearPhase
from curation.corpus.base import CorpusPhase
from curation.corpus.decont.phase import DecontPhase
from curation.corpus.exact import ExactPhase
from curation.corpus.image_near import ImageNearPhase
from curation.corpus.minhash import MinHashPhase
from curation.corpus.select import SelectPhase

_REMOVING = [ExactPhase(), ImageNearPhase(), AudioNearPhase(), MinHashPhase(), DecontPhase()]
# selection last: it ranks the documents every phase before it left (its `select` step follows theirs)
CORPUS_PHASES: list[CorpusPhase] = [*_REMOVING, SelectPhase(after=_REMOVING)]
BEFORE, AFTER = ("process",), ("tokenize", "merge")   # the record pipeline around the corpus-wide phases


def applied(recipe) -> list[CorpusPhase]:
    return [p for p in CORPUS_PHASES if p.applies(recipe)]


def stage_runners() -> dict:
    """Corpus stage name -> task function (out, node)."""
    return {stage: fn for phase in CORPUS_PHASES for stage, fn in phase.runners().items()}


def stage_partial_reads() -> dict:
    """Corpus stage name -> the dep outputs its tasks read only in part (`CorpusPhase.partial_reads`)."""
    return {stage: fn for phase in CORPUS_PHASES for stage, fn in phase.partial_reads().items()}


def ledger_schemas() -> dict:
    """The ledger tables every corpus phase contributes (present in every ledger, empty when unused)."""
    return {name: schema for phase in CORPUS_PHASES for name, schema in phase.tables.items()}
