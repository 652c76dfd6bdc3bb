"""`curate train`: the reference trainer. It proves the data contract end to end; it is not Megatron.

1. Refuse bad data: `verify_manifest` re-hashes every shard and plan and compares counts with the
   ledger; a checkpoint from another vocabulary or stage is refused too.
2. Data: `ManifestData` (the manifest's sampling plans, deterministic and resumable).
3. Model: `HybridLM` (Mamba-2 / grouped-query attention / MoE, `curation.train.model`), with
   cross-document masking. The embedding covers the whole padded vocabulary; the output head only
   the ids the stage can target (`head_ids`): the text tokenizer's, plus markers and the codes the
   image/audio shards use when the stage trains on all modalities.
4. Targets: `TargetRules` (stage targets, no task-control markers, Goldfish when the stage asks), and in
   conversations the mask the chat template's markers define (`curation.train.chat_mask`), each row
   starting in the state its document's earlier tokens leave.
5. Schedule: warmup-stable-decay with a 1-sqrt decay, AdamW, gradient clipping.
6. Checkpoint every `checkpoint_every` steps and at the end: tensors and plain values only, loaded
   with `torch.load(weights_only=True)`; resuming continues the exact data order and RNG state.
7. Write-back: consumed tokens per source and modality into the ledger's `consumed` table.

Logs (`train.jsonl`): loss on the stage's targets, loss on text targets only, per-source loss,
tokens per second, learning rate, MoE balance loss.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from curation.errors import CurateError
from curation.mixture.manifests import load_manifest, verify_manifest
from curation.train.chat_mask import trainable_ids
from curation.train.data import ManifestData
from curation.train.model import HybridLM, ModelConfig
from curation.train.targets import TargetRules
from curation.train.writeback import consumed_rows, write_back


@dataclass
class TrainConfig:
    max_steps: int = 200
    batch_size: int = 8
    seq_length: int = 256
    lr: float = 3e-3
    min_lr_ratio: float = 0.0
    warmup_steps: int = 20
    decay_fraction: float = 0.2       # the last 20% of steps decay with 1 - sqrt
    weight_decay: float = 0.1
    clip: float = 1.0
    seed: int = 0
    checkpoint_every: int = 50
    log_every: int = 10


def wsd_lr(step: int, cfg: TrainConfig) -> float:
    """Warmup-stable-decay: linear warmup, constant, then lr · (1 - sqrt(progress)) over the decay."""
    decay_steps = max(1, int(cfg.max_steps * cfg.decay_fraction))
    start = cfg.max_steps - decay_steps
    if step < min(cfg.warmup_steps, start):   # the decay always keeps its share of the steps
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if step < start:
        return cfg.lr
    progress = min(1.0, (step - start + 1) / decay_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * (1 - math.sqrt(progress)))


def head_ids(manifest: dict, data: ManifestData) -> np.ndarray:
    """The ids the output head predicts, in head order: the text tokenizer's ids, then, when the stage's
    targets include other modalities and its shards hold them, the reserved markers and each image /
    audio block up to the largest code the shards use (a codec may use only part of its block), then the
    conversation markers an assistant turn trains on that the shards hold and the head lacks so far."""
    blocks = {b["name"]: (b["start"], b["start"] + b["size"]) for b in manifest["vocabulary"]["blocks"]}
    ids = [np.arange(_text_ids(manifest))]
    if manifest["training"]["targets"] == "all":
        top = {name: -1 for name in ("reserved", "image", "audio")}
        for arr in data.token_arrays():
            for name in top:
                lo, hi = blocks[name]
                inside = arr[(arr >= lo) & (arr < hi)]
                if inside.size:
                    top[name] = max(top[name], int(inside.max()))
        if top["image"] >= 0 or top["audio"] >= 0:
            ids.append(np.arange(*blocks["reserved"]))
            ids += [np.arange(blocks[n][0], top[n] + 1) for n in ("image", "audio") if top[n] >= 0]
    chat = np.asarray(trainable_ids(manifest["vocabulary"]), dtype=np.int64)
    held = set()
    for arr in data.token_arrays():
        held.update(np.unique(np.asarray(arr)[np.isin(arr, chat)]).tolist())
    ids.append(np.asarray([t for t in chat.tolist() if t in held and not any((t == i).any() for i in ids)],
                          dtype=np.int64))
    return np.concatenate(ids)


def _to_tensors(obj):
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, dict):
        return {k: _to_tensors(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_tensors(v) for v in obj]
    return obj


def _from_tensors(obj):
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return {k: _from_tensors(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_tensors(v) for v in obj]
    return obj


class Trainer:
    def __init__(self, manifest_path: str | Path, out: str | Path, cfg: TrainConfig,
                 model_cfg: ModelConfig | None = None, *, verify: bool = True, write_back: bool = True,
                 key: str | Path | None = None):
        self.manifest_path, self.out, self.cfg = Path(manifest_path), Path(out), cfg
        if verify:   # raises VerifyError naming every problem; the hand-off's absolute paths are Megatron's concern
            verify_manifest(self.manifest_path, check_location=False, key=key)
        self.manifest = m = load_manifest(self.manifest_path)
        if "training" not in m:
            raise CurateError(f"{manifest_path}: the manifest has no `training` section; re-run `curate run`")
        self.data = ManifestData(self.manifest_path, cfg.seq_length)
        self.rules = TargetRules(m["vocabulary"], m["training"]["targets"], m["training"]["goldfish"],
                                 m["training"].get("thinking", "train"))
        mc = model_cfg or ModelConfig.tiny()
        mc.vocab_size = m["vocabulary"]["padded_size"]
        self.head_ids = head_ids(m, self.data)
        # label id -> head index (-1: not predicted): the head is compact, not the whole padded vocabulary
        self.lut = torch.full((mc.vocab_size,), -1, dtype=torch.int64)
        self.lut[torch.from_numpy(self.head_ids)] = torch.arange(len(self.head_ids))
        mc.output_vocab = len(self.head_ids)
        self.model_cfg = mc
        torch.manual_seed(cfg.seed)
        self.model = HybridLM(mc)
        decay = [p for n, p in self.model.named_parameters() if p.dim() >= 2]
        other = [p for n, p in self.model.named_parameters() if p.dim() < 2]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": other, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))
        self.step, self.write_back_enabled = 0, write_back
        self.training_id = f"{self.out.resolve().name}:{m['stage']}:{m['stage_fingerprint'][:12]}"
        self.out.mkdir(parents=True, exist_ok=True)
        self._resume()

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save(self) -> None:
        state = {"step": self.step, "model": self.model.state_dict(), "optim": self.opt.state_dict(),
                 "data": _to_tensors(self.data.state_dict()), "rng": torch.get_rng_state(),
                 "vocabulary": self.manifest["vocabulary"]["id"], "stage_fingerprint": self.manifest["stage_fingerprint"],
                 "model_config": asdict(self.model_cfg), "train_config": asdict(self.cfg)}
        tmp = self.checkpoint_path.with_name("checkpoint.pt.tmp")
        torch.save(state, tmp)
        tmp.replace(self.checkpoint_path)

    def _resume(self) -> None:
        if not self.checkpoint_path.is_file():
            return
        state = torch.load(self.checkpoint_path, weights_only=True)   # tensors and plain values only
        if state["vocabulary"] != self.manifest["vocabulary"]["id"]:
            raise CurateError(f"{self.checkpoint_path}: trained with vocabulary {state['vocabulary']!r}, the manifest "
                              f"uses {self.manifest['vocabulary']['id']!r}; use another --out folder")
        if state["stage_fingerprint"] != self.manifest["stage_fingerprint"]:
            raise CurateError(f"{self.checkpoint_path}: belongs to another stage plan; use another --out folder")
        if state["model_config"] != asdict(self.model_cfg):
            raise CurateError(f"{self.checkpoint_path}: model configuration differs from this run's")
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optim"])
        self.data.load_state_dict(_from_tensors(state["data"]))
        torch.set_rng_state(state["rng"])
        self.step = int(state["step"])

    # -- one step ----------------------------------------------------------------------------
    def targets(self, batch) -> torch.Tensor:
        """The (B, T) mask of the labels this step trains on: the stage's rules, the conversation mask of
        the chat template's markers, and the ids the output head predicts."""
        tokens, doc = torch.from_numpy(batch.tokens), torch.from_numpy(batch.doc)
        labels = tokens[:, 1:]
        chat = self.rules.conversation(batch.tokens, batch.doc, batch.lead)
        mask = self.rules.mask(labels, doc[:, 1:] == doc[:, :-1], None if chat is None else chat[:, 1:])
        return mask & (self.lut[labels] >= 0)

    def loss(self, batch) -> tuple[torch.Tensor, dict]:
        tokens = torch.from_numpy(batch.tokens)
        doc = torch.from_numpy(batch.doc)
        inputs, labels = tokens[:, :-1], tokens[:, 1:]
        head = self.lut[labels]
        mask = self.targets(batch)
        logits, aux = self.model(inputs, doc[:, :-1])
        per = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), head.clamp(min=0).reshape(-1),
                              reduction="none").view_as(labels)
        n = mask.sum().clamp(min=1)
        loss = (per * mask).sum() / n
        with torch.no_grad():
            text = mask & self.rules.is_text(labels)
            src = torch.from_numpy(batch.source[:, 1:])
            per_source = {self.data.names[i]: float((per * (mask & (src == i))).sum() / (mask & (src == i)).sum())
                          for i in range(len(self.data.names)) if (mask & (src == i)).any()}
            info = {"loss": float(loss), "loss_text": float((per * text).sum() / text.sum().clamp(min=1)),
                    "targets": int(mask.sum()), "aux": float(aux), "per_source": per_source}
        return loss + aux, info   # aux: the MoE balance loss, already weighted by the model config

    def train(self, max_steps: int | None = None, log=print) -> list[dict]:
        cfg, history = self.cfg, []
        stop = min(cfg.max_steps, max_steps) if max_steps else cfg.max_steps
        logf = (self.out / "train.jsonl").open("a")
        self.model.train()
        while self.step < stop:
            start = time.perf_counter()
            lr = wsd_lr(self.step, cfg)
            for g in self.opt.param_groups:
                g["lr"] = lr
            batch = self.data.next_batch(cfg.batch_size)
            loss, info = self.loss(batch)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip))
            self.opt.step()
            self.step += 1
            seconds = time.perf_counter() - start
            rec = {"step": self.step, "lr": lr, **info, "grad_norm": grad_norm,
                   "tokens_per_s": cfg.batch_size * cfg.seq_length / seconds}
            history.append(rec)
            logf.write(json.dumps(rec, sort_keys=True) + "\n")
            if log and (self.step % cfg.log_every == 0 or self.step == stop):
                log(f"step {self.step}/{cfg.max_steps}  loss {info['loss']:.4f}  text {info['loss_text']:.4f}  "
                    f"lr {lr:.2e}  {rec['tokens_per_s']:,.0f} tok/s")
            if self.step % cfg.checkpoint_every == 0 or self.step == stop:
                self.save()
                self._write_back()
        logf.close()
        return history

    def _write_back(self) -> None:
        if not self.write_back_enabled:
            return
        ledger_dir = (self.manifest_path.resolve().parent / self.manifest["ledger"]).parent
        rows = consumed_rows(self.manifest, self.training_id, self.step, self.data.consumed, self.data.planned_tokens())
        write_back(ledger_dir, self.training_id, rows)


def _text_ids(manifest: dict) -> int:
    """The text tokenizer's ids (the start of the text block); the whole block if the manifest is older."""
    return manifest["vocabulary"].get("text_ids") or manifest["vocabulary"]["blocks"][0]["size"]
