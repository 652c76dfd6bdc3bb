"""`curate ablate`: rank candidate mixtures of one stage with a proxy model (Soofi S Appendix C).

1. `curate run` the recipe (cached tasks are reused) so the shards and the stage's manifest exist.
2. Held-out sets: for each `ablation.heldout` entry, `documents` documents of its source, chosen with
   a seeded draw, are withheld from every candidate (their plan counts are zero).
3. Each candidate replaces the stage's mixture; the planner (`plan_stage`) gives its epochs per
   source, a sampling plan per source is drawn as `curate run` does, and a candidate manifest is
   written beside the run's (`<out>/ablation/<candidate>/<stage>.json`).
4. Every candidate trains the same model config for the same steps from the same seed.
5. Bits per byte on each held-out set: summed next-token loss in bits over the documents' UTF-8
   bytes (the text decoded from the shard's tokens). Candidates are ranked per set (1 = lowest),
   then by their average rank (ties: the lower mean bits per byte); `ablation.json`, `ablation.html` and the learning curves are written.
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


def _heldout_sets(manifest: dict, base: Path, ab) -> dict[str, list[int]]:
    """Document indices of each held-out set (in its source), drawn with a seed from the set's name."""
    from curation.shards import read_index
    sets = {}
    for h in ab.heldout:
        entry = next(s for s in manifest["sources"] if s["name"] == h.source)
        _, lengths, _, _ = read_index(base / f"{entry['prefix']}.idx")
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
    from curation.shards import read_index
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
        for f in entry["files"]:
            f["path"] = rel(base / f["path"])
        entry.update(epochs=row.epochs, effective_tokens=row.effective_tokens, share=row.share)
        entry.pop("plan", None)
        if row.effective_tokens > 0:
            _, lengths, _, _ = read_index(folder / f"{entry['prefix']}.idx")
            counts = sample_counts(lengths, row.epochs, plan_seed(m["stage_fingerprint"], entry["name"]))
            counts[withheld.get(entry["name"], [])] = 0
            entry["plan"] = {"path": f"{entry['name']}.npy", "kind": "epochs",
                             **save_counts(folder / f"{entry['name']}.npy", counts, lengths)}
            blend += [row.share, entry["prefix"]]
    m.update(blend=blend, ledger=rel(base / m["ledger"]), ablation_candidate=name, flags=sp.flags)
    path = folder / f"{stage_name}.json"
    path.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    return path


@torch.no_grad()
def bits_per_byte(trainer, prefix: Path, documents: list[int], tokenizer) -> float:
    """Summed loss (bits) over the held-out documents' text targets / their UTF-8 bytes."""
    from curation.shards import read_index
    dtype, lengths, pointers, _ = read_index(Path(f"{prefix}.idx"))
    tokens = np.memmap(f"{prefix}.bin", dtype=dtype, mode="r")
    trainer.model.eval()
    nats, nbytes, width = 0.0, 0, trainer.cfg.seq_length
    for d in sorted(documents):
        start = int(pointers[d]) // np.dtype(dtype).itemsize
        doc = np.asarray(tokens[start:start + int(lengths[d])], dtype=np.int64)
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
    return nats / math.log(2) / max(1, nbytes)


def ablate(recipe_path, out, *, model_cfg=None, steps: int | None = None, workers=None, log=print) -> dict:
    from curation.commands.run import run
    from curation.train.loop import TrainConfig, Trainer
    from curation.train.model import ModelConfig
    out = Path(out)
    result = run(recipe_path, out, workers=workers, progress=False)
    ab = result.plan.recipe.recipe.ablation
    if ab is None:
        from curation.errors import RecipeError
        raise RecipeError(f"{recipe_path}: no `ablation:` section; declare candidates and held-out sets")
    manifest = json.loads((out / "manifests" / f"{ab.stage}.json").read_text())
    sets = _heldout_sets(manifest, out / "manifests", ab)
    withheld = _by_source(ab, sets)
    tokenizer = result.plan.vocab.tokenizer
    results = []
    for name, mixture in ab.candidates.items():
        folder = out / "ablation" / name
        path = candidate_manifest(result, ab.stage, name, mixture, withheld, folder)
        n = steps or ab.steps
        cfg = TrainConfig(max_steps=n, batch_size=ab.batch_size, seq_length=ab.seq_length, seed=ab.seed,
                          warmup_steps=max(1, n // 10), checkpoint_every=n, log_every=n)
        for stale in ("checkpoint.pt", "train.jsonl"):
            (folder / "train" / stale).unlink(missing_ok=True)
        trainer = Trainer(path, folder / "train", cfg, copy.deepcopy(model_cfg) if model_cfg else ModelConfig.tiny(),
                          verify=False, write_back=False)
        history = trainer.train(log=None)
        bpb = {}
        for h in ab.heldout:
            entry = next(s for s in trainer.manifest["sources"] if s["name"] == h.source)
            bpb[h.name] = bits_per_byte(trainer, folder / entry["prefix"], sets[h.name], tokenizer)
        shares = {s["name"]: s["share"] for s in trainer.manifest["sources"]}
        results.append({"candidate": name, "shares": shares, "bpb": bpb,
                        "curve": [[r["step"], r["loss"]] for r in history]})
        if log:
            log(f"{name}: " + ", ".join(f"{k} {v:.4f} bits/byte" for k, v in bpb.items()))
    for h in ab.heldout:
        order = sorted(results, key=lambda r: (r["bpb"][h.name], r["candidate"]))
        for rank, r in enumerate(order, start=1):
            r.setdefault("ranks", {})[h.name] = rank
    for r in results:   # ties on the average rank go to the lower mean bits per byte
        r["average_rank"] = sum(r["ranks"].values()) / len(r["ranks"])
        r["mean_bpb"] = sum(r["bpb"].values()) / len(r["bpb"])
    results.sort(key=lambda r: (r["average_rank"], r["mean_bpb"], r["candidate"]))
    summary = {"stage": ab.stage, "steps": steps or ab.steps, "seed": ab.seed, "heldout": [h.model_dump() for h in ab.heldout],
               "candidates": results}
    (out / "ablation" / "ablation.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    _write_html(summary, out / "ablation")
    return summary


def _write_html(summary: dict, folder: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in summary["candidates"]:
        steps, loss = zip(*r["curve"])
        ax.plot(steps, loss, label=r["candidate"])
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats, stage targets)")
    ax.set_title(f"Proxy training on stage {summary['stage']}: learning curves")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "curves.png", dpi=100)
    plt.close(fig)
    sets = [h["name"] for h in summary["heldout"]]
    head = "".join(f"<th>{s} bits/byte (rank)</th>" for s in sets)
    rows = "".join(
        f"<tr><td>{r['candidate']}</td><td>{', '.join(f'{k} {v:.1%}' for k, v in r['shares'].items() if v)}</td>"
        + "".join(f"<td>{r['bpb'][s]:.4f} ({r['ranks'][s]})</td>" for s in sets)
        + f"<td>{r['average_rank']:.2f}</td><td>{r['mean_bpb']:.4f}</td></tr>" for r in summary["candidates"])
    html = (f"<!doctype html><meta charset=utf-8><title>Mixture ablation</title>"
            f"<style>body{{font-family:sans-serif;margin:2em}}td,th{{border:1px solid #ccc;padding:4px 8px}}"
            f"table{{border-collapse:collapse}}</style><h1>Mixture ablation: stage {summary['stage']}</h1>"
            f"<p>Each candidate trained the same proxy model for {summary['steps']} steps from seed {summary['seed']}; "
            f"held-out documents were withheld from every candidate. Lower bits per byte is better; candidates are "
            f"ordered by average rank, ties by mean bits per byte.</p><table><tr><th>candidate</th><th>shares</th>{head}<th>average rank</th><th>mean bits/byte</th></tr>"
            f"{rows}</table><h2>Learning curves</h2><img src=curves.png alt='learning curves'>")
    path = folder / "ablation.html"
    path.write_text(html)
    return path
