"""A source's step chains, composed once from the recipe and used by everyone who needs them: the
planner (names and settings, for fingerprints), `curate explain` (names) and the tasks (built steps).

process chain:   [constituents] → licence → [robots_optout] → the modality's checks → [pii]
                 (read by the modality's reader first; every step's settings are its declaration)
tokenize chain:  one drop step per step name of the corpus-wide phases that cover the source, in
                 phase-table order (`exact_dedup`, `near_dedup`, `decontaminate`) → the modality's encoder
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from curation.core.io import Location
from curation.recipe.schema import Source
from curation.steps.base import StepSpec
from curation.steps.compliance.licences import (
    ApprovedConstituents,
    LicencePolicy,
    licence_class,
)
from curation.steps.compliance.optout import OptOutIndex, RobotsOptOut
from curation.steps.registry import MODALITIES
from curation.steps.text.pii import PIIRedactor


def compliance(loaded, src: Source, optout: OptOutIndex | None) -> dict:
    """What the process task needs to apply the licence policy, the opt-out and PII for one source."""
    r = loaded.recipe
    return {
        "licence": {"class": src.license_class or licence_class(src.license),
                    "exclude": sorted(r.licence_policy.exclude), "field": src.licence_field},
        "optout": None if optout is None or src.optout != "page_url" else {
            "snapshots": str(loaded.resolve(r.optout.snapshots)), "agents": list(optout.agents),
            "fingerprint": optout.fingerprint, "url_field": src.url_field, "match": r.optout.match},
        "pii": src.pii.kinds if src.pii else None,
        "constituents": src.constituents.model_dump(mode="json") if src.constituents else None,
    }


def _optout_step(o: dict, **kw) -> RobotsOptOut:
    return RobotsOptOut(OptOutIndex.cached(o["snapshots"], tuple(o["agents"]), o["fingerprint"]),
                        url_field=o["url_field"], match=o["match"], **kw)


def unique_names(specs: list[StepSpec]) -> list[StepSpec]:
    """A second step of the same name is `name.2` (two length filters), so ledger rows stay apart."""
    seen: dict[str, int] = {}
    out = []
    for s in specs:
        seen[s.name] = seen.get(s.name, 0) + 1
        out.append(s if seen[s.name] == 1 else StepSpec(f"{s.name}.{seen[s.name]}", s.settings, s.build))
    return out


def process_chain(src: Source, comp: dict, input_path: Location, base_dir: Path) -> list[StepSpec]:
    specs = []
    if comp["constituents"]:
        c = comp["constituents"]
        specs.append(StepSpec("constituents", c, partial(ApprovedConstituents, c["field"], c["approved"])))
    lic = comp["licence"]
    specs.append(StepSpec("licence", lic, partial(LicencePolicy, lic["class"], lic["exclude"], lic["field"])))
    if comp["optout"]:
        portable = {k: v for k, v in comp["optout"].items() if k != "snapshots"}  # content, not location
        specs.append(StepSpec("robots_optout", portable, partial(_optout_step, comp["optout"])))
    specs += MODALITIES[src.modality].checks(src, input_path, base_dir)
    if comp["pii"]:
        specs.append(StepSpec("pii", {"kinds": comp["pii"]}, partial(PIIRedactor, kinds=tuple(comp["pii"]))))
    return unique_names(specs)


def build_steps(specs: list[StepSpec], **kw) -> list:
    """The steps of a chain, each named as its spec (so `length.2` stays `length.2` in the ledger)."""
    steps = []
    for spec in specs:
        step = spec.build(**kw)
        step.name = step.stats.step = spec.name
        steps.append(step)
    return steps


def drop_names(phases: list, src: Source) -> list[tuple[str, list[str]]]:
    """(tokenize step name, [phase names]) of the phases that cover the source, in table order."""
    out: dict[str, list[str]] = {}
    for phase in phases:
        if phase.covers(src):
            out.setdefault(phase.step, []).append(phase.name)
    return list(out.items())


def encoder_spec(src: Source, run: dict) -> StepSpec:
    return MODALITIES[src.modality].encoder(src, run)
