"""The pipeline mode of tests/benchmarks/gpu_check.py (`--pipeline`): `curate run` with the codecs on every GPU.

Runs, with the Ray executor (one codec task per GPU, `curation.core.resources`), the multimodal demo
(recipes/demo.yaml) and a synthetic image/audio set generated here (seeded: smooth random pictures of
mixed sizes in WebDataset shards, band-limited noise clips in JSONL manifests), each with every image and
audio source set to `device: cpu` (the reference: float32), and where CUDA is present `device: cuda` with
the TF32 contract and with `precision: bfloat16`. Per run it reports the GPUs the codec tasks used (the
ledger's `encoders`), the encoder's busy share (seconds inside the codec / the tokenize step's wall
seconds, summed over the codec parts), images/s and clips/s per GPU (images or clips over the parts'
summed wall seconds: each task holds one GPU), whether the shards are byte-identical to the CPU float32
run (else the share of tokens that differ, the flip rate of that precision) and the plan's rank
imbalance (`rank_plan`). Without CUDA only the CPU reference runs, and the section says so.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import wave
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"


def synthetic_images(folder: Path, n: int, per_shard: int = 256, seed: int = 0) -> None:
    """`n` distinct pictures (smooth random fields, 96-640 px, mixed aspect ratios) with captions, as tars."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(0, n, per_shard):
        with tarfile.open(folder / f"synthetic-{s // per_shard:05d}.tar", "w") as tar:
            for i in range(s, min(n, s + per_shard)):
                w = int(rng.integers(96, 640))
                h = int(np.clip(w * rng.choice([0.5, 0.75, 1.0, 4 / 3, 1.5]), 64, 960))
                small = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
                img = Image.fromarray(small).resize((w, h), Image.BICUBIC)
                buf = io.BytesIO()
                img.save(buf, "JPEG", quality=90)
                caption = f"A synthetic picture, number {i}, of soft colour fields in {w} by {h} pixels."
                for name, data in ((f"{i:07d}.jpg", buf.getvalue()), (f"{i:07d}.txt", caption.encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def synthetic_clips(folder: Path, n: int, per_manifest: int = 64, seed: int = 1) -> None:
    """`n` distinct clips (1-6 s of band-limited, amplitude-modulated noise at 24 kHz) in JSONL manifests."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(0, n, per_manifest):
        lines = []
        for i in range(s, min(n, s + per_manifest)):
            sr, seconds = 24000, float(rng.uniform(1.0, 6.0))
            t = np.arange(int(sr * seconds)) / sr
            noise = np.convolve(rng.standard_normal(t.size), np.ones(12) / 12, mode="same")
            x = noise * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 6) * t)) * 0.3
            pcm = (np.clip(x / max(1e-9, np.abs(x).max()) * 0.7, -1, 1) * 32767).astype("<i2")
            with wave.open(str(folder / f"clip-{i:06d}.wav"), "wb") as f:
                f.setnchannels(1)
                f.setsampwidth(2)
                f.setframerate(sr)
                f.writeframes(pcm.tobytes())
            lines.append(json.dumps({"id": f"clip-{i:06d}", "audio": f"clip-{i:06d}.wav", "recording": f"r{i}",
                                     "order": 0}))
        (folder / f"clips-{s // per_manifest:04d}.jsonl").write_text("\n".join(lines) + "\n")


def synthetic_recipe(folder: Path, images: int, clips: int) -> Path:
    synthetic_images(folder / "images", images)
    synthetic_clips(folder / "audio", clips)
    recipe = {"name": "gpu-synthetic", "vocabulary": str(REPO / "tokenizers" / "curate-demo-v1.yaml"),
              "image_tokenizer": str(REPO / "tokenizers" / "curate-demo-ibq.yaml"),
              "audio_tokenizer": str(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"),
              "stages": [{"name": "pretrain", "seq_length": 2048}],
              "sources": [
                  {"name": "pictures", "category": "Image-caption", "modality": "image", "license": "CC0-1.0",
                   "optout": "not_available", "input": {"format": "webdataset", "paths": ["images/*.tar"]},
                   "images": {"min_side": 64, "area": 65536, "caption": "after"}},
                  {"name": "noise", "category": "Audio", "modality": "audio", "license": "CC0-1.0",
                   "optout": "not_available", "input": {"format": "audio", "paths": ["audio/*.jsonl"]},
                   "audio": {"max_batch_seconds": 60, "near_dup_ber": None}}]}
    path = folder / "synthetic.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def variant(recipe: Path, folder: Path, device: str, precision: str | None) -> Path:
    """The recipe with every image and audio source's codec on `device` (a copy beside the original's data)."""
    data = yaml.safe_load(recipe.read_text())
    for key in ("vocabulary", "image_tokenizer", "audio_tokenizer"):
        if key in data:
            data[key] = str((recipe.parent / data[key]).resolve())
    for src in data["sources"]:
        for block, kind in (("images", "image"), ("audio", "audio")):
            if src.get("modality") == kind or (kind == "image" and src.get("modality") == "interleaved"):
                src[block] = {**(src.get(block) or {}), "device": device,
                              **({"precision": precision} if precision else {})}
    path = recipe.parent / f".{recipe.stem}-{device}-{precision or 'contract'}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(recipe: Path, out: Path) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "curation.commands.cli", "-q", "run", str(recipe), "--out", str(out),
                        "--executor", "ray", "--force"], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    if p.returncode != 0:
        raise RuntimeError(f"curate run {recipe.name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return time.perf_counter() - t, p.stderr


def measure(out: Path) -> dict:
    import pyarrow.parquet as pq
    encoders = pq.read_table(out / "ledger" / "encoders.parquet").to_pylist()
    ranks = {r["source"]: r for r in pq.read_table(out / "ledger" / "rank_plan.parquet").to_pylist()}
    codec_parts = {(r["source"], r["shard"]) for r in encoders}
    kinds = {(r["source"], r["shard"]): r["codec"] for r in encoders}
    sums = {"image": [0.0, 0.0, 0], "audio": [0.0, 0.0, 0]}   # encode s, wall s, items
    for source, shard in codec_parts:
        marker = json.loads((out / "work" / "markers" / "tokenize" / source / f"{shard}.json").read_text())
        timing = marker.get("timing") or [{}]
        kind = kinds[(source, shard)]
        s = sums["audio" if kind == "audio" else "image"]
        s[0] += sum(t.get("encode", 0.0) for t in timing)
        s[1] += sum(t.get("wall", 0.0) for t in timing)
        s[2] += int(marker.get("records", 0))
    return {"gpus": sorted({r["gpus"] for r in encoders if r["device"] == "cuda"}),
            "devices": sorted({f"{r['device']} {r['precision']} ({r['device_name']})" for r in encoders}),
            "sums": sums, "ranks": ranks.get("(all)")}


def flips(a: Path, b: Path) -> str:
    """Identical, or the share of tokens of the codec sources' shards that differ."""
    from curation.shards import read_tokens
    same = total = 0
    files = sorted(p.relative_to(a) for p in (a / "tokenized").rglob("*.bin"))
    if all((a / f).read_bytes() == (b / f).read_bytes() for f in files):
        return f"identical ({len(files)} shards)"
    for f in files:
        x, y = read_tokens(a / f.with_suffix("")), read_tokens(b / f.with_suffix(""))
        if x.size != y.size:
            return f"{f}: {x.size} vs {y.size} tokens"
        same += int((x == y).sum())
        total += x.size
    return f"{100 * (total - same) / max(total, 1):.3f}% of {total:,} tokens differ"


def pipeline_section(cuda: bool, images: int, clips: int, with_demo: bool = True) -> list[str]:
    """The section's lines; `with_demo`: also the multimodal demo recipe (left out by `--quick`, the test: the
    synthetic set alone exercises every column, and the demo runs end to end in tests/commands)."""
    variants = [("cpu", None)] + ([("cuda", None), ("cuda", "bfloat16")] if cuda else [])
    lines = ["## Pipeline", "",
             "`curate run` with the Ray executor (one codec task per GPU), the image and audio sources' "
             "`device` set as each row says. Busy share = seconds inside the codec / tokenize wall seconds of "
             "the codec parts; per GPU = items / the parts' summed wall seconds (each task holds one GPU; on the "
             "CPU: one task slot). Codes: the shards against the CPU float32 run.", ""]
    if not cuda:
        lines += ["**No GPU was available**: only the CPU float32 reference ran (`device: cpu`); the CUDA rows "
                  "(TF32 contract, bfloat16) need a CUDA machine: run `python tests/benchmarks/gpu_check.py "
                  "--pipeline` there.", ""]
    lines += ["| data | device | wall s | GPUs | devices (ledger) | encoder busy | images/s per GPU | clips/s per GPU | "
              "codes vs CPU float32 | imbalance (ranks) | at 8 ranks |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="gpu-pipeline-") as tmp:
        tmp = Path(tmp)
        demo = tmp / "demo"
        demo.mkdir()
        for d in RECIPES.iterdir():   # the demo's data beside its variants
            if d.is_dir():
                (demo / d.name).symlink_to(d)
        (demo / "demo.yaml").write_text((RECIPES / "demo.yaml").read_text().replace("../tokenizers/",
                                                                                     f"{REPO}/tokenizers/"))
        sets = [("demo", demo / "demo.yaml")] if with_demo else []
        sets.append((f"synthetic {images} images, {clips} clips", synthetic_recipe(tmp / "synthetic", images, clips)))
        for name, recipe in sets:
            ref = None
            for device, precision in variants:
                out = tmp / "out" / f"{recipe.stem}-{device}-{precision or 'contract'}"
                wall, _ = run(variant(recipe, recipe.parent, device, precision), out)
                m = measure(out)
                ref = ref or out
                (ie, iw, ni), (ae, aw, na) = m["sums"]["image"], m["sums"]["audio"]
                busy = (ie + ae) / max(iw + aw, 1e-9)
                r = m["ranks"] or {}
                shown = f"{device}" + (f" {precision}" if precision else " (TF32)" if device == "cuda" else " float32")
                lines.append(f"| {name} | {shown} | {wall:.0f} | {len(m['gpus']) or '-'} | {'; '.join(m['devices'])} | "
                             f"{100 * busy:.0f}% | {ni / max(iw, 1e-9):.1f} | {na / max(aw, 1e-9):.1f} | "
                             f"{'reference' if out == ref else flips(ref, out)} | "
                             f"{100 * r.get('run_imbalance', 0):.2f}% ({r.get('run_ranks', '-')}) | "
                             f"{100 * r.get('imbalance_8', 0):.2f}% |")
    return lines + [""]
