"""A manifest's shape and its per-field digests: what every reader of a manifest relies on.

`load_manifest` is the one way a manifest is opened (`curate verify`, `curate train`, the Megatron
helpers): bad JSON, another format, or a missing or mistyped field is a `VerifyError` listing every
problem with its path (`sources[1].plan.sha256`), never a `KeyError` later.

`field_digests` hashes each field a trainer reads, one level into sections (`training.goldfish`,
`vocabulary.eod`, `megatron.prefixes`, one entry per source as `sources[web_en]`), so verification
names the field that changed; the digests are leaves of the manifest's Merkle root.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from curation.errors import UsageError, VerifyError

FORMAT = "curate-manifest/2"
NOT_DIGESTED = ("merkle_root", "field_digests")
WHOLE = ("ledger_tables",)     # digested as one field (each table is a Merkle leaf of its own)

_INT, _STR, _NUM = "int", "str", "number"
TOP = {"format": _STR, "recipe": _STR, "recipe_fingerprint": _STR, "stage": _STR, "stage_fingerprint": _STR,
       "seq_length": _INT, "budget_tokens": _INT, "samples": _INT, "vocabulary": dict, "ledger": _STR,
       "training": dict, "sources": list, "blend": list, "flags": list, "long_context": (dict, None),
       "megatron": dict, "ledger_tables": dict, "totals": dict, "field_digests": dict, "merkle_root": _STR}
VOCABULARY = {"id": _STR, "sha256": _STR, "size": _INT, "padded_size": _INT, "eod": _INT, "pad": _INT,
              "text_ids": _INT, "blocks": list, "reserved": dict}
TRAINING = {"stage_index": _INT, "targets": _STR, "goldfish": (dict, None), "thinking": _STR}
SOURCE = {"name": _STR, "prefix": _STR, "variant": _STR, "documents": _INT, "tokens": dict, "epochs": _NUM,
          "effective_tokens": _INT, "share": _NUM, "files": list}
FILE = {"path": _STR, "bytes": _INT, "sha256": _STR}
PLAN = {"path": _STR, "kind": _STR, "sha256": _STR, "tokens": _INT, "samples": _INT, "documents": _INT}
MEGATRON = {"dir": _STR, "tokenizer": dict, "split": _STR, "mode": _STR, "packed": bool, "prefixes": list,
            "train_samples": _INT, "files": dict, "not_drawable": list, "draws": list}
PREFIX = {"name": _STR, "prefix": _STR, "tokens": _INT, "sequences": _INT, "files": list}


def _is(value, kind) -> bool:
    if isinstance(kind, tuple):
        return any(_is(value, k) for k in kind)
    if kind is None:
        return value is None
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _STR:
        return isinstance(value, str)
    return isinstance(value, kind)


def _name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_name(k) for k in kind)
    return {None: "null", dict: "an object", list: "a list", bool: "true/false"}.get(kind, kind)


def _fields(obj, spec: dict, where: str, problems: list[str]) -> bool:
    if not isinstance(obj, dict):
        problems.append(f"{where or 'the manifest'} is not an object")
        return False
    for key, kind in spec.items():
        path = f"{where}.{key}" if where else key
        if key not in obj:
            problems.append(f"`{path}` is missing")
        elif not _is(obj[key], kind):
            problems.append(f"`{path}` is not {_name(kind)}")
    return True


def check_structure(m) -> list[str]:
    """Every missing or mistyped field a reader would trip over, by its path."""
    problems: list[str] = []
    if not _fields(m, TOP, "", problems):
        return problems
    for key, spec in (("vocabulary", VOCABULARY), ("training", TRAINING), ("megatron", MEGATRON)):
        if isinstance(m.get(key), dict):
            _fields(m[key], spec, key, problems)
    for i, s in enumerate(m["sources"] if isinstance(m.get("sources"), list) else []):
        where = f"sources[{i}]"
        if not _fields(s, SOURCE, where, problems):
            continue
        for j, f in enumerate(s["files"] if isinstance(s.get("files"), list) else []):
            _fields(f, FILE, f"{where}.files[{j}]", problems)
        if "plan" in s:
            _fields(s["plan"], PLAN, f"{where}.plan", problems)
        for key in ("parts", "unsplit_sha256"):   # a shard set split into parts (`curation.shards.shardset`)
            if key in s and not (isinstance(s[key], list) and s[key] and all(isinstance(x, str) for x in s[key])):
                problems.append(f"`{where}.{key}` is not a list of strings")
        if isinstance(s.get("tokens"), dict):
            _fields(s["tokens"], {k: _INT for k in ("text", "image", "audio", "total")}, f"{where}.tokens", problems)
    mg = m.get("megatron")
    for i, p in enumerate(mg.get("prefixes") if isinstance(mg, dict) and isinstance(mg.get("prefixes"), list) else []):
        if _fields(p, PREFIX, f"megatron.prefixes[{i}]", problems):
            for j, f in enumerate(p["files"] if isinstance(p.get("files"), list) else []):
                _fields(f, FILE, f"megatron.prefixes[{i}].files[{j}]", problems)
    return problems


def load_manifest(path: Path) -> dict:
    """Open a manifest; `VerifyError` naming the file and every structural problem if it is not one."""
    try:
        m = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise VerifyError(f"{path}: manifest not found; give a manifest a run wrote (OUT/manifests/STAGE.json)") \
            from None
    except IsADirectoryError:
        found = sorted(str(p) for p in Path(path).glob("manifests/*.json")) or \
            sorted(str(p) for p in Path(path).glob("*.json"))
        raise UsageError(f"{path} is a folder; give a manifest file"
                         + (f", e.g. {found[0]}" if found else " (OUT/manifests/STAGE.json)")) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise VerifyError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        got = m.get("format") if isinstance(m, dict) else type(m).__name__
        raise VerifyError(f"{path}: format {got!r} is not {FORMAT!r}; re-run `curate run` to write it again")
    problems = check_structure(m)
    if problems:
        raise VerifyError(f"{path}: malformed manifest, {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return m


def _digest(value) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def training_json(training: dict) -> str:
    """A stage's training settings as the ledger's `stages.training` holds them (canonical JSON)."""
    return json.dumps(training, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def field_digests(m: dict) -> dict[str, str]:
    out = {}
    for key, value in m.items():
        if key in NOT_DIGESTED:
            continue
        if key == "sources" and isinstance(value, list):
            out[key] = _digest([s.get("name") if isinstance(s, dict) else s for s in value])
            for s in value:
                out[f"sources[{s.get('name') if isinstance(s, dict) else s}]"] = _digest(s)
        elif isinstance(value, dict) and key not in WHOLE:
            out[key] = _digest(sorted(value))
            out.update({f"{key}.{k}": _digest(v) for k, v in value.items()})
        else:
            out[key] = _digest(value)
    return out
