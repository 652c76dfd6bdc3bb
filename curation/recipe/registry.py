"""The registered modalities, as the recipe layer knows them: a `SourceModality` per modality names the input
formats its sources read, the settings it adds to a source, and its validation rules, and points at its
steps-level declaration (`curation.steps.modality.Modality`) by name. `Source` loops over them instead of
naming modalities, so a new modality is one folder (its declaration and its steps) plus one registration line.

Registration: the built-in modalities are the lines of `BUILTIN`; any installed package adds one with an entry
point in the group `curate.modalities` (`video-frames = "my_pkg.video_frames:DECLARATION"`). Both name objects
(`module:attribute`), never import them here: this layer sits below `steps/`, where the modality folders live
(docs/ARCHITECTURE.md, Modalities). A declaration module imports only `core` and `recipe`, so loading the
registry to validate a recipe reads no step code (`tests/recipe/test_registry.py`).
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

GROUP = "curate.modalities"

# `module:attribute` of each built-in modality's declaration, in the order their rules run
BUILTIN = (
    "curation.steps.text.declaration:TEXT",
    "curation.steps.image.declaration:IMAGE",
    "curation.steps.audio.declaration:AUDIO",
    "curation.steps.interleaved.declaration:INTERLEAVED",
)

NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class SourceModality:
    """What a recipe may say about a modality's sources."""
    name: str                                   # the value of a source's `modality:`
    formats: tuple[str, ...]                    # the `input.format`s its sources read (their union is every format)
    steps: str                                  # `module:attribute` of its `curation.steps.modality.Modality`
    # the keys this modality adds to a source (`images: {...}`), each validated by its model; read with
    # `Source.settings_for(key)` (the model's defaults when the recipe gives none)
    settings: dict[str, type[BaseModel]] = field(default_factory=dict)
    # other modalities' settings keys its sources may carry too (an interleaved source's `images:`)
    borrows: tuple[str, ...] = ()
    # run on every source, whatever its modality (a rule may refuse this modality's formats or settings on
    # another's sources), in registration order; each raises ValueError with what to change
    rules: tuple[Callable[[Any], None], ...] = ()
    # the message when one of its sources reads another format; default: the formats it reads
    format_help: str | None = None
    url_inputs: bool = True                     # `input.paths` may name URLs read in place (an audio manifest may not)
    # its processed `text` is a document that MinHash near-dedup shingles (`dedup.minhash`; text, interleaved)
    minhash: bool = False

    def check_format(self, fmt: str) -> None:
        if fmt not in self.formats:
            raise ValueError(self.format_help or f"a {self.name} source reads `input.format` "
                             f"{' or '.join(map(repr, self.formats))}, not {fmt!r}")


_registry: dict[str, SourceModality] | None = None


def load(target: str) -> object:
    """The object a registration names (`module:attribute`)."""
    module, _, attr = target.partition(":")
    obj: object = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _declarations() -> list[tuple[str, object]]:
    found = [(t, load(t)) for t in BUILTIN]
    for ep in entry_points(group=GROUP):
        where = f"entry point {ep.name} = {ep.value}"
        try:
            found.append((where, ep.load()))
        except (ImportError, AttributeError) as e:   # a broken plug-in: name it, and how to get rid of it
            raise ImportError(f"modality registration {where} ({GROUP}, from the package "
                              f"{ep.dist.name if ep.dist else '?'}): cannot load it: {e}; fix or uninstall "
                              f"that package") from e
    return found


def registered() -> dict[str, SourceModality]:
    """Every registered modality by name (loaded once, on first use)."""
    global _registry
    if _registry is None:
        table: dict[str, SourceModality] = {}
        origin: dict[str, str] = {}
        for where, decl in _declarations():
            if not isinstance(decl, SourceModality):
                raise TypeError(f"modality registration {where}: names a {type(decl).__name__}, "
                                f"not a curation.recipe.registry.SourceModality")
            if not NAME.match(decl.name):
                raise ValueError(f"modality registration {where}: name {decl.name!r} is not lower-case "
                                 f"letters, digits, `-` and `_`")
            if decl.name in table:
                raise ValueError(f"modality registration {where}: {decl.name!r} is registered twice")
            for key in decl.settings:
                owner = next((m.name for m in table.values() if key in m.settings), None)
                if owner:
                    raise ValueError(f"modality registration {where}: its settings key {key!r} is already "
                                     f"the settings of {owner!r}")
            table[decl.name], origin[decl.name] = decl, where
        owned = {key for m in table.values() for key in m.settings}
        for decl in table.values():   # a borrowed key must be some modality's (a typo would refuse it everywhere)
            if unknown := sorted(set(decl.borrows) - owned):
                raise ValueError(f"modality registration {origin[decl.name]}: {decl.name!r} borrows the settings "
                                 f"key(s) {unknown}, which no registered modality declares (known: {sorted(owned)})")
        _registry = table
    return _registry


def reload() -> None:
    """Forget the registry, so that it is read again (after installing a plug-in in the same process)."""
    global _registry
    _registry = None


def modality(name: str) -> SourceModality:
    table = registered()
    if name not in table:
        raise ValueError(f"unknown modality {name!r}; registered modalities: {', '.join(sorted(table))} "
                         f"(a new one is a folder and a registration: docs/CONTRIBUTING.md, How to add a modality)")
    return table[name]


def formats() -> list[str]:
    """Every input format some registered modality reads."""
    return sorted({f for m in registered().values() for f in m.formats})


def settings_keys() -> dict[str, SourceModality]:
    """The source keys registered modalities add, each with its modality."""
    return {key: m for m in registered().values() for key in m.settings}



def gather_settings(data: Any, fields: set[str]) -> Any:
    """A source's raw keys with those of registered modalities moved into `modality_settings` (what `Source` reads
    before validating), so that the strict model accepts the registered keys and nothing else. A key given as
    null is not given (the defaults), as when the built-in ones were `Source` fields."""
    if not isinstance(data, dict):
        return data
    if "modality_settings" in data:
        raise ValueError("`modality_settings` is no recipe key: give a modality's settings under its own key")
    keys = settings_keys()
    if shadowed := sorted(set(keys) & fields):
        raise ValueError(f"the settings key(s) {shadowed} of modality {keys[shadowed[0]].name!r} are source "
                         f"fields already: register the modality with another key")
    if given := [k for k in data if k in keys]:
        data = {k: v for k, v in data.items() if k not in keys} | \
            {"modality_settings": {k: data[k] for k in given if data[k] is not None}}
    return data


def validate_settings(value: dict) -> dict:
    """`modality_settings`, each validated by its modality's model, in key order (dumps do not depend on the
    recipe's). A model's errors keep their place under the key (`sources[0].images.area`; `recipe.load` leaves
    `modality_settings` out of it), and come with the source's other errors."""
    settings, errors = {}, []
    for key, raw in sorted(value.items()):
        model = settings_keys()[key].settings[key]
        try:
            settings[key] = raw if isinstance(raw, model) else model.model_validate(raw)
        except ValidationError as e:
            errors += [{**err, "loc": (key, *err["loc"])} for err in e.errors(include_url=False)]
    if errors:
        raise ValidationError.from_exception_data("Source", errors)   # type: ignore[arg-type]
    return settings


def check_source(src: Any) -> None:
    """Every registered modality's rules on `src` (each may refuse its formats or settings on another's sources),
    then the formats of `src`'s own modality, and no modality's settings on the sources of a modality that
    neither owns nor borrows them."""
    table = registered()
    for decl in table.values():
        for rule in decl.rules:
            rule(src)
    own = table[src.modality]
    own.check_format(src.input.format)
    for key in src.modality_settings:
        if key not in own.settings and key not in own.borrows:
            users = [f"`modality: {m.name}`" for m in table.values() if key in m.settings or key in m.borrows]
            raise ValueError(f"`{key}:` settings apply to {', '.join(users[:-1]) + ' or ' if users[1:] else ''}"
                             f"{users[-1]} sources")
