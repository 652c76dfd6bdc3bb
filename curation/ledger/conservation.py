"""Conservation, checked per source, shard and step: `in = out + dropped + quarantined`, each step's
output is the next step's input, and the tokenize chain's output is what the shard writer received.
A violation raises `ConservationError` naming the source, shard and step."""
from __future__ import annotations

from curation.core.record import StepStats
from curation.errors import ConservationError


def check_conservation(source: str, shard: str, chain: list[StepStats]) -> None:
    prev: StepStats | None = None
    for st in chain:
        if not st.balanced():
            raise ConservationError(
                f"source {source!r} shard {shard} step {st.step!r}: in={st.records_in} but out={st.records_out} "
                f"+ dropped={sum(st.dropped.values())} + quarantined={sum(st.quarantined.values())} "
                f"= {st.records_out + sum(st.dropped.values()) + sum(st.quarantined.values())}; "
                f"records were lost, this is a bug in that step")
        if prev is not None and prev.records_out != st.records_in:
            raise ConservationError(f"source {source!r} shard {shard}: step {prev.step!r} emitted "
                                    f"{prev.records_out} records but {st.step!r} received {st.records_in}")
        prev = st


def check_written(source: str, shard: str, chain: list[StepStats], written: int) -> None:
    if chain and chain[-1].records_out != written:
        raise ConservationError(f"source {source!r} shard {shard}: tokenize emitted {chain[-1].records_out} "
                                f"records but the shard writer received {written}")
