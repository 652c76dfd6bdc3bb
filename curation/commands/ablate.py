"""`curate ablate`: rank candidate mixtures of one stage with a proxy model (Soofi S Appendix C).

1. `curate run` the recipe (cached tasks are reused) so the shards and the stage's manifest exist.
2. Held-out sets: for each `ablation.heldout` entry, `documents` documents of its source, chosen with
   a seeded draw, are withheld from every candidate (their plan counts are zero).
3. Each candidate replaces the stage's mixture; the planner (`plan_stage`) gives its epochs per
   source, a sampling plan per source is drawn as `curate run` does, and a candidate manifest is
   written beside the run's (`<out>/ablation/<candidate>/<stage>.json`).
4. Every candidate trains the same model config for the same steps from the same seed.
5. At every checkpoint (each `checkpoint_tokens` training tokens, and the last step) the suite-level
   signals are measured per language: bits per byte over the language's held-out sets (summed
   next-token loss in bits over the documents' UTF-8 bytes, the text decoded from the shard's tokens;
   lower is better) and normalized rank-choice accuracy over its `choice_sets` (mean acc_norm of the
   sets, `curation.train.choice`; higher is better).
6. Per checkpoint the candidates are ranked per signal and averaged (`curation.mixture.ranks`); the
   terminal average rank (last checkpoint only) orders them, then R_all (the mean over the curve).
   `ablation.json`, `ablation.md` / `ablation.html` (Table 13 shape) and the plots are written
   (`curation.report.ablation`).
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from curation.ledger.pools import main_pool
from curation.mixture.sampling import plan_seed, sample_counts, save_counts
from curation.shards.shardset import ShardSet


def _heldout_sets(manifest: dict, base: Path, ab) -> dict[str, list[int]]:
    """Document indices of each held-out set (in its source), drawn with a seed from the set's name."""
    sets = {}
    for h in ab.heldout:
        entry = next(s for s in manifest["sources"] if s["name"] == h.source)
        lengths = ShardSet.of_entry(base, entry).lengths()
        seed = int.from_bytes(hashlib.sha256(f"heldout:{h.name}:{ab.seed}".encode()).digest()[:8], "little")
        sets[h.name] = [int(i) for i in np.random.default_rng(seed).permutation(lengths.size)[:h.documents]]
    return sets


def _by_source(ab, sets: dict[str, list[int]]) -> dict[str, list[int]]:
    """Per source, the documents every candidate withholds: the union of its held-out sets."""
    out: dict[str, set[int]] = {}
    for h in ab.heldout:
        out.setdefault(h.source, set()).update(sets[h.name])
    return {source: sorted(docs) for source, docs in out.items()}


def _heldout(manifest: dict, base: Path, ab) -> dict[str, list[int]]:
    return _by_source(ab, _heldout_sets(manifest, base, ab))


def candidate_manifest(result, stage_name: str, name: str, mixture: dict, withheld: dict[str, list[int]],
                       folder: Path) -> Path:
    """The stage's manifest with the candidate's mixture: epochs and plans re-drawn, held-out docs zeroed."""
    from curation.mixture.planning import plan_stage
    recipe = result.plan.recipe.recipe
    stage = next(s for s in recipe.stages if s.name == stage_name).model_copy(
        update={"mixture": mixture, "category_targets": {}})  # the candidate's weights decide alone
    tokens = {s: t["total_tokens"] for s, t in main_pool(result.rows).items()}
    docs = {s: t["documents"] for s, t in main_pool(result.rows).items()}
    sp = plan_stage(stage, recipe.sources, tokens, docs)
    src_manifest = result.out / "manifests" / f"{stage_name}.json"
    m = json.loads(src_manifest.read_text())
    base = src_manifest.parent
    m["stage_fingerprint"] = hashlib.sha256(f"{m['stage_fingerprint']}:{name}".encode()).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    rel = lambda p: os.path.relpath(p, folder)  # noqa: E731
    rows = {r.source: r for r in sp.rows}
    blend = []
    for entry in m["sources"]:
        row = rows[entry["name"]]
        entry["prefix"] = rel(base / entry["prefix"])
        if "parts" in entry:   # a split shard set (`curation.shards.shardset`)
            entry["parts"] = [rel(base / p) for p in entry["parts"]]
        for f in entry["files"]:
            f["path"] = rel(base / f["path"])
        entry.update(epochs=row.epochs, effective_tokens=row.effective_tokens, share=row.share)
        entry.pop("plan", None)
        if row.effective_tokens > 0:
            lengths = ShardSet.of_entry(folder, entry).lengths()
            counts = sample_counts(lengths, row.epochs, plan_seed(m["stage_fingerprint"], entry["name"]))
            counts[withheld.get(entry["name"], [])] = 0
            entry["plan"] = {"path": f"{entry['name']}.npy", "kind": "epochs",
                             **save_counts(folder / f"{entry['name']}.npy", counts, lengths)}
            blend += [row.share, entry["prefix"]]
    m.update(blend=blend, ledger=rel(base / m["ledger"]), ablation_candidate=name, flags=sp.flags)
    path = folder / f"{stage_name}.json"
    path.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    return path


def bits_per_byte(trainer, shards: ShardSet, documents: list[int], tokenizer) -> float:
    """Summed loss (bits) over the held-out documents' text targets / their UTF-8 bytes."""
    bits, nbytes = bits_and_bytes(trainer, shards, documents, tokenizer)
    return bits / max(1, nbytes)


@torch.no_grad()
def bits_and_bytes(trainer, shards: ShardSet, documents: list[int], tokenizer) -> tuple[float, int]:
    """Summed loss in bits over the held-out documents' text targets, and their UTF-8 bytes."""
    lengths, starts, tokens = shards.lengths(), shards.starts(), shards.reader()
    trainer.model.eval()
    nats, nbytes, width = 0.0, 0, trainer.cfg.seq_length
    for d in sorted(documents):
        doc = np.asarray(tokens(int(starts[d]), int(lengths[d])), dtype=np.int64)  # type: ignore[misc]
        text = doc[doc != trainer.manifest["vocabulary"]["eod"]]
        nbytes += len(tokenizer.decode(text.tolist(), skip_special_tokens=False).encode("utf-8"))
        for s in range(0, doc.size - 1, width):
            piece = torch.from_numpy(doc[s:s + width + 1])[None]
            inputs, labels = piece[:, :-1], piece[:, 1:]
            head = trainer.lut[labels]
            mask = trainer.rules.is_text(labels) & (head >= 0)
            logits, _ = trainer.model(inputs, torch.zeros_like(inputs))
            per = F.cross_entropy(logits.float()[0], head[0].clamp(min=0), reduction="none")
            nats += float((per * mask[0]).sum())
    trainer.model.train()
    return nats / math.log(2), nbytes


def _languages(recipe, ab) -> dict[str, str]:
    """The bits-per-byte suite (language) of each held-out set: its `language`, else its source's."""
    from curation.recipe.filters import declared_languages
    sources = {s.name: s for s in recipe.sources}
    return {h.name: h.language or declared_languages(sources[h.source].filters, len(sources[h.source].filters))[0]
            for h in ab.heldout}


def signals(recipe, ab) -> list[dict]:
    """The suite-level signals, bits per byte first, then accuracy, each language in sorted order."""
    lang = _languages(recipe, ab)
    out = [{"name": f"{L}_bpb", "kind": "bpb", "language": L, "higher_is_better": False,
            "sets": sorted(h for h, hl in lang.items() if hl == L)} for L in sorted(set(lang.values()))]
    out += [{"name": f"{L}_acc", "kind": "acc", "language": L, "higher_is_better": True,
             "sets": sorted(c.name for c in ab.choice_sets if c.language == L)}
            for L in sorted({c.language for c in ab.choice_sets})]
    return out


def checkpoint_steps(total: int, every_tokens: int | None, tokens_per_step: int) -> list[int]:
    """The steps evaluated: every `every_tokens` tokens, and always the last step (once)."""
    if not every_tokens:
        return [total]
    every = every_tokens // tokens_per_step
    return sorted(set(range(every, total + 1, every)) | {total})


def _measure(trainer, ab, sets, choice_items, tokenizer, folder: Path, sigs: list[dict]) -> dict:
    """Held-out bits/bytes per set, choice accuracy per set, and the suite value of every signal."""
    from curation.train.choice import choice_accuracy
    bb = {}
    for h in ab.heldout:
        entry = next(s for s in trainer.manifest["sources"] if s["name"] == h.source)
        bb[h.name] = bits_and_bytes(trainer, ShardSet.of_entry(folder, entry), sets[h.name], tokenizer)
    choice = {c.name: choice_accuracy(trainer, tokenizer, choice_items[c.name], c.template, c.normalize)
              for c in ab.choice_sets}
    suite = {}
    for sg in sigs:
        if sg["kind"] == "bpb":   # pooled: the language's bits over its bytes
            suite[sg["name"]] = sum(bb[n][0] for n in sg["sets"]) / max(1, sum(bb[n][1] for n in sg["sets"]))
        else:                     # each set counts once, as a harness suite averages its tasks
            suite[sg["name"]] = sum(choice[n]["acc_norm"] for n in sg["sets"]) / len(sg["sets"])
    return {"bpb": {n: b / max(1, nb) for n, (b, nb) in bb.items()}, "choice": choice, "signals": suite}


def quick_look(ab, checkpoint_tokens: int | None = None, choice_limit: int | None = None):
    """The recipe's ablation with the command line's quick-look overrides (`--checkpoint-tokens`,
    `--choice-limit`), re-validated as the recipe's own would be; the summary records what ran."""
    from pydantic import ValidationError

    from curation.errors import UsageError
    if checkpoint_tokens is None and choice_limit is None:
        return ab
    if choice_limit is not None and choice_limit < 1:
        raise UsageError(f"--choice-limit {choice_limit}: give at least 1 item per choice set")
    data = ab.model_dump()
    if checkpoint_tokens is not None:
        data["checkpoint_tokens"] = checkpoint_tokens
    if choice_limit is not None:
        for c in data["choice_sets"]:
            c["limit"] = min(c["limit"] or choice_limit, choice_limit)
    try:
        return type(ab).model_validate(data)
    except ValidationError as e:
        msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        raise UsageError(f"--checkpoint-tokens {checkpoint_tokens}: {msgs}") from None


def ablate(recipe_path, out, *, model_cfg=None, steps: int | None = None, checkpoint_tokens: int | None = None,
           choice_limit: int | None = None, workers=None, log=print) -> dict:
    from curation.commands.run import run
    from curation.mixture.ranks import average_ranks, order_candidates
    from curation.report.ablation import write_report
    from curation.train.choice import load_choice_set
    from curation.train.loop import TrainConfig, Trainer
    from curation.train.model import ModelConfig
    out = Path(out)
    result = run(recipe_path, out, workers=workers, progress=False)
    recipe = result.plan.recipe.recipe
    ab = recipe.ablation
    if ab is None:
        from curation.errors import RecipeError
        raise RecipeError(f"{recipe_path}: no `ablation:` section; declare candidates and held-out sets")
    ab = quick_look(ab, checkpoint_tokens, choice_limit)
    choice_items = {c.name: load_choice_set(c, Path(recipe_path).resolve().parent) for c in ab.choice_sets}
    manifest = json.loads((out / "manifests" / f"{ab.stage}.json").read_text())
    sets = _heldout_sets(manifest, out / "manifests", ab)
    withheld = _by_source(ab, sets)
    tokenizer = result.plan.vocab.tokenizer
    sigs = signals(recipe, ab)
    n = steps or ab.steps
    per_step = ab.batch_size * ab.seq_length
    marks = checkpoint_steps(n, ab.checkpoint_tokens, per_step)
    results, measured = [], {}      # measured[step][candidate] = _measure(...)
    for name, mixture in ab.candidates.items():
        folder = out / "ablation" / name
        path = candidate_manifest(result, ab.stage, name, mixture, withheld, folder)
        cfg = TrainConfig(max_steps=n, batch_size=ab.batch_size, seq_length=ab.seq_length, seed=ab.seed,
                          warmup_steps=max(1, n // 10), checkpoint_every=n, log_every=n)
        for stale in ("checkpoint.pt", "train.jsonl"):
            (folder / "train" / stale).unlink(missing_ok=True)
        trainer = Trainer(path, folder / "train", cfg, copy.deepcopy(model_cfg) if model_cfg else ModelConfig.tiny(),
                          verify=False, write_back=False)
        history = []
        for mark in marks:     # train up to the checkpoint, measure, go on (the schedule spans all n steps)
            history += trainer.train(max_steps=mark, log=None)
            measured.setdefault(mark, {})[name] = _measure(trainer, ab, sets, choice_items, tokenizer, folder, sigs)
        last = measured[n][name]
        shares = {s["name"]: s["share"] for s in trainer.manifest["sources"]}
        results.append({"candidate": name, "shares": shares, **last,
                        "curve": [[r["step"], r["loss"]] for r in history]})
        if log:
            log(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in last["signals"].items()))
    higher = {sg["name"]: sg["higher_is_better"] for sg in sigs}
    checkpoints = []
    for mark in marks:
        ranked = average_ranks({c: m["signals"] for c, m in measured[mark].items()}, higher)
        checkpoints.append({"step": mark, "tokens": mark * per_step,
                            "signals": {c: m["signals"] for c, m in measured[mark].items()},
                            "ranks": {c: r["ranks"] for c, r in ranked.items()},
                            "average_rank": {c: r["average_rank"] for c, r in ranked.items()}})
    overall = {r["candidate"]: sum(cp["average_rank"][r["candidate"]] for cp in checkpoints) / len(checkpoints)
               for r in results}
    for r in results:
        c = r["candidate"]
        r.update(ranks=checkpoints[-1]["ranks"][c], average_rank=checkpoints[-1]["average_rank"][c],
                 average_rank_all=overall[c], mean_bpb=sum(r["bpb"].values()) / len(r["bpb"]),
                 rank_curve=[[cp["tokens"], cp["average_rank"][c]] for cp in checkpoints])
    order = order_candidates({r["candidate"]: r["average_rank"] for r in results}, overall)
    results.sort(key=lambda r: order.index(r["candidate"]))
    summary = {"stage": ab.stage, "steps": n, "seed": ab.seed, "tokens_per_step": per_step,
               "checkpoint_tokens": ab.checkpoint_tokens, "terminal_tokens": n * per_step,
               "heldout": [h.model_dump() for h in ab.heldout], "choice_sets": [c.model_dump() for c in ab.choice_sets],
               "signals": sigs, "checkpoints": checkpoints, "candidates": results}
    (out / "ablation" / "ablation.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    write_report(summary, out / "ablation")
    return summary
