"""GPU checks of the paths that run on GPUs in production, in one run: the image codec, the audio codec
and the trainer's Mamba-2 scan. Writes reports/benchmarks/gpu.md (or --out) with the device name.

- Image codec (IBQ): the share of codes identical between CPU float32 (one thread, as the pipeline
  writes them) and CUDA float32 with TF32 (the precision contract: 100%), and with bfloat16 autocast
  (expected to flip some: reported how many); the encoder's share of the tokenize step's wall time
  with the loader thread (`ImageTokenizer`, prefetch on and off; Apertus 1.5 reports about 92%) and
  images per second.
- Audio codec (WavTokenizer): codes identical CPU vs CUDA (TF32) and under bfloat16, clips and audio
  seconds per second in zero-padded batches.
- Trainer: `mamba_chunk_scan_combined` (mamba_ssm) against the PyTorch chunked scan
  (`curation.train.ssd.ssd_scan`, backends "kernel" and "torch"), with and without document
  segments: largest difference and time per call.

Without CUDA it runs the CPU parts (reference codes, bfloat16 flips on CPU, CPU throughput, the
PyTorch scan against the step-by-step recurrence), says in the report that no GPU was available,
and exits 0. Codecs: the seeded demo configurations of tokenizers/ unless --image-codec /
--audio-codec name published checkpoint folders (README, "Codecs"). Media: ../shared/data/{images,
audio} when present, else the repository's own demo shards and clips (recipes/images, recipes/audio).

Pipeline mode (`--pipeline`, `tests/benchmarks/gpu_pipeline.py`): instead of the sections above, `curate run`
of the multimodal demo and of a synthetic image/audio set with every codec on `device: cuda` (one task per
GPU of the machine, TF32, then bfloat16) against `device: cpu`: the encoder's busy share, images/s and
clips/s per GPU, codes identical to CPU float32 or the flip rate per precision, the rank imbalance. It
replaces only the report's "## Pipeline" section. Without CUDA it runs the CPU reference and says so.

Usage (about 1-2 minutes on one H200 with the demo codecs; --quick: seconds, for the test):
  .venv/bin/python tests/benchmarks/gpu_check.py [--images 512] [--cpu-images 16] [--compare 24] [--clips 64]
  .venv/bin/python tests/benchmarks/gpu_check.py --pipeline [--pipeline-images 2048] [--pipeline-clips 256]
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import platform
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data"


def media(data: Path) -> tuple[list[tuple[str, bytes]], list[Path], str]:
    """(image name, bytes) and audio files: the shared real-data samples, else the repo's demo media."""
    from curation.core.media import IMAGE_EXTS
    if (data / "images").is_dir() and (data / "audio").is_dir():
        files = sorted(p for sub in ("natural", "text_rich", "charts", "near_duplicates", "satellite")
                       for p in (data / "images" / sub).glob("*") if p.suffix.lower() in IMAGE_EXTS - {".gif"})
        clips = [p for sub in ("speech_ljspeech", "speech_librispeech", "speech_misc", "music")   # speech first
                 for p in sorted((data / "audio" / sub).glob("*")) if p.suffix in (".flac", ".ogg", ".wav")]
        where = "`../shared/data`" if data.resolve() == SHARED.resolve() else f"`{data}`"
        return [(p.name, p.read_bytes()) for p in files], clips, where
    images = []
    for shard in sorted((REPO / "recipes" / "images" / "shards").glob("*.tar")):
        with tarfile.open(shard) as tar:
            images += [(f"{shard.stem}/{m.name}", tar.extractfile(m).read()) for m in tar if m.name.endswith(".jpg")]
    return images, sorted((REPO / "recipes" / "audio" / "speech").glob("LJ*.ogg")), "the repository's demo media"


def shown(path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)


def agree(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[int, int]:
    """(identical codes, all codes) over paired code arrays."""
    return sum(int((x == y).sum()) for x, y in zip(a, b)), sum(x.size for x in a)


def pct(same: int, total: int) -> str:
    return f"{100 * same / max(total, 1):.4f}% ({total - same:,} of {total:,} differ)"


def digest(codes: list[np.ndarray]) -> str:
    return hashlib.sha256(b"".join(c.astype("<i8").tobytes() for c in codes)).hexdigest()[:16]


class OnDevice:
    """A codec on `device` behind the CPU interface the tokenize steps call: CPU tensors in, CPU codes out."""

    def __init__(self, codec, device: str):
        self.codec, self.device = copy.deepcopy(codec).to(device), device
        self.config, self.patch, self.hop = codec.config, getattr(codec, "patch", None), getattr(codec, "hop", None)

    def encode(self, x, bf16: bool = False):
        import torch
        with torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            return self.codec.encode(x.to(self.device)).cpu()


def image_checks(images, codec_path: str, cuda: bool, area: int, compare: int, n: int, n_cpu: int) -> list[str]:
    import torch

    from curation.core.record import Record
    from curation.core.vocab import Vocabulary
    from curation.errors import RecordError
    from curation.steps.codecs import load_codec
    from curation.steps.image.codec import IBQEncoder, to_pixels
    from curation.steps.image.decode import decode
    from curation.steps.image.resize import target_size
    from curation.steps.image.tokenize import ImageTokenizer
    codec = load_codec(codec_path, IBQEncoder)
    decoded, skipped = [], []
    for name, data in images:   # what the pipeline would quarantine (the demo shard's truncated image) is skipped
        try:
            decoded.append((name, data, decode(data)))
        except RecordError as e:
            skipped.append(f"`{name}` ({e.reason})")
    if not decoded:
        raise SystemExit(f"no image of the {len(images)} given decodes: {', '.join(skipped)}")
    pixels = [to_pixels(img, target_size(img.width, img.height, area, codec.patch))[None]
              for _, _, img in decoded[:compare]]
    cpu, gpu = OnDevice(codec, "cpu"), OnDevice(codec, "cuda") if cuda else None
    t = time.perf_counter()
    ref = [cpu.encode(p).numpy() for p in pixels]
    t_cpu = time.perf_counter() - t
    cpu_bf16 = [cpu.encode(p, bf16=True).numpy() for p in pixels]
    lines = [f"Codec `{shown(codec_path)}` ({codec.config['n_embed']:,} codes, patch {codec.patch}); {len(pixels)} "
             f"images resized to about {area:,} pixels ({sum(r.size for r in ref):,} codes), one per call. CPU "
             f"reference: float32, {torch.get_num_threads()} thread(s), {len(pixels) / t_cpu:.2f} images/s, "
             f"codes sha256 `{digest(ref)}`.", "", "| comparison with CPU float32 | identical codes |", "|---|---|",
             f"| CPU bfloat16 autocast | {pct(*agree(ref, cpu_bf16))} |"]
    if skipped:
        lines[0] += f" Skipped, as the pipeline quarantines them: {', '.join(skipped)}."
    if gpu is not None:
        tf32 = [gpu.encode(p).numpy() for p in pixels]
        again = [gpu.encode(p).numpy() for p in pixels]
        bf16 = [gpu.encode(p, bf16=True).numpy() for p in pixels]
        lines += [f"| CUDA float32 + TF32 (the contract: 100%) | {pct(*agree(ref, tf32))} |",
                  f"| CUDA bfloat16 autocast | {pct(*agree(ref, bf16))} |",
                  f"| CUDA TF32, second run vs first | {pct(*agree(tf32, again))} |"]
    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    records = []
    for i in range(max(n, n_cpu)):
        name, data, img = decoded[i % len(decoded)]
        records.append(Record(id=f"{i:06d}", source="bench", text=name, payload={"image": data},
                              meta={"width": img.width, "height": img.height}))
    lines += ["", f"Tokenize step (`ImageTokenizer`: {f'{n} images on CUDA, ' if cuda else ''}{n_cpu} on the CPU, "
              f"the {len(decoded)} real "
              f"ones repeated; batches of at most {max(4096, 2 * area // 256):,} codes); encoder share = time inside "
              "the codec / wall time; one loader thread decodes and resizes batch k+1 while batch k encodes.", "",
              "| device | images | loader | wall s | load s | encode s | encoder share | images/s |",
              "|---|---|---|---|---|---|---|---|"]
    for device, wrapped, count in (("cpu", cpu, n_cpu), *((("cuda", gpu, n),) if gpu else ())):
        for prefetch in (False, True):
            step = ImageTokenizer(vocab, wrapped, area=area, batch_tokens=max(4096, 2 * area // 256),
                                  prefetch=prefetch, source="bench")
            for r in records[:count]:
                r.shards = {}
            list(step.run(records[:count]))
            if device == "cuda":
                torch.cuda.synchronize()
            tm = step.timing
            lines.append(f"| {device} | {count} | {'prefetch' if prefetch else 'off'} | {tm['wall']:.2f} | "
                         f"{tm['load']:.2f} | {tm['encode']:.2f} | {100 * tm['encode'] / tm['wall']:.0f}% | "
                         f"{count / tm['wall']:.1f} |")
    return lines


def audio_checks(clips, codec_path: str, cuda: bool, compare: int, n: int) -> list[str]:
    import torch

    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.audio.ingest import load_clip, peak_normalise
    from curation.steps.audio.tokenize import DROP_LAST
    from curation.steps.codecs import load_codec
    codec = load_codec(codec_path, WavTokenizerEncoder)
    t = time.perf_counter()
    waves = [peak_normalise(load_clip(p)) for p in clips[:compare]]
    t_load = time.perf_counter() - t
    waves = [w for w in waves if w.size >= codec.hop * (DROP_LAST + 1)]
    cpu, gpu = OnDevice(codec, "cpu"), OnDevice(codec, "cuda") if cuda else None
    one = [torch.from_numpy(w)[None] for w in waves]
    ref = [cpu.encode(w).numpy()[0] for w in one]
    seconds = sum(w.size for w in waves) / codec.sample_rate
    lines = [f"Codec `{shown(codec_path)}` ({codec.config['n_codes']:,} codes, hop {codec.hop}); {len(waves)} real clips "
             f"({seconds:.1f} s, decoded and resampled to 24 kHz at {len(waves) / t_load:.1f} clips/s on the CPU), "
             f"each encoded alone; CPU reference codes sha256 `{digest(ref)}`.", "",
             "| comparison with CPU float32 | identical codes |", "|---|---|",
             f"| CPU bfloat16 autocast | {pct(*agree(ref, [cpu.encode(w, bf16=True).numpy()[0] for w in one]))} |"]
    if gpu is not None:
        lines += [f"| CUDA float32 + TF32 (the contract: 100%) | {pct(*agree(ref, [gpu.encode(w).numpy()[0] for w in one]))} |",
                  f"| CUDA bfloat16 autocast | {pct(*agree(ref, [gpu.encode(w, bf16=True).numpy()[0] for w in one]))} |"]
    lines += ["", f"Throughput: {n} clips (the real ones repeated), zero-padded batches of 8 sorted by length, "
              "codec time only (decoding is above).", "", "| device | clips/s | audio s per s |", "|---|---|---|"]
    batch = sorted((waves[i % len(waves)] for i in range(n)), key=len)
    for device, wrapped in (("cpu", cpu), *((("cuda", gpu),) if gpu else ())):
        t = time.perf_counter()
        for s in range(0, n, 8):
            part = batch[s:s + 8]
            x = np.zeros((len(part), max(w.size for w in part)), dtype=np.float32)
            for i, w in enumerate(part):
                x[i, :w.size] = w
            wrapped.encode(torch.from_numpy(x))
        dt = time.perf_counter() - t
        total = sum(w.size for w in batch) / codec.sample_rate
        lines.append(f"| {device} | {n / dt:.1f} | {total / dt:,.0f} |")
    return lines


def ssd_checks(cuda: bool, quick: bool) -> list[str]:
    import importlib.util

    import torch
    import torch.nn.functional as F

    from curation.train.ssd import segment_ids, ssd_reference, ssd_scan
    b, l, h, p, g, n, chunk = (1, 64, 2, 8, 1, 8, 16) if quick or not cuda else (2, 4096, 32, 64, 2, 128, 256)  # noqa: E741 - ssd_scan's shape names
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(b, l, h, p, generator=gen)
    dt = F.softplus(torch.randn(b, l, h, generator=gen) - 1)
    A = -torch.rand(h, generator=gen) * 2 - 0.05
    B, C = torch.randn(b, l, g, n, generator=gen), torch.randn(b, l, g, n, generator=gen)
    D = torch.randn(h, generator=gen)
    doc = torch.repeat_interleave(torch.arange(3), torch.tensor([l // 3, l // 5, l - l // 3 - l // 5])).expand(b, -1)
    seg = segment_ids(doc)
    lines = [f"Shapes: batch {b}, length {l}, {h} heads of {p}, {g} groups, state {n}, chunk {chunk}; three "
             "documents per row for the segmented case.", ""]
    if not cuda:
        want = ssd_reference(x.double(), dt.double(), A.double(), B.double(), C.double(), D.double())
        got = ssd_scan(x.double(), dt.double(), A.double(), B.double(), C.double(), D.double(), chunk, backend="torch")
        return lines + [f"CPU only: the PyTorch chunked scan against the step-by-step recurrence (float64): largest "
                        f"difference {float((got - want).abs().max()):.2e}. The kernel needs CUDA."]
    args = [t.cuda() for t in (x, dt, A, B, C, D)]
    have = importlib.util.find_spec("mamba_ssm") is not None

    def timed(backend: str, s) -> tuple[torch.Tensor, float]:
        out = ssd_scan(*args, chunk, s, backend=backend)          # warm-up (Triton compiles on the first call)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            out = ssd_scan(*args, chunk, s, backend=backend)
        torch.cuda.synchronize()
        return out, (time.perf_counter() - t) / 5

    lines += ["| documents | torch scan ms | kernel ms | largest difference | allclose (2e-3) |", "|---|---|---|---|---|"]
    for name, s in (("one per row", None), ("three per row", seg.cuda())):
        want, t_torch = timed("torch", s)
        if not have:
            lines.append(f"| {name} | {1e3 * t_torch:.2f} | mamba_ssm not installed | — | — |")
            continue
        got, t_kernel = timed("kernel", s)
        diff = float((got - want).abs().max())
        lines.append(f"| {name} | {1e3 * t_torch:.2f} | {1e3 * t_kernel:.2f} | {diff:.2e} | "
                     f"{bool(torch.allclose(got, want, atol=2e-3, rtol=2e-3))} |")
    return lines


def part(check, *args) -> list[str]:
    """One section; a library this machine lacks skips the section with its name, not the whole run."""
    try:
        return check(*args)
    except ModuleNotFoundError as e:
        return [f"Skipped: the module `{e.name or e}` is not installed on this machine (the `[images]` / `[audio]` "
                f"extras name what each part needs); install it and run again."]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "benchmarks" / "gpu.md")
    ap.add_argument("--data", type=Path, default=SHARED, help="folder with images/ and audio/ (../shared/data)")
    ap.add_argument("--image-codec", default=str(REPO / "tokenizers" / "curate-demo-ibq.yaml"))
    ap.add_argument("--audio-codec", default=str(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"))
    ap.add_argument("--images", type=int, default=512, help="images through the tokenize step per setting")
    ap.add_argument("--cpu-images", type=int, default=16, help="images through the tokenize step on the CPU")
    ap.add_argument("--compare", type=int, default=24, help="images compared code by code")
    ap.add_argument("--compare-clips", type=int, default=24, help="clips compared code by code")
    ap.add_argument("--clips", type=int, default=64, help="clips for the audio throughput")
    ap.add_argument("--area", type=int, default=512 * 512)
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the test)")
    ap.add_argument("--pipeline", action="store_true", help="curate run with the codecs on every GPU (only that "
                    "section of the report is rewritten)")
    ap.add_argument("--pipeline-images", type=int, default=None, help="synthetic images (CUDA: 2048, else 96)")
    ap.add_argument("--pipeline-clips", type=int, default=None, help="synthetic clips (CUDA: 256, else 24)")
    a = ap.parse_args(argv)
    import torch
    if a.pipeline:
        return pipeline_main(a, torch)
    if a.quick:
        a.images, a.cpu_images, a.compare, a.compare_clips, a.clips, a.area = 6, 4, 3, 3, 4, 64 * 64
    torch.set_num_threads(1)   # the pipeline's CPU setting (curation.steps.encode.one_thread): reference codes
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "none"
    images, clips, where = media(a.data)
    lines = ["# GPU checks: codecs and the Mamba-2 scan", "",
             f"Produced by `.venv/bin/python tests/benchmarks/gpu_check.py{' --quick' if a.quick else ''}` on "
             f"{time.strftime('%Y-%m-%d')}: GPU **{device}**"
             f"{f' (CUDA {torch.version.cuda}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB)' if cuda else ''}, "
             f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, Python {platform.python_version()}; "
             f"media from {where}.", ""]
    if not cuda:
        lines += ["**No GPU was available**: only the CPU parts ran (reference codes, bfloat16 flips on the CPU, CPU "
                  "throughput, the PyTorch scan). Run this script on a CUDA machine for the GPU figures.", ""]
    started = time.perf_counter()
    lines += ["## Image codec", ""] + part(image_checks, images, a.image_codec, cuda, a.area, a.compare, a.images,
                                          a.cpu_images)
    lines += ["", "## Audio codec", ""] + part(audio_checks, clips, a.audio_codec, cuda, a.compare_clips, a.clips)
    lines += ["", "## Trainer: Mamba-2 scan", ""] + part(ssd_checks, cuda, a.quick)
    lines += ["", f"Total {time.perf_counter() - started:.0f} s.", ""]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


def pipeline_main(a, torch) -> int:
    from tests.benchmarks.gpu_pipeline import pipeline_section
    cuda = torch.cuda.is_available()
    images = a.pipeline_images or (8 if a.quick else 2048 if cuda else 96)
    clips = a.pipeline_clips or (4 if a.quick else 256 if cuda else 24)
    started = time.perf_counter()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    section = pipeline_section(cuda, images, clips, with_demo=not a.quick)
    section[1:1] = ["", f"Produced by `.venv/bin/python tests/benchmarks/gpu_check.py --pipeline"
                    f"{' --quick' if a.quick else ''}` on {time.strftime('%Y-%m-%d')}: "
                    f"{len(gpus)} GPU(s){': ' + ', '.join(sorted(set(gpus))) if gpus else ''}, {os.cpu_count()} CPUs "
                    f"(load {os.getloadavg()[0]:.1f}), torch {torch.__version__}; {time.perf_counter() - started:.0f} s."]
    text = a.out.read_text() if a.out.is_file() else "# GPU checks: codecs and the Mamba-2 scan\n\n"
    if "## Pipeline" in text:
        start = text.index("## Pipeline")
        nxt = text.find("\n## ", start + 1)
        text = text[:start] + "\n".join(section) + (text[nxt + 1:] if nxt != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(section)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print("\n".join(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
