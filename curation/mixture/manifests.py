"""Shard manifests: the single file a trainer needs per training stage, and its verification.

A manifest (`<out>/manifests/<stage>.json`) names the recipe and stage fingerprints, the
vocabulary, and per source its shard prefix, weight, documents, tokens by modality and the
size and sha256 of every file, plus the Megatron `--data-path` blend. Paths are relative to
the manifest's folder, so an output folder can be moved as a whole.

`verify_manifest` re-reads every file: sizes, hashes, document and token counts from the
`.idx`/`.bin`, and the ledger's `tokens` table; it reports every mismatch, not just the first.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from curation.core.atomic import atomic_write_json, save_array
from curation.core.hashing import fingerprint, sha256_file
from curation.core.vocab import Block
from curation.errors import VerifyError
from curation.mixture.merkle import ledger_digests, manifest_leaves, merkle_root
from curation.mixture.planning import StagePlan
from curation.mixture.sampling import plan_seed, read_plan, sample_counts, save_counts
from curation.plan.graph import Plan
from curation.shards import read_index
from curation.shards.counting import count_tokens_by_modality

FORMAT = "curate-manifest/1"
# ledger tables that trainers write after the manifest (`curate train`): not frozen by its digests
WRITTEN_BACK = ("consumed",)


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start).replace(os.sep, "/")


def stage_fingerprint(stage, sources: list[dict]) -> str:
    """Freezes a stage: its settings and, per source, name, planned epochs and tokens and shard hashes.

    Adding, removing or re-weighting a source, or any change to a shard, gives a new fingerprint;
    the sampling plan is seeded from it, so a changed list can never silently shift a frozen plan."""
    return fingerprint({"stage": stage.model_dump(mode="json"),
                        "sources": [[s["name"], s["epochs"], s["effective_tokens"],
                                     [f["sha256"] for f in s["files"]]] for s in sources]})


def build_manifests(plan: Plan, stage_plans: list[StagePlan], rows: dict, out: Path) -> list[Path]:
    """One manifest per training stage, frozen by a stage fingerprint over its source list and plan."""
    from curation.core.layout import source_prefix

    r = plan.recipe.recipe
    mdir = out / "manifests"
    tokens = {t["source"]: t for t in rows["tokens"]}
    shards = {}
    for src in r.sources:
        prefix = source_prefix(out, src.name)
        shards[src.name] = (_rel(prefix, mdir), [
            {"path": _rel(Path(f"{prefix}{ext}"), mdir), "bytes": Path(f"{prefix}{ext}").stat().st_size,
             "sha256": sha256_file(Path(f"{prefix}{ext}"))} for ext in (".bin", ".idx")])
    written = []
    for index, sp in enumerate(stage_plans):
        stage = sp.stage
        sources, blend = [], []
        for row, src in zip(sp.rows, r.sources):
            t = tokens[src.name]
            prefix, files = shards[src.name]
            entry = {"name": src.name, "category": src.category, "license": src.license, "prefix": prefix,
                     "documents": t["documents"],
                     "tokens": {"text": t["text_tokens"], "image": t["image_tokens"],
                                "audio": t["audio_tokens"], "total": t["total_tokens"]},
                     "epochs": row.epochs, "effective_tokens": row.effective_tokens, "share": row.share,
                     "max_epochs": row.max_epochs, "exhausted_at_tokens": row.exhausted_at_tokens,
                     "files": files}
            if row.effective_tokens > 0:
                blend += [row.share, prefix]
            else:
                entry["excluded"] = row.excluded
            sources.append(entry)
        stage_fp = stage_fingerprint(stage, sources)
        lc = sp.long_context
        for entry, row in zip(sources, sp.rows):
            if row.effective_tokens > 0:
                plan_path = mdir / "plans" / stage.name / f"{entry['name']}.npy"
                _, lengths, _, _ = read_index(out / "tokenized" / entry["name"] / f"{entry['name']}.idx")
                if lc is not None:
                    kind, seed, counts = "selection", None, lc.counts[entry["name"]]
                else:
                    kind, seed = "epochs", plan_seed(stage_fp, entry["name"])
                    counts = sample_counts(lengths, row.epochs, seed)
                entry["plan"] = {"path": _rel(plan_path, mdir), "kind": kind, "seed": seed,
                                 **save_counts(plan_path, counts, lengths)}
        long_context = None
        if lc is not None:
            pack_path = mdir / "plans" / stage.name / "packing.npy"
            pack = save_array(pack_path, lc.packing)
            long_context = {
                "buckets": [{"lower": b.lower, "upper": b.upper, "target_tokens": b.target_tokens,
                             "realised_tokens": b.realised_tokens, "topup_tokens": b.topup_tokens,
                             "documents": b.documents} for b in lc.buckets],
                "sequences": lc.sequences, "fill": round(lc.fill, 6),
                "packing": {"path": _rel(pack_path, mdir), "sha256": pack["sha256"],
                            "columns": ["source index", "document index", "sequence"]}}
        manifest = {
            "format": FORMAT, "recipe": r.name, "recipe_fingerprint": plan.recipe.fingerprint,
            "stage": stage.name, "stage_fingerprint": stage_fp, "seq_length": stage.seq_length,
            "budget_tokens": sp.budget_tokens, "samples": sp.budget_tokens // stage.seq_length,
            "vocabulary": {"id": plan.vocab.id, "sha256": plan.vocab.sha256, "size": plan.vocab.size,
                           "padded_size": plan.vocab.padded_size, "eod": plan.vocab.eod_id,
                           "pad": plan.vocab.pad_id, "text_ids": plan.vocab.tokenizer.get_vocab_size(),
                           "blocks": [{"name": b.name, "start": b.start, "size": b.size} for b in plan.vocab.blocks],
                           "reserved": plan.vocab.reserved},
            "ledger": _rel(out / "ledger" / "ledger.duckdb", mdir),
            "training": {"stage_index": index, "targets": stage.targets or ("all" if index == 0 else "text"),
                         "goldfish": stage.goldfish.model_dump() if stage.goldfish else None,
                         "thinking": stage.thinking},
            "sources": sources, "blend": blend,
            "flags": [f for f in sp.flags],
            "long_context": long_context,
            "ledger_tables": ledger_digests(out / "ledger", exclude=WRITTEN_BACK),
            "totals": {"documents": sum(s["documents"] for s in sources),
                       "tokens": sum(s["tokens"]["total"] for s in sources),
                       "effective_tokens": sum(s["effective_tokens"] for s in sources)},
        }
        manifest["merkle_root"] = merkle_root(manifest_leaves(manifest))
        path = mdir / f"{stage.name}.json"
        atomic_write_json(path, manifest)
        written.append(path)
    _remove_stale(mdir, {sp.stage.name for sp in stage_plans})
    return written


def _remove_stale(mdir: Path, stages: set[str]) -> None:
    """Manifests and plans of stages the recipe no longer has must not look current."""
    import shutil

    for old in mdir.glob("*.json"):
        try:
            ours = json.loads(old.read_text()).get("format") == FORMAT
        except (ValueError, AttributeError):
            ours = False  # not a manifest of ours: leave it alone
        if old.stem not in stages and ours:
            old.unlink()
    for old in (mdir / "plans").glob("*"):
        if old.name not in stages:
            shutil.rmtree(old)


def remove_manifests(out: Path) -> None:
    """A failed run leaves no manifest of an earlier run looking current."""
    _remove_stale(out / "manifests", set())


def load_manifest(path: Path) -> dict:
    try:
        m = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise VerifyError(f"{path}: manifest not found") from None
    except json.JSONDecodeError as e:
        raise VerifyError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if m.get("format") != FORMAT:
        raise VerifyError(f"{path}: format {m.get('format')!r} is not {FORMAT!r}")
    return m


def _check_merkle(m: dict, ledger_dir: Path) -> list[str]:
    problems = []
    digests = ledger_digests(ledger_dir)
    for table, digest in m["ledger_tables"].items():
        if digests.get(table) != digest:
            problems.append(f"ledger table {table!r} changed since the manifest was written")
    if merkle_root(manifest_leaves(m)) != m["merkle_root"]:
        problems.append(f"merkle root {m['merkle_root']} does not recompute from the manifest's files and tables")
    return problems


def _check_plans(m: dict, base: Path) -> list[str]:
    """Each sampling plan is the file the manifest names and recomputes from its seed."""
    problems = []
    for s in m["sources"]:
        plan = s.get("plan")
        if plan is None:
            if s["effective_tokens"] > 0:
                problems.append(f"{s['name']}: planned {s['effective_tokens']} tokens but has no sampling plan")
            continue
        path = base / plan["path"]
        if not path.is_file() or sha256_file(path) != plan["sha256"]:
            problems.append(f"{s['name']}: sampling plan {path} is missing or changed")
            continue
        _, lengths, _, _ = read_index(base / f"{s['prefix']}.idx")
        counts = read_plan(path)
        if plan["kind"] == "epochs":
            if not (counts == sample_counts(lengths, s["epochs"], plan["seed"])).all():
                problems.append(f"{s['name']}: sampling plan does not recompute from its seed {plan['seed']}")
        elif int((counts.astype(np.int64) * lengths).sum()) != s["effective_tokens"]:
            problems.append(f"{s['name']}: selected documents hold a different number of tokens than planned")
    return problems


def _check_mixture(m: dict, ledger_dir: Path) -> list[str]:
    """Shares recompute from effective tokens, the blend is those shares, and the ledger agrees."""
    from curation.ledger import query

    problems = []
    total = sum(s["effective_tokens"] for s in m["sources"])
    want_blend = []
    for s in m["sources"]:
        share = s["effective_tokens"] / total if total else 0.0
        if abs(share - s["share"]) > 1e-6:
            problems.append(f"{s['name']}: share {s['share']} does not recompute from effective tokens ({share:.9f})")
        if s["effective_tokens"] > 0:
            want_blend += [s["share"], s["prefix"]]
    if m["blend"] != want_blend:
        problems.append(f"blend {m['blend']} is not the sources' shares {want_blend}")
    try:
        cols, rows = query(ledger_dir, "SELECT source, epochs, effective_tokens, share FROM mixture WHERE run = "
                           f"'{m['recipe_fingerprint']}' AND stage = '{m['stage']}'")
    except Exception as e:  # noqa: BLE001
        return problems + [f"ledger mixture table: {e}"]
    ledger = {r[0]: r[1:] for r in rows}
    for s in m["sources"]:
        got = ledger.get(s["name"])
        if got is None:
            problems.append(f"{s['name']}: no mixture row in the ledger for stage {m['stage']}")
        elif (got[0], got[1], got[2]) != (s["epochs"], s["effective_tokens"], s["share"]):
            problems.append(f"{s['name']}: ledger mixture (epochs {got[0]}, effective {got[1]}, share {got[2]}) "
                            f"differs from the manifest ({s['epochs']}, {s['effective_tokens']}, {s['share']})")
    return problems


def megatron_blend(manifest_path: Path) -> list:
    """The manifest's blend with absolute prefixes, as megatron-core's `blend` expects."""
    m = load_manifest(manifest_path)
    base = Path(manifest_path).resolve().parent
    weights, prefixes = m["blend"][0::2], m["blend"][1::2]
    return [[str((base / p).resolve()) for p in prefixes], [float(w) for w in weights]]


def verify_manifest(path: Path) -> list[str]:
    """Return a list of human-readable checks passed; raise VerifyError listing every failure."""
    from curation.ledger import query

    path = Path(path)
    m = load_manifest(path)
    base = path.resolve().parent
    problems, ok = [], []
    blocks = [Block(b["name"], b["start"], b["size"]) for b in m["vocabulary"]["blocks"]]
    ledger_dir = (base / m["ledger"]).parent
    try:
        cols, rows = query(ledger_dir, "SELECT * FROM tokens WHERE run = "
                           f"'{m['recipe_fingerprint']}'")
        ledger = {r[cols.index("source")]: dict(zip(cols, r)) for r in rows}
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        problems.append(f"ledger {ledger_dir / 'ledger.duckdb'}: {e}")
        ledger = {}
    for src in m["sources"]:
        name = src["name"]
        for f in src["files"]:
            fp = base / f["path"]
            if not fp.is_file():
                problems.append(f"{name}: {fp} is missing")
                continue
            if fp.stat().st_size != f["bytes"]:
                problems.append(f"{name}: {fp} has {fp.stat().st_size} bytes, manifest says {f['bytes']}")
            elif sha256_file(fp) != f["sha256"]:
                problems.append(f"{name}: {fp} sha256 differs from the manifest (file changed or corrupt)")
        if any(p.startswith(f"{name}:") for p in problems):
            continue
        prefix = base / src["prefix"]
        try:
            counts = count_tokens_by_modality(prefix, blocks, m["vocabulary"]["reserved"])
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: cannot read {prefix}.idx/.bin: {e}")
            continue
        got = {"documents": counts["documents"], "text": counts["text"], "image": counts["image"],
               "audio": counts["audio"], "total": counts["total"]}
        want = {"documents": src["documents"], **src["tokens"]}
        for k in got:
            if got[k] != want[k]:
                problems.append(f"{name}: {k} = {got[k]} in the shard, manifest says {want[k]}")
        lrow = ledger.get(name)
        if lrow is None:
            problems.append(f"{name}: no row in the ledger's tokens table for run {m['recipe_fingerprint']}")
        else:
            lwant = {"documents": lrow["documents"], "text": lrow["text_tokens"], "image": lrow["image_tokens"],
                     "audio": lrow["audio_tokens"], "total": lrow["total_tokens"]}
            for k in got:
                if got[k] != lwant[k]:
                    problems.append(f"{name}: {k} = {got[k]} in the shard, ledger says {lwant[k]}")
        ok.append(f"{name}: {counts['documents']} documents, {counts['total']} tokens, "
                  f"{len(src['files'])} files match")
    problems += _check_mixture(m, ledger_dir)
    problems += _check_plans(m, base)
    problems += _check_merkle(m, ledger_dir)
    if problems:
        raise VerifyError(f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return ok
