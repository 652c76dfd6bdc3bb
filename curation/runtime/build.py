"""What a process runs, as a cluster's nodes must agree on it: curate's version and code digest, Python, the
libraries whose versions can change a run's bytes, and the build of each modality plug-in; and which of those a
recipe depends on (`media_kinds`, `deciding_libraries`, `plugin_modalities`). `curation.runtime.cluster`
compares every node's `environment()` with the driver's before a run starts."""
from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

# Libraries whose version can change a run's bytes; a node must have the driver's versions of those
# the recipe uses: every recipe reads, filters and tokenizes text; media add their decoders and codecs.
TEXT_LIBRARIES = ("datatrove", "tokenizers", "numpy", "pyarrow", "ftfy", "xxhash", "spacy", "fasttext-predict",
                  "fasttext-numpy2-wheel", "trafilatura", "charset-normalizer", "warcio",   # HTML/WARC text
                  "protego", "publicsuffixlist")   # the opt-out: robots.txt rules, registrable domains
MEDIA_LIBRARIES = {"image": ("torch", "pillow", "imagehash"),
                   "audio": ("torch", "lhotse", "soundfile", "soxr", "scipy")}   # scipy: the audio fingerprint
DECIDING = tuple(dict.fromkeys(TEXT_LIBRARIES + sum(MEDIA_LIBRARIES.values(), ())))


def media_kinds(recipe) -> set[str]:
    """The media a recipe decodes: the codec kinds its sources' encoders run (an image or interleaved source's
    images, an audio source's clips, the media that text sources' conversations expand), as each modality
    declares them (`Modality.codecs`)."""
    from curation.steps.registry import MODALITIES
    return {kind for src in recipe.sources for kind in MODALITIES[src.modality].codecs(src)}


def plugin_modalities(recipe) -> set[str]:
    """The modalities of a recipe's sources that come from installed plug-ins, not from curate itself: every
    node must have the driver's build of each (`plugins`)."""
    from curation.recipe.registry import BUILTIN, load
    builtin = {load(target).name for target in BUILTIN}
    return {src.modality for src in recipe.sources} - builtin


def plugins() -> dict[str, str]:
    """Each installed modality plug-in (an entry point in `curate.modalities`) by its modality's name: its
    distribution, version and the digest of its top-level package's code, as one string to compare. A plug-in
    that fails to load is recorded as such (the driver refuses to run with it; a node reports it)."""
    from importlib.metadata import entry_points

    from curation.recipe.registry import GROUP
    found = {}
    for ep in entry_points(group=GROUP):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "an unnamed distribution"
        try:
            name, code = ep.load().name, _module_digest(ep.module.split(".")[0])
        except Exception as e:  # noqa: BLE001 - reported, and compared as it is
            found[ep.name] = f"{dist}: cannot load it ({type(e).__name__}: {e})"
            continue
        found[name] = f"{dist} (code {code})"
    return found


def _module_digest(top: str) -> str:
    """`code_digest` of an installed top-level package, or the sha256 of a single-file module."""
    import importlib.util
    spec = importlib.util.find_spec(top)
    if spec is None or not (spec.submodule_search_locations or spec.origin):
        return "?"
    if spec.submodule_search_locations:
        return code_digest(Path(list(spec.submodule_search_locations)[0]))
    return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()[:16]


def deciding_libraries(media: Iterable[str] | None = None) -> tuple[str, ...]:
    """The libraries whose versions decide the outputs of a recipe using `media`; None: all of them."""
    if media is None:
        return DECIDING
    return tuple(dict.fromkeys(TEXT_LIBRARIES + tuple(d for m in sorted(media) for d in MEDIA_LIBRARIES[m])))


def package_modules(root: Path) -> list[Path]:
    """curate's own Python modules under `root` (the `curation` folder): the `.py` files of its regular
    packages, which is what the wheel installs from a checkout (setuptools finds packages by their
    `__init__.py`). Folders without one are not code: the wheel's `curation/data/` carries the recipes'
    helper scripts (`recipes/**/*.py`, setup.py) that a checkout keeps outside the package."""
    found, todo = [], [root]
    while todo:
        folder = todo.pop()
        if not (folder / "__init__.py").is_file():
            continue
        for p in folder.iterdir():
            if p.is_dir():
                todo.append(p)
            elif p.suffix == ".py":
                found.append(p)
    return sorted(found)


def code_digest(root: Path | None = None) -> str:
    """sha256 over curate's own modules (`package_modules`): two installs of one version may still differ,
    and a wheel and a checkout of one commit agree."""
    root = root or Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in package_modules(root):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def environment() -> dict:
    """What this process runs: curate version and code, Python, the deciding libraries' versions, the
    modality plug-ins."""
    from importlib import metadata

    import curation
    libs = {}
    for dist in DECIDING:
        try:
            libs[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            libs[dist] = None
    return {"curate": curation.__version__, "code": code_digest(),
            "python": ".".join(map(str, sys.version_info[:2])), "libs": libs, "plugins": plugins()}
