"""`curate codec check PATH`: is this folder the codec a recipe should point at?

Loads the folder through the pipeline's own loader (`curation.steps.codecs`: weights only, every tensor
checked by name and shape against the configuration), then encodes a fixed probe (a 128×128 test
image or a 2-second test clip, built from integer arithmetic alone so it is bit-identical on every
machine) and prints the sha256 of its codes: two sites with the same files, code and precision get
the same hash, and a changed checkpoint, library or precision mode shows as a different one. A bad
folder raises `InputError` naming every offending tensor (the CLI exits with status 1).

PATH may also be a seeded demo yaml; `--kind` is inferred from the configuration when omitted.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from curation.errors import InputError

PROBE_SIDE = 128          # test image side in pixels: 8×8 codes at 16 pixels per code
PROBE_SAMPLES = 48000     # test clip: 2 s at 24 kHz, 80 codes at 40 per second


@dataclass
class CheckResult:
    kind: str
    family: str
    path: Path
    files: list[str]
    parameters: int
    codebook_size: int
    embedding_dim: int
    used: int | None
    skipped: int | None
    codes_shape: tuple[int, ...]
    distinct_codes: int
    codes_sha256: str
    weights_sha256: str | None = None


def families() -> dict:
    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.image.codec import IBQEncoder
    return {"image": IBQEncoder, "audio": WavTokenizerEncoder}


def infer_kind(path: Path) -> str:
    """"image" or "audio" from the configuration at `path` (a folder or a yaml)."""
    if path.is_file() and path.suffix not in (".yaml", ".yml"):
        path = path.parent
    configs = [path] if path.is_file() else sorted([*path.glob("*.yaml"), *path.glob("*.yml"), *path.glob("*.json")])
    kinds = set()
    for c in configs:
        try:
            raw = json.loads(c.read_text()) if c.suffix == ".json" else yaml.safe_load(c.read_text())
        except (ValueError, yaml.YAMLError, UnicodeDecodeError, OSError):
            continue
        if not isinstance(raw, dict):
            continue
        model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
        if "ddconfig" in raw or "ddconfig" in (model.get("params") or {}) or raw.get("model_type") == "Emu3p5VisionVQ":
            kinds.add("image")
        if "n_codes" in raw or "feature_extractor" in (model.get("init_args") or {}):
            kinds.add("audio")
    if len(kinds) != 1:
        raise InputError(f"codec {path}: cannot tell whether this is an image or an audio codec "
                         f"({'both' if kinds else 'no'} configuration found); give --kind image or --kind audio")
    return kinds.pop()


def probe_image():
    """A 128×128 RGB test image: smooth ramps and rings, from integer arithmetic only."""
    from PIL import Image
    y, x = np.mgrid[0:PROBE_SIDE, 0:PROBE_SIDE].astype(np.int64)
    r = x * 255 // (PROBE_SIDE - 1)
    g = y * 255 // (PROBE_SIDE - 1)
    b = (((x - 64) ** 2 + (y - 40) ** 2) // 24) % 256
    return Image.fromarray(np.stack([r, g, b], axis=-1).astype(np.uint8), "RGB")


def probe_clip() -> np.ndarray:
    """A 2-second float32 test clip at 24 kHz: two sawtooth tones (440 and 660 Hz) and LCG noise, every
    sample an integer over 2^16, so exactly representable and the same everywhere."""
    n = np.arange(PROBE_SAMPLES, dtype=np.int64)
    saw = lambda hz: (n * hz * 65536 // 24000) % 65536 - 32768  # noqa: E731
    noise = np.empty(PROBE_SAMPLES, dtype=np.int64)
    state = 12345
    for i in range(PROBE_SAMPLES):            # a fixed linear congruential generator, not numpy's RNG
        state = (1103515245 * state + 12345) % 2 ** 31
        noise[i] = (state >> 15) - 32768
    mix = 2 * saw(440) + saw(660) + noise // 8          # |mix| < 4 · 32768
    return (mix / 2 ** 18).astype(np.float32)           # peak below 0.5


def encode_probe(codec, kind: str) -> np.ndarray:
    import torch
    if kind == "image":
        from curation.steps.image.codec import to_pixels
        with torch.no_grad():
            return codec.encode(to_pixels(probe_image(), (PROBE_SIDE, PROBE_SIDE))[None]).numpy()
    return codec.encode(torch.from_numpy(probe_clip())[None]).numpy()


def check_codec(path: str | Path, kind: str | None = None) -> CheckResult:
    from curation.steps.codecs import open_checkpoint, seeded_codec
    path = Path(path)
    if not path.exists():
        raise InputError(f"codec {path}: no such file or folder")
    kind = kind or infer_kind(path)
    family = families()[kind]
    weights = None
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        codec, files, used, skipped = seeded_codec(path, family), [path.name], None, None
    else:
        ckpt = open_checkpoint(path, family)
        codec, files, used, skipped = ckpt.model, [*ckpt.config_files, ckpt.weights_file], ckpt.used, ckpt.skipped
        weights = _sha256_file(ckpt.folder / ckpt.weights_file)
    codes = encode_probe(codec, kind)
    return CheckResult(kind, family.__name__, path, files, sum(t.numel() for t in codec.state_dict().values()),
                       codec.codebook_size, codec.embedding_dim, used, skipped, tuple(codes.shape), len(np.unique(codes)),
                       hashlib.sha256(codes.astype("<i4").tobytes()).hexdigest(), weights)


def _sha256_file(path: Path) -> str:
    """The file's sha256: the value Hugging Face shows for an LFS file, to compare with the published one."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def format_result(r: CheckResult) -> str:
    probe = (f"{PROBE_SIDE}x{PROBE_SIDE} test image" if r.kind == "image"
             else f"{PROBE_SAMPLES / 24000:g} s test clip at 24 kHz")
    lines = [f"{r.path}: ok, {r.kind} codec ({r.family})",
             f"files:          {', '.join(r.files)}"]
    if r.used is not None:
        lines += [f"weights sha256: {r.weights_sha256}",
                  f"tensors:        {r.used} loaded and checked, {r.skipped} present but unused"]
    else:
        lines.append("weights:        seeded random (a demo configuration, not a trained codec)")
    lines += [f"parameters:     {r.parameters:,} (encoder and codebook)",
              f"codebook:       {r.codebook_size:,} codes x {r.embedding_dim} dimensions",
              f"probe:          {probe} -> codes {'x'.join(map(str, r.codes_shape))}, "
              f"{r.distinct_codes} distinct",
              f"codes sha256:   {r.codes_sha256}"]
    return "\n".join(lines)
