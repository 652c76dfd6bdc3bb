"""Shard manifests: the single file a trainer needs per training stage.

A manifest (`<out>/manifests/<stage>.json`) names the recipe and stage fingerprints, the vocabulary,
the training settings and, per source, the shards the stage draws it from (`variant`: "" for the
main shards, `.no_reasoning` or `.long_context`, see `curation.mixture.variants`), its weight,
documents, tokens by modality, the size and sha256 of every file, and its sampling plan. `megatron`
describes the stage's Megatron-LM hand-off (`curation.mixture.megatron`) and `blend` is its blend:
weights are the samples of `seq_length` each prefix yields in one pass, prefixes are relative to
the manifest's folder (`megatron_blend` gives them absolute, as megatron-core's `blend` expects).
Every path in a manifest is relative to its folder, so an output folder can be moved as a whole and
the same run writes the same manifest wherever it lives. `samples` is the stage in sequences: the
`train_samples` that draw its plan once.

`curation.mixture.verify.verify_manifest` re-reads all of it; `field_digests` and `merkle_root`
cover every field, file and ledger table a trainer reads.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

from curation.core.atomic import atomic_write_json, save_array
from curation.core.hashing import fingerprint, sha256_file
from curation.core.vocab import Block
from curation.ledger.pools import main_pool
from curation.ledger.schema import EXECUTION_TABLES
from curation.mixture.handoffs import ALWAYS, write_stage
from curation.mixture.manifest_schema import FORMAT, field_digests, load_manifest
from curation.mixture.megatron import blend_of
from curation.mixture.merkle import ledger_digests, manifest_leaves, merkle_root
from curation.mixture.planning import StagePlan
from curation.mixture.sampling import plan_seed, sample_counts, save_counts
from curation.mixture.sequences import stage_sequences
from curation.mixture.variants import shard_variant
from curation.plan.graph import Plan
from curation.recipe.output import max_handoff_tokens
from curation.shards.formats import StageInput
from curation.shards.indexed import has_tokens
from curation.shards.shardset import ShardSet

__all__ = ["FORMAT", "handoff_rows", "stage_handoffs", "write_manifests", "load_manifest", "megatron_blend", "stage_fingerprint", "verify_manifest"]
# ledger tables that trainers write after the manifest (`curate train`): not frozen by its digests
WRITTEN_BACK = ("consumed",)
# ledger tables that describe where the work ran (devices, ranks), not what the shards hold (their sha256
# freeze that): deterministic on one machine, so compared by the determinism checks, but not digested
# (the same recipe on a GPU cluster must give the same manifests); `EXECUTION_TABLES`: which tasks were retried
DEVICE_TABLES = ("encoders", "rank_plan")


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start).replace(os.sep, "/")


def stage_fingerprint(stage, sources: list[dict]) -> str:
    """Freezes a stage: its settings and, per source, name, planned epochs and tokens and shard hashes.

    Adding, removing or re-weighting a source, or any change to a shard (not the part size), gives a new one;
    the sampling plan is seeded from it, so a changed list can never silently shift a frozen plan."""
    # `reasoning: keep` (the default) is left out, so stages written before the setting existed keep their plans
    # nor is `handoff`: how Megatron receives the plan changes no plan
    # nor are `trainers` (the formats the plan is written in change no plan), nor an unset `extension`
    # (stages written before the setting existed keep their plans)
    settings = stage.model_dump(mode="json", exclude={"handoff", "trainers",
                                                      *(("reasoning",) if stage.reasoning == "keep" else ()),
                                                      *(("extension",) if stage.extension is None else ())})
    return fingerprint({"stage": settings,
                        "sources": [[s["name"], s["epochs"], s["effective_tokens"],
                                     content_sha256(s)] for s in sources]})


def content_sha256(source: dict) -> list[str]:
    """What identifies a source entry's documents: its files' sha256, or a split set's `unsplit_sha256` (the
    digests of its one-prefix form), so the part size changes no stage fingerprint, plan or hand-off."""
    return source.get("unsplit_sha256") or [f["sha256"] for f in source["files"]]


class _Shards:
    """Files and exact counts of each (source, variant) shard set, read once per run."""

    def __init__(self, out: Path, mdir: Path, tokens: dict, vocab, merged: dict | None = None):
        self.out, self.mdir, self.tokens, self._cache = out, mdir, tokens, {}
        self.merged = merged or {}   # source -> its merge marker's `shards` (`runtime.merge.run_merge`)
        self.blocks = [Block(b.name, b.start, b.size) for b in vocab.blocks]
        self.reserved = vocab.reserved

    def get(self, name: str, variant: str) -> tuple[str, list[dict], dict, dict]:
        """(prefix, files, counts, what a split set adds to its entry: `parts`, `unsplit_sha256`)."""
        from curation.core.layout import source_prefix

        if (name, variant) not in self._cache:
            prefix = Path(f"{source_prefix(self.out, name)}{variant}")
            try:
                shards = ShardSet.on_disk(prefix)
            except FileNotFoundError:
                raise FileNotFoundError(f"{prefix}.idx: the {variant or 'main'} shards of {name} are missing; "
                                        f"re-run `curate run` to write them") from None
            summary = self.merged.get(name, {}).get(variant)   # what the merge task hashed and counted
            extra: dict = {}
            if summary is not None:
                parts = summary.get("parts") or [{"prefix": prefix.name, "files": summary["files"]}]
                files = [{"path": _rel(prefix.parent / f"{part['prefix']}{ext}", self.mdir), **f}
                         for part in parts for ext, f in part["files"].items()]
            else:   # a merge marker of an earlier curate: hashed here
                files = [{"path": _rel(Path(f"{p}{ext}"), self.mdir),
                          "bytes": Path(f"{p}{ext}").stat().st_size, "sha256": sha256_file(Path(f"{p}{ext}"))}
                         for p in shards.prefixes for ext in (".bin", ".idx")
                         if ext == ".idx" or has_tokens(p)]   # an empty pool has no .bin (`shards.merging.merge`)
            if len(shards.prefixes) > 1:   # split: its parts, and the digests that identify it whatever the size
                extra = {"parts": [_rel(p, self.mdir) for p in shards.prefixes],
                         "unsplit_sha256": summary["unsplit_sha256"] if summary and "unsplit_sha256" in summary
                         else shards.unsplit_sha256()}
            if variant and summary is not None:
                c = {k: summary[k] for k in ("documents", "text", "image", "audio", "total")}
            elif variant:
                c = shards.counts(self.blocks, self.reserved)
            else:
                t = self.tokens[name]
                c = {"documents": t["documents"], "text": t["text_tokens"], "image": t["image_tokens"],
                     "audio": t["audio_tokens"], "total": t["total_tokens"]}
            self._cache[name, variant] = (_rel(prefix, self.mdir), files, c, extra)
        return self._cache[name, variant]


def _source_entries(sp: StagePlan, r, shards: _Shards) -> list[dict]:
    sources = []
    for row, src in zip(sp.rows, r.sources):
        variant = shard_variant(sp.stage, src)
        prefix, files, c, split = shards.get(src.name, variant)
        entry = {"name": src.name, "category": src.category, "license": src.license, "prefix": prefix,
                 **({"parts": split["parts"]} if split else {}), "variant": variant, "documents": c["documents"],
                 "tokens": {"text": c["text"], "image": c["image"], "audio": c["audio"], "total": c["total"]},
                 "epochs": row.epochs, "effective_tokens": row.effective_tokens, "share": row.share,
                 "max_epochs": row.max_epochs, "exhausted_at_tokens": row.exhausted_at_tokens, "files": files,
                 **({"unsplit_sha256": split["unsplit_sha256"]} if split else {})}
        if row.effective_tokens == 0:
            entry["excluded"] = row.excluded
        sources.append(entry)
    return sources


def _plans(sp: StagePlan, sources: list[dict], stage_fp: str, mdir: Path) -> None:
    for entry in sources:
        if entry["effective_tokens"] == 0:
            continue
        plan_path = mdir / "plans" / sp.stage.name / f"{entry['name']}.npy"
        lengths = ShardSet.of_entry(mdir, entry).lengths()
        if sp.long_context is not None:
            kind, seed, counts = "selection", None, sp.long_context.counts[entry["name"]]
        else:
            kind, seed = "epochs", plan_seed(stage_fp, entry["name"])
            counts = sample_counts(lengths, entry["epochs"], seed)
        entry["plan"] = {"path": _rel(plan_path, mdir), "kind": kind, "seed": seed,
                         **save_counts(plan_path, counts, lengths)}


def _long_context(sp: StagePlan, mdir: Path) -> dict | None:
    lc = sp.long_context
    if lc is None:
        return None
    pack_path = mdir / "plans" / sp.stage.name / "packing.npy"
    pack = save_array(pack_path, lc.packing)
    out = {"buckets": [{"lower": b.lower, "upper": b.upper, "target_tokens": b.target_tokens,
                        "realised_tokens": b.realised_tokens, "topup_tokens": b.topup_tokens,
                        "documents": b.documents} for b in lc.buckets],
           "sequences": lc.sequences, "fill": round(lc.fill, 6),
           "packing": {"path": _rel(pack_path, mdir), "sha256": pack["sha256"],
                       "columns": ["source index", "document index", "sequence"]}}
    if sp.stage.extension is not None:   # an extension step: the checkpoint it continues, its classes
        out["start_from"] = sp.stage.extension.start_from
        out["classes"] = [{"class": c.name, "share": c.share, "planned_tokens": c.planned_tokens,
                           "native_tokens": c.native_tokens, "topup_tokens": c.topup_tokens,
                           "documents": c.documents} for c in sp.classes]
    return out


def _vocabulary(v) -> dict:
    return {"id": v.id, "sha256": v.sha256, "size": v.size, "padded_size": v.padded_size, "eod": v.eod_id,
            "pad": v.pad_id, "text_ids": v.tokenizer.get_vocab_size(),
            "blocks": [{"name": b.name, "start": b.start, "size": b.size} for b in v.blocks], "reserved": v.reserved}


def handoff_mode(recipe, stage) -> str:
    """The stage's Megatron hand-off mode: its own `handoff`, else the recipe's (long-context: packed)."""
    return "packed" if stage.packed_selection else (stage.handoff or recipe.handoff)


def trainers(recipe, stage) -> list[str]:
    """The trainer formats the stage is handed off in: its own `trainers`, else the recipe's."""
    return list(stage.trainers or recipe.trainers)


def stage_handoffs(plan: Plan, stage_plans: list[StagePlan], rows: dict, out: Path,
                   root: Path | str | None = None, markers: dict | None = None,
                   tasks: Callable | None = None) -> list[dict]:
    """Per training stage, its sources, sampling plans and Megatron hand-off, written to disk; the manifests
    follow once the ledger holds the hand-off's rows (`handoff_rows`, `write_manifests`). `root`: where the
    hand-off's files name the output, when it is published elsewhere. `markers`: the run's task markers (the
    merge tasks' sha256 and counts of every shard; without them the shards are read again here). `tasks`: the
    executor's `map`, which writes the prefixes of a packed hand-off of several (`StageInput.tasks`)."""
    r = plan.recipe.recipe
    mdir = out / "manifests"
    mdir.mkdir(parents=True, exist_ok=True)   # paths below are relative to it (`../tokenized/...`)
    merged = {k.removeprefix("merge/"): m["shards"] for k, m in (markers or {}).items()
              if k.startswith("merge/") and "shards" in m}
    shards = _Shards(out, mdir, main_pool(rows), plan.vocab, merged)
    vocabulary = _vocabulary(plan.vocab)
    staged = []
    for index, sp in enumerate(stage_plans):
        stage = sp.stage
        sources = _source_entries(sp, r, shards)
        stage_fp = stage_fingerprint(stage, sources)
        _plans(sp, sources, stage_fp, mdir)
        long_context = _long_context(sp, mdir)
        packing = sp.long_context.packing if sp.long_context else None
        sections = write_stage(trainers(r, stage), StageInput(
            out, mdir, stage.name, stage.seq_length, sources, packing, vocabulary, root or out, stage_fp,
            handoff_mode(r, stage), partial(stage_sequences, mdir, sources, stage_fp, stage.seq_length,
                                            packing=packing), max_handoff_tokens(r), tasks))
        megatron = sections.pop(ALWAYS)
        flags = [{"stage": stage.name, "source": d["name"], "kind": "not_drawable",
                  "message": f"{d['name']}: {d['tokens']:,} planned tokens, {d['reason']}: Megatron-LM will not draw "
                             f"it (the blend hand-off); use `handoff: packed` to draw every planned token"}
                 for d in megatron["not_drawable"]]
        staged.append({"index": index, "plan": sp, "sources": sources, "stage_fingerprint": stage_fp,
                       "long_context": long_context, "megatron": megatron, "vocabulary": vocabulary,
                       "formats": sections,
                       "flags": [*sp.flags, *flags]})
    return staged


def handoff_rows(staged: list[dict], run: str) -> dict[str, list[dict]]:
    """The ledger's `handoff` table (per stage and planned source: planned tokens and the tokens Megatron-LM
    draws) and the hand-off's flags for `mixture_flags`."""
    rows = []
    for st in staged:
        mg = st["megatron"]
        skipped = {d["name"]: d["reason"] for d in mg["not_drawable"]}
        for d in mg["draws"]:
            rows.append({"run": run, "stage": st["plan"].stage.name, "source": d["name"], "mode": mg["mode"],
                         "planned_tokens": d["planned_tokens"], "drawn_tokens": d["drawn_tokens"],
                         "train_samples": mg["train_samples"], "drawable": d["name"] not in skipped,
                         "note": skipped.get(d["name"])})
    flags = [{"run": run, **f} for st in staged for f in st["flags"] if f["kind"] == "not_drawable"]
    return {"handoff": rows, "mixture_flags": flags}


def write_manifests(plan: Plan, staged: list[dict], out: Path, tasks: Callable | None = None) -> list[Path]:
    """One manifest per staged training stage (`stage_handoffs`), frozen by a stage fingerprint, its ledger
    tables' digests taken from the ledger already written (`tasks`: the executor's `map`, which hashes the
    chunks of the large tables, `merkle.ledger_digests`)."""
    r = plan.recipe.recipe
    mdir = out / "manifests"
    tables = ledger_digests(out / "ledger", exclude=(*WRITTEN_BACK, *EXECUTION_TABLES, *DEVICE_TABLES), tasks=tasks)
    written = []
    for st in staged:
        sp, stage, megatron, sources = st["plan"], st["plan"].stage, st["megatron"], st["sources"]
        index = st["index"]
        manifest = {
            "format": FORMAT, "recipe": r.name, "recipe_fingerprint": plan.recipe.fingerprint,
            "stage": stage.name, "stage_fingerprint": st["stage_fingerprint"], "seq_length": stage.seq_length,
            "budget_tokens": sp.budget_tokens, "samples": megatron["train_samples"], "vocabulary": st["vocabulary"],
            "ledger": _rel(out / "ledger" / "ledger.duckdb", mdir),
            "training": stage.training(index),
            "sources": sources, "blend": blend_of(megatron),
            "flags": st["flags"],
            "long_context": st["long_context"], "megatron": megatron,
            **st["formats"],                 # the other trainer formats' sections, only where the recipe names them
            "ledger_tables": tables,
            "totals": {"documents": sum(s["documents"] for s in sources),
                       "tokens": sum(s["tokens"]["total"] for s in sources),
                       "effective_tokens": sum(s["effective_tokens"] for s in sources)},
        }
        manifest["field_digests"] = digests = field_digests(manifest)
        manifest["merkle_root"] = merkle_root(manifest_leaves(manifest, digests))
        path = mdir / f"{stage.name}.json"
        atomic_write_json(path, manifest)
        written.append(path)
    _remove_stale(out, {st["plan"].stage.name for st in staged})
    return written


def _remove_stale(out: Path, stages: set[str]) -> None:
    """Manifests, plans and hand-offs of stages the recipe no longer has must not look current."""
    import shutil

    mdir = out / "manifests"
    for old in mdir.glob("*.json"):
        try:
            ours = str(json.loads(old.read_text()).get("format", "")).startswith("curate-manifest/")
        except (ValueError, AttributeError):
            ours = False  # not a manifest of ours: leave it alone
        if old.stem not in stages and ours:
            old.unlink()
    for folder in (mdir / "plans", out / "megatron", *(out / "handoff").glob("*")):
        for old in folder.glob("*"):
            if old.name not in stages and old.is_dir():
                shutil.rmtree(old)


def remove_manifests(out: Path) -> None:
    """A failed run leaves no manifest (or Megatron hand-off) of an earlier run looking current."""
    _remove_stale(out, set())


def megatron_blend(manifest_path: Path) -> list:
    """The stage's blend as megatron-core's `BlendedMegatronDatasetConfig.blend` expects it:
    `[[absolute prefix, ...], [weight, ...]]`, weights None for a stage packed into one prefix.

    Pair it with `sequence_length = manifest["seq_length"]`, sizes `[manifest["samples"], 0, 0]` and
    split "100,0,0"; Megatron-LM users pass the hand-off's files instead (README, "Training with
    Megatron-LM")."""
    m = load_manifest(manifest_path)
    base = Path(manifest_path).resolve().parent
    prefixes = [str(Path(os.path.normpath(base / p["prefix"]))) for p in m["megatron"]["prefixes"]]
    single = m["megatron"]["packed"] and len(prefixes) == 1
    weights = None if single else [float(p["sequences"]) for p in m["megatron"]["prefixes"]]
    return [prefixes, weights]


# re-exported for `from curation.mixture.manifests import verify_manifest` (verify imports no module above)
from curation.mixture.verify import verify_manifest  # noqa: E402
