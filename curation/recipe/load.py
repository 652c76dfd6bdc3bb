"""Load a recipe file: safe YAML → typed `Recipe` → resolved inputs → fingerprint.

Validation errors are rewritten to name the file, the line and the key path, e.g.
`recipes/x.yaml:14 sources[2].filters[0].min_words: must be >= 0, got -3`.
"""
from __future__ import annotations

import glob
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import curation.recipe.registry as registry
from curation import __version__
from curation.core.hashing import fingerprint, sha256_file
from curation.core.io import Location, as_location, glob_input, identity, is_url
from curation.errors import RecipeError
from curation.recipe.modalities import OnDevice
from curation.recipe.schema import Recipe, Source, missing_licence
from curation.recipe.yamlpos import KeyPath, format_path, line_for, load_with_lines


@dataclass(frozen=True)
class InputFile:
    """One input shard of one source: the unit of parallelism."""
    source: str
    index: int           # position in the source's sorted file list
    path: Path | str     # a local path, or an fsspec URL read in place (`curation.core.io`)
    rel: str             # path relative to the recipe directory (stable across machines), or the URL
    size: int
    sha256: str          # content identity: sha256 of a local file, `fsspec:<ukey>` of a remote one

    @property
    def shard_id(self) -> str:
        return f"{self.index:05d}"


@dataclass
class LoadedRecipe:
    recipe: Recipe
    path: Path
    inputs: dict[str, list[InputFile]] = field(default_factory=dict)
    fingerprint: str = ""

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def source(self, name: str) -> Source:
        return next(s for s in self.recipe.sources if s.name == name)


# The settings keys of the built-in modalities that were `Source` fields until they moved into their modalities'
# declarations (`SourceModality.settings`): a source without them dumped them as null, and fingerprints keep that.
FORMER_SOURCE_FIELDS = ("reasoning", "synthetic_tasks", "images", "audio", "interleaved")

_MESSAGES = {
    "greater_than_equal": lambda c: f"must be >= {c['ge']}",
    "greater_than": lambda c: f"must be > {c['gt']}",
    "less_than_equal": lambda c: f"must be <= {c['le']}",
    "less_than": lambda c: f"must be < {c['lt']}",
    "extra_forbidden": lambda c: "unknown key (check the spelling; see `curate validate --help`)",
    "missing": lambda c: "required key is missing",
    "string_pattern_mismatch": lambda c: f"must match {c['pattern']} (lower-case letters, digits, _ and -)",
    "union_tag_invalid": lambda c: f"unknown step type {c.get('tag')!r}; known types: {c.get('expected_tags')}",
    "union_tag_not_found": lambda c: "each filter needs a `type:` key",
    "int_parsing_size": lambda c: "is far too large (see curation.recipe.limits for the bounds)",
    "finite_number": lambda c: "must be a finite number (not .inf or .nan)",
}


def _fingerprinted(recipe) -> dict:
    """The recipe's content for its fingerprint. An unset codec `device`/`precision` means the CPU float32
    encoder every earlier version ran, so it is left out: a recipe that does not set them keeps its
    fingerprint (and every manifest naming it); a set one is in. Likewise a stage's unset `extension`,
    `trainers` left at Megatron's alone (the recipe's) and unset (a stage's), MinHash's unset `partitions`
    and an unset `shards.max_handoff_bytes`. The built-in modalities' settings a source does not give are null,
    as when they were `Source` fields."""
    content = recipe.model_dump(mode="json")
    if content.get("trainers") == ["megatron"]:
        content.pop("trainers")
    if content.get("shards") is None:   # unset: one part up to the default size, as before the setting existed
        content.pop("shards", None)
    elif content["shards"].get("max_handoff_bytes") is None:   # unset: as before the setting existed
        content["shards"].pop("max_handoff_bytes", None)
    minhash = (content.get("dedup") or {}).get("minhash")
    if isinstance(minhash, dict) and minhash.get("partitions") is None:
        minhash["partitions"] = 1   # unset (by corpus size) changes no output: as the 1 it defaulted to before
    for st in content.get("stages", []):
        if st.get("extension") is None:   # unset: not an extension step, as before the setting existed
            st.pop("extension", None)
        if st.get("trainers") is None:
            st.pop("trainers", None)
    codec_keys = {k for k, m in registry.settings_keys().items() if issubclass(m.settings[k], OnDevice)}
    for src in content.get("sources", []):
        for key in FORMER_SOURCE_FIELDS:   # unset, they were dumped as null when they were `Source` fields
            src.setdefault(key, None)
        for block in (src.get(k) for k in codec_keys):
            for key in ("device", "precision"):
                if isinstance(block, dict) and block.get(key) is None:
                    block.pop(key, None)
    return content


def _clean_loc(data: Any, loc: tuple) -> KeyPath:
    """Drop the discriminator tags pydantic inserts into union locations, and `modality_settings` (where `Source`
    keeps the keys that modalities register: the recipe gives them on the source itself)."""
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part not in node and (node.get("type") == part or part == "modality_settings"):
            continue
        out.append(part)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            node = None
    return tuple(out)


def _format_validation(path: Path, data: Any, lines: dict, err: ValidationError) -> str:
    msgs = []
    for e in err.errors():
        loc = _clean_loc(data, tuple(e["loc"]))
        line = line_for(lines, loc)
        where = f"{path}:{line}" if line else str(path)
        ctx = e.get("ctx") or {}
        make = _MESSAGES.get(e["type"])
        msg = make(ctx) if make else e["msg"].removeprefix("Value error, ")

        if e["type"] not in ("missing", "extra_forbidden", "union_tag_not_found") and "input" in e:
            shown = e["input"]
            if not isinstance(shown, (dict, list)):
                msg += f", got {shown!r}"
        msgs.append(f"{where} {format_path(loc) or '<recipe>'}: {msg}")
    return "\n".join(msgs)


def _missing_licences(path: Path, data: dict, lines: dict) -> list[str]:
    """One message per source without `license:`, at the source's own line."""
    sources = data.get("sources")
    if not isinstance(sources, list):
        return []
    return [f"{path}:{line_for(lines, ('sources', i))} {format_path(('sources', i))}: {missing_licence(s.get('name'))}"
            for i, s in enumerate(sources) if isinstance(s, dict) and "license" not in s]


def _relative(loaded: LoadedRecipe, src, base: Path, p: Path) -> str:
    """Stable across machines: relative to the recipe, or raw/<source>/... for acquired files."""
    try:
        return str(p.relative_to(loaded.base_dir.resolve())) if src.acquire is None else \
            str(Path("raw") / src.name / p.relative_to(base.resolve()))
    except ValueError:
        return str(p)


def _within(base: Path, pattern: str) -> bool:
    """Whether a relative input pattern stays inside `base` as written (`..` that climbs out does not;
    a symlink inside the tree is the operator's own choice and is followed)."""
    root = os.path.normpath(str(base.resolve()))
    full = os.path.normpath(os.path.join(root, pattern))
    return full == root or full.startswith(root.rstrip(os.sep) + os.sep)


def _unknown_mixture_sources(path: Path, data: dict, lines: dict) -> list[str]:
    """One message per stage mixture key that names no source, at that key's own line."""
    names = {s.get("name") for s in data.get("sources") or [] if isinstance(s, dict)}
    stages = data.get("stages")
    out = []
    for i, st in enumerate(stages if isinstance(stages, list) else []):
        mixture = st.get("mixture") if isinstance(st, dict) else None
        for key in (mixture if isinstance(mixture, dict) else {}):
            if key not in names:
                at = ("stages", i, "mixture", key)
                out.append(f"{path}:{line_for(lines, at)} {format_path(at)}: stage {st.get('name')!r} mixes "
                           f"unknown source {key!r}; sources: {sorted(n for n in names if isinstance(n, str))}")
    return out


def _resolve_inputs(loaded: LoadedRecipe, lines: dict, raw_root: Path | None) -> None:
    for si, src in enumerate(loaded.recipe.sources):
        files: list[Location] = []   # local paths, or URLs read in place
        base = loaded.base_dir
        if src.acquire is not None:
            if raw_root is None:  # validate/explain: nothing is acquired, so there is nothing to list yet
                loaded.inputs[src.name] = []
                continue
            base = raw_root / src.name
        for pi, pattern in enumerate(src.input.paths):
            key = ("sources", si, "input", "paths", pi)
            if is_url(pattern):   # read in place by the tasks (`curation.core.io`)
                if src.acquire is not None or not registry.modality(src.modality).url_inputs:
                    raise RecipeError(f"{loaded.path}:{line_for(lines, key)} {format_path(key)}: {pattern!r} is a "
                                      f"URL; {'acquired sources name files under raw/' if src.acquire else 'clip manifests name local clips'}"
                                      f" (use `acquire: {{kind: fsspec, path: ...}}` to copy them)")
                matched: list[Location]
                try:
                    matched = list(glob_input(pattern))
                except OSError as e:
                    raise RecipeError(f"{loaded.path}:{line_for(lines, key)} {format_path(key)}: {e}") from None
                full = pattern
            else:
                absolute = Path(as_location(pattern)).is_absolute()
                if not absolute and not _within(base, pattern):
                    raise RecipeError(
                        f"{loaded.path}:{line_for(lines, key)} {format_path(key)}: {pattern!r} leaves "
                        f"{'the acquired files' if src.acquire is not None else 'the folder of the recipe'} "
                        f"({base.resolve()}); name inputs under it, or give an absolute path on purpose")
                full = str(Path(as_location(pattern)) if absolute else (base / pattern).resolve())
                matched = [p for p in sorted(Path(p) for p in glob.glob(full, recursive=True)) if p.is_file()]
            if not matched:
                line = line_for(lines, key)
                where = " in what was acquired" if src.acquire is not None else ""
                raise RecipeError(
                    f"{loaded.path}:{line} {format_path(key)}: {pattern!r} matched no files{where} "
                    f"(looked for {full}); fix the path or glob")
            files.extend(matched)
        unique = list(dict.fromkeys(files))   # the first mention of a file names its shard
        out = []
        for i, (p, found) in enumerate(zip(unique, _identities(unique), strict=True)):
            rel = p if is_url(p) else _relative(loaded, src, base, Path(p))
            if isinstance(found, OSError):
                raise RecipeError(f"{p}: input of source {src.name!r} cannot be read ({found.strerror or found}); "
                                  f"check permissions or the URL")
            out.append(InputFile(src.name, i, p, rel, *found))
        loaded.inputs[src.name] = out


IDENTITY_THREADS = 8   # local files hashed at once: sha256 releases the GIL, so a driver's cores and disks all work


def _identities(files: list[Location]) -> list[tuple[int, str] | OSError]:
    """`identity` of every file (size and sha256, or a remote file's key), several at a time, in order; an
    unreadable file gives its error in its place. Hashing every local input is the plan's one pass over the
    corpus (351 MB: 0.3-0.4 s on one core of this machine from the page cache, longer from disk), so it runs
    on all the driver's cores."""
    def one(location: Location) -> tuple[int, str] | OSError:
        try:
            return identity(location)
        except OSError as e:
            return e
    if len(files) < 2:
        return [one(f) for f in files]
    with ThreadPoolExecutor(min(IDENTITY_THREADS, len(files), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, files))


def load_recipe(path: str | Path, *, resolve_inputs: bool = True, raw_root: Path | None = None) -> LoadedRecipe:
    """`raw_root`: the run's `raw/` folder, where sources with `acquire:` were put (None: list none)."""
    path = Path(path)
    data, lines = load_with_lines(path)
    if not isinstance(data, dict):
        raise RecipeError(f"{path}:1: a recipe must be a YAML mapping (name:, vocabulary:, sources:, ...)")
    # Top-level `x-...` keys hold YAML anchors for reuse (as in compose files); they are not settings.
    data = {k: v for k, v in data.items() if not str(k).startswith("x-")}
    missing = _missing_licences(path, data, lines)
    if unknown := _unknown_mixture_sources(path, data, lines):
        raise RecipeError("\n".join(missing + unknown))
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        msgs = [m for m in _format_validation(path, data, lines, e).split("\n")
                if not (missing and "declares no licence" in m)]
        raise RecipeError("\n".join(missing + msgs)) from None
    loaded = LoadedRecipe(recipe=recipe, path=path.resolve())
    vocab = loaded.resolve(recipe.vocabulary)
    if vocab.is_dir():
        raise RecipeError(f"{path}:{line_for(lines, ('vocabulary',))} vocabulary: {vocab} is a folder, not a "
                          f"vocabulary file; name the YAML inside it (e.g. tokenizers/curate-demo-v1.yaml)")
    if not vocab.is_file():
        raise RecipeError(f"{path}:{line_for(lines, ('vocabulary',))} vocabulary: file {vocab} not found; "
                          f"point it at a vocabulary YAML under tokenizers/")
    if resolve_inputs:
        _resolve_inputs(loaded, lines, raw_root)  # sources not yet acquired list no files: they count 0
        loaded.fingerprint = fingerprint({
            "curate": __version__.split(".")[0],
            "recipe": _fingerprinted(recipe),
            "vocabulary": sha256_file(vocab),
            "inputs": {s: [[f.rel, f.sha256] for f in fs] for s, fs in loaded.inputs.items()},
        })
    return loaded
