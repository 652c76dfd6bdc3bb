"""What `curate run` checks about its output before any work, and what it removes after its tasks.

- `check_inputs`: `--out` inside, equal to or above an input is refused (the next run would read its
  own outputs as training documents). An input glob is compared by its fixed root (`site/**/*.html` →
  `site`), symlinks resolved; an acquired source's inputs live in `<out>/raw/` by design and are not
  compared, but a local folder it acquires from is.
- `check_recipe`: an output holds one recipe's outputs. The recipe is identified by its `name`: editing
  a recipe (settings, weights, sources) and re-running into its output is the ordinary incremental
  run; a recipe with another name is refused unless `--force`. The name is kept in
  `<out>/.curate-recipe.json` (older outputs: the name in their manifests).
- `stale_files`: after the tasks, the files under the task areas (`processed/`, `tokenized/`, `work/`,
  `quarantine/`, `ledger/decisions/`) that no node of this plan lists in its completion marker: an
  earlier version's or another recipe's sources, shards and markers. The run removes them before it
  writes the ledger, so no glob over `tokenized/` and no ledger view picks them up.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from curation.core.io import is_url
from curation.core.layout import decisions_path, marker_path, quarantine_path
from curation.core.outloc import Remote, is_remote
from curation.errors import UsageError

IDENTITY = ".curate-recipe.json"
TASK_AREAS = ("processed", "tokenized", "work", "quarantine", "ledger/decisions")
_GLOB = set("*?[")


def fixed_root(pattern: str, base: Path) -> Path | str:
    """The part of a path glob before its first wildcard, resolved (a URL glob: the URL part)."""
    if is_url(pattern):
        parts = pattern.split("/")
        return "/".join(p for p in parts[:next((i for i, p in enumerate(parts) if _GLOB & set(p)), len(parts))])
    p = Path(pattern.removeprefix("file://"))
    p = p if p.is_absolute() else base / p
    fixed = []
    for part in p.parts:
        if _GLOB & set(part):
            break
        fixed.append(part)
    return Path(*fixed).resolve()


def _overlap(a: Path | str, b: Path | str) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a == b or a.is_relative_to(b) or b.is_relative_to(a)
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
        return a.startswith(b) or b.startswith(a)
    return False


def check_inputs(loaded, out: Path | str) -> None:
    """UsageError naming the input and the output when `out` is inside, equal to or above an input."""
    for src in loaded.recipe.sources:
        patterns = [] if src.acquire else list(src.input.paths)
        if src.acquire and src.acquire.kind in ("fsspec", "image_folder", "audio_folder"):
            patterns.append(src.acquire.path)
        for pattern in patterns:
            root = fixed_root(pattern, loaded.base_dir)
            if _overlap(out, root):
                where = ("equal to" if out == root else "inside" if (str(out) + "/").startswith(str(root) + "/")
                         else "above")
                raise UsageError(f"--out {out} is {where} the input {pattern!r} of source {src.name!r} "
                                 f"({root}): a run would read its own outputs as inputs; choose an output folder "
                                 f"outside the inputs")


def _read_identity(out: Path | str) -> dict | None:
    if is_remote(out):
        data = Remote(out).cat(IDENTITY)
    else:
        try:
            data = (Path(out) / IDENTITY).read_bytes()
        except FileNotFoundError:
            data = None
        if data is None:   # an output written before the identity file: its manifests name the recipe
            for m in sorted((Path(out) / "manifests").glob("*.json")):
                try:
                    return {"recipe": json.loads(m.read_text())["recipe"]}
                except (ValueError, KeyError, TypeError, OSError):
                    continue
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def check_recipe(out: Path | str, name: str, force: bool) -> bool:
    """Refuse (UsageError) an output that holds another recipe's outputs, unless `force`; returns whether the
    output changes recipe. Then record this recipe as the output's."""
    held = _read_identity(out)
    other = held is not None and held.get("recipe") != name
    if other and not force:
        raise UsageError(f"--out {out} holds the outputs of recipe {held.get('recipe')!r}, not {name!r}; choose "
                         f"another output folder, or add --force to replace them (what recipe {name!r} does not "
                         f"produce is removed: the other recipe's sources, shards, markers, manifests and "
                         f"training write-backs)")
    data = (json.dumps({"recipe": name}, indent=1) + "\n").encode()
    if is_remote(out):
        Remote(out).pipe(IDENTITY, data)
    else:
        Path(out, IDENTITY).write_bytes(data)
    return other


def stale_files(out: Path, markers: dict[str, dict]) -> list[Path]:
    """Files under the task areas that no marker of this plan lists (markers of other nodes included). A
    record task's quarantine and decisions files count as its own even when its marker predates listing them
    (an output written by an earlier curate)."""
    owned = {marker_path(out, k) for k in markers} | {out / p for m in markers.values() for p in m.get("outputs", [])}
    for key in markers:
        phase, _, rest = key.partition("/")
        source, _, shard = rest.partition("/")
        if phase in ("process", "tokenize") and shard:
            owned |= {quarantine_path(out, source, shard, phase), decisions_path(out, source, shard, phase)}
    stale = []
    for area in TASK_AREAS:
        for p in sorted((out / area).rglob("*")):
            if (p.is_file() or p.is_symlink()) and p not in owned:
                stale.append(p)
    return stale


def remove_stale(out: Path, markers: dict[str, dict], progress: bool = True) -> int:
    stale = stale_files(out, markers)
    for p in stale:
        p.unlink()
    for area in TASK_AREAS:   # folders left empty (a removed source's)
        for d in sorted((out / area).rglob("*"), key=lambda p: -len(p.parts)):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
    if stale and progress:
        shown = ", ".join(str(p.relative_to(out)) for p in stale[:3])
        print(f"removed {len(stale)} file(s) that no task of this recipe produced ({shown}"
              f"{', ...' if len(stale) > 3 else ''})", file=sys.stderr)
    return len(stale)
