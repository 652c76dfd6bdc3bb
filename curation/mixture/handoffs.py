"""The trainer formats a stage is handed off in: the registry of the writer seam (`curation.shards.formats`).

`FORMATS` maps the recipe's `trainers:` names to their `TrainerFormat`; the manifest holds one section per
format written, under its name. Manifests (`write_stage`), the Merkle root (`leaves`), `curate verify`
(`check`) and `verify --relocate` (`relocate_handoff`) go through it and know no format. `megatron` is
always written (the manifest's `samples` and `blend` are its prefixes); the others only where a stage's
`trainers` (or the recipe's) names them, so a recipe that names none writes what it always wrote.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import ClassVar

from curation.core.atomic import atomic_write_bytes
from curation.core.layout import handoff_dir
from curation.errors import CurateError
from curation.mixture.megatron import file_texts, write_handoff
from curation.mixture.megatron_check import check_handoff
from curation.mixture.olmo_core import OlmoCore
from curation.shards.formats import StageInput, TrainerFormat, text_digest


class Megatron:
    """`TrainerFormat` for Megatron-LM's indexed datasets (`curation.mixture.megatron`), packed or blend."""
    name = "megatron"
    fields: ClassVar[dict] = {}        # checked with the rest of the manifest (`manifest_schema.MEGATRON`)

    def write(self, st: StageInput) -> dict:
        return write_handoff(st.out, st.mdir, st.stage, st.seq_length, st.sources, st.packing, st.vocab, st.root,
                             mode=st.mode, stage_fp=st.stage_fp, max_tokens=st.max_prefix_tokens, tasks=st.tasks)

    def leaves(self, section: dict) -> list[str]:
        return [f"{f['path']}:{f['sha256']}" for f in
                [*(f for p in section["prefixes"] for f in p["files"]), *section["files"].values()]]

    def texts(self, section: dict, root: Path | str, base: Path, seq_length: int) -> dict[str, str]:
        return file_texts(section, root, base, seq_length)

    def check(self, m: dict, base: Path, check_location: bool) -> list[str]:
        return check_handoff(m, base, check_location)

    def summary(self, section: dict, seq_length: int) -> str:
        planned = sum(d["planned_tokens"] for d in section["draws"])
        drawn = sum(d["drawn_tokens"] for d in section["draws"])
        return (f"megatron hand-off ({section['mode']}): {len(section['prefixes'])} prefix(es), "
                f"{section['train_samples']} samples of {seq_length}; draws {drawn:,} of {planned:,} planned tokens")


FORMATS: dict[str, TrainerFormat] = {"megatron": Megatron(), "olmo_core": OlmoCore()}
ALWAYS = "megatron"


def written(m: dict) -> list[tuple[TrainerFormat, dict]]:
    """The formats manifest `m` holds a section of, with their sections, in registry order."""
    return [(f, m[name]) for name, f in FORMATS.items() if isinstance(m.get(name), dict)]


def write_stage(names: list[str], st: StageInput) -> dict[str, dict]:
    """Write the stage in `ALWAYS` and the formats `names`; returns {format: manifest section}. A format's
    folder of this stage that `names` no longer lists is removed (it must not look current)."""
    sections = {name: FORMATS[name].write(st) for name in [ALWAYS, *(n for n in names if n != ALWAYS)]}
    for name in FORMATS:
        old = handoff_dir(st.out, name, st.stage)
        if name not in sections and old.is_dir():
            shutil.rmtree(old)
            for folder in (old.parent, old.parent.parent):   # handoff/<format>/, handoff/: left empty
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
    return sections


def malformed(f: TrainerFormat, section: dict) -> list[str]:
    """The section's missing or mistyped fields (`TrainerFormat.fields`), as messages."""
    return [f"manifest field `{f.name}.{k}` is missing" if k not in section else
            f"manifest field `{f.name}.{k}` is not {getattr(t, '__name__', t)}"
            for k, t in f.fields.items() if not isinstance(section.get(k), t)]


def leaves(m: dict) -> list[str]:
    """`path:sha256` of every hand-off file of every format in the manifest (for its Merkle root); a malformed
    section has none (its problems are `check`'s, and the root no longer recomputes)."""
    out = []
    for f, section in written(m):
        try:
            out += [] if malformed(f, section) else f.leaves(section)
        except (KeyError, TypeError):
            continue
    return out


def check(m: dict, base: Path, check_location: bool) -> tuple[list[str], list[str]]:
    """(problems, one line per format without any) of every format the manifest holds."""
    problems, ok = [], []
    for f, section in written(m):
        found = malformed(f, section)
        if not found:
            try:
                found = f.check(m, base, check_location)
            except (KeyError, TypeError, AttributeError) as e:     # a field inside the section
                found = [f"{f.name}: the manifest's section is malformed ({type(e).__name__}: {e}); re-run "
                         f"`curate run` to write it"]
        problems += found
        if not found:
            ok.append(f.summary(section, m["seq_length"]))
    return problems, ok


def relocate_handoff(manifest_path: Path) -> list[Path]:
    """Rewrite a stage's path-holding hand-off files, of every format (and the ledger's `decisions` view),
    for where its output folder is now (after a copy or move). Refuses when the manifest's record of them
    does not match what it would write."""
    from curation.errors import VerifyError
    from curation.ledger.store import relink_decisions
    from curation.mixture.manifest_schema import load_manifest

    m = load_manifest(manifest_path)
    base = Path(manifest_path).resolve().parent
    root = base.parent
    ledger = Path(os.path.normpath(base / m["ledger"]))
    writes = {}
    for f, section in written(m):
        for name, text in f.texts(section, root, base, m["seq_length"]).items():
            entry = section["files"].get(name)
            if entry is None or entry["sha256"] != text_digest(text, root):
                raise VerifyError(f"{manifest_path}: the manifest's record of {name} does not match its hand-off; "
                                  f"run `curate verify {manifest_path}`")
            writes[Path(os.path.normpath(base / entry["path"]))] = text
    # everything is checked before anything is written: the output is there, and no write leaves it
    for need in (*{p.parent for p in writes}, ledger):
        if not need.exists():
            raise CurateError(f"{manifest_path}: {need} is missing: the manifest was copied without its output "
                              f"folder; copy the whole folder {root} (manifests/, tokenized/, megatron/, ledger/), "
                              f"then relocate")
    for path in (*writes, ledger):
        inside(path, root)
    for path, text in writes.items():
        atomic_write_bytes(path, text.encode())
    relink_decisions(ledger.parent)
    return list(writes)


def inside(path: Path, root: Path) -> None:
    """Refuse (CurateError, naming the link) a path to write that leaves `root`, through `..` or a symlink."""
    real_root = root.resolve()
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise CurateError(f"{path} is outside the output folder {root}; verify --relocate writes only inside the "
                          f"folder it relocates") from None
    at = root
    for part in rel.parts:
        at = at / part
        if at.is_symlink():
            target = at.resolve()
            if not target.is_relative_to(real_root):
                raise CurateError(f"{at} is a symbolic link to {target}, outside the output folder {root}; verify "
                                  f"--relocate writes only inside the folder it relocates: replace the link with a "
                                  f"copy of what it points to, then run it again")
