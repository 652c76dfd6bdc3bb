"""Reference trainer throughput on CPU: the tiny hybrid model on the demo's stage1 manifest.

Runs the demo recipe if `out/demo` does not hold it yet, then trains `ModelConfig.tiny()` (Mamba-2 /
attention / MoE, text-only head of the demo tokenizer's 16,384 ids, embedding over the padded
266,752-id vocabulary) for `--steps` steps of batch 8 × 256 tokens and reports tokens per second
after `--warmup` steps, the share of each training step spent in forward, backward and the
optimizer, and the realised per-source shares of the consumed tokens against the plan.

Usage: .venv/bin/python tests/benchmarks/bench_train.py [--steps 40] → reports/benchmarks/train.md
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    import torch

    from curation.commands.run import run
    from curation.train.loop import TrainConfig, Trainer
    out = REPO / "out" / "demo"
    run(REPO / "recipes" / "text.yaml", out, progress=False)
    manifest = out / "manifests" / "stage1.json"
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(max_steps=args.steps, batch_size=8, seq_length=256, checkpoint_every=10**9)
        t = Trainer(manifest, Path(tmp) / "t", cfg, verify=True, write_back=False)
        phases = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
        tokens = 0
        wall = 0.0
        for step in range(args.steps):
            t0 = time.perf_counter()
            batch = t.data.next_batch(cfg.batch_size)
            loss, info = t.loss(batch)
            t1 = time.perf_counter()
            t.opt.zero_grad(set_to_none=True)
            loss.backward()
            t2 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(t.model.parameters(), cfg.clip)
            t.opt.step()
            t3 = time.perf_counter()
            if step >= args.warmup:
                phases["forward"] += t1 - t0
                phases["backward"] += t2 - t1
                phases["optimizer"] += t3 - t2
                wall += t3 - t0
                tokens += cfg.batch_size * cfg.seq_length
        planned = t.data.planned_tokens()
        got = {s: sum(n for (src, _), n in t.data.consumed.tokens.items() if src == s) for s in planned}
        params, head = t.model.num_params(), len(t.head_ids)
    total_p, total_g = sum(planned.values()), sum(got.values())
    lines = [
        "# Reference trainer: CPU throughput", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_train.py --steps {args.steps}` on "
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads.", "",
        f"`ModelConfig.tiny()` (pattern `MEM*EME`: 3 Mamba-2, 1 attention, 3 MoE layers of 4 experts top-2 with "
        f"a shared expert; d_model 128): {params:,} parameters, of which the embedding of the padded vocabulary "
        f"is 34.1 M; output head over {head:,} ids (the demo tokenizer's). Batch 8 × 256 tokens, AdamW, "
        f"cross-document masking, the demo's `stage1` manifest.", "",
        "| measure | value |", "|---|---|",
        f"| tokens per second (steps {args.warmup + 1}-{args.steps}) | **{tokens / wall:,.0f}** |",
        *[f"| {k} share of a step | {100 * v / wall:.0f}% |" for k, v in phases.items()], "",
        f"Realised shares of the {total_g:,} consumed tokens against the plan ({args.steps} steps cover "
        f"{100 * total_g / total_p:.1f}% of the stage):", "",
        "| source | planned share | consumed share |", "|---|---|---|",
        *[f"| {s} | {planned[s] / total_p:.3f} | {got[s] / total_g:.3f} |" for s in planned], "",
        "No GPU machine was lent to this task: the mamba-ssm kernel against the pure-PyTorch SSD scan (tokens/s "
        "and agreement) is not measured; `tests/train/test_model.py -k kernel` checks agreement where CUDA and "
        "mamba-ssm exist.", "",
    ]
    (REPO / "reports" / "benchmarks" / "train.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
