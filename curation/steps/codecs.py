"""The one codec loader: a seeded demo configuration or a published checkpoint folder, checked tensor
by tensor, loaded weights-only, cached per worker process.

`load_codec(path, family)` is what the tokenizers call; `family` is a codec class (the IBQ image
encoder, the WavTokenizer audio encoder) with this small protocol:

    kind                 "image" or "audio" (for messages)
    config_files         file names or globs of the published configuration, in preference order
    weight_files         the same for the weights (`.safetensors` before `.ckpt`: nothing to unpickle)
    seeded(cfg, seed)    the architecture of a demo config with seeded random weights
    from_configs(cfgs)   the architecture a folder's parsed config files describe (file name -> content)
    layout(names)        a `Layout`: which published tensors, of which shapes, the model needs, given
                         the tensor names the file holds (weight-norm forms differ between files)
    assemble(tensors)    the model's own state dict from those tensors (renamed, weight norm folded)

`path` is (1) a `*.yaml` with `seed:`: the demo configuration; (2) a folder holding the published
configuration and weights; (3) a weights file, whose folder holds the configuration. A YAML without
`seed` is refused rather than silently given random weights (it is likely the published config given
in place of its folder). A folder's weights are read with `torch.load(weights_only=True)` (tensors and
plain containers only; a file that needs anything else is refused, never unpickled) or with
safetensors; a Lightning checkpoint's `state_dict` is unwrapped. Every tensor the model needs is
checked by name and shape against the configuration, and so is every tensor of the file under the
model's own prefixes: missing, unexpected and misshapen tensors are listed together in one
`InputError`, each with its name, the expected and the found shape. Tensors the family declares
unused (a decoder, training buffers) are only counted. Half-precision weights are refused: codes are
an argmax/argmin over near-ties, and weights rounded to 16 bits already flip some of them.

The cache key includes the size and modification time of every file read, so a checkpoint replaced
in place is loaded again; nothing is ever downloaded.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
import yaml

from curation.errors import InputError

WEIGHT_SUFFIXES = (".safetensors", ".ckpt", ".pt", ".pth", ".bin")
HALF = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Layout:
    """What a model needs from a checkpoint: `expected` published tensor name -> shape. Every name of
    the file that starts with one of `scope` must be expected; names starting with one of `unused` are
    known and skipped; any other name is unexpected, unless `unused` is None (skip everything else:
    Lightning checkpoints carry discriminators, losses and heads under many prefixes)."""
    expected: dict[str, tuple[int, ...]]
    scope: tuple[str, ...]
    unused: tuple[str, ...] | None = ()


@dataclass
class Checkpoint:
    """A loaded and checked checkpoint folder: the model and what was read to build it."""
    model: Any
    folder: Path
    config_files: list[str]
    weights_file: str
    used: int                               # tensors of the file the model took
    skipped: int                            # tensors of the file declared unused


class Weights:
    """Names, shapes and dtypes of a weights file's tensors, each tensor read only when asked for."""

    def __init__(self, path: Path):
        self.path = path
        if path.suffix == ".safetensors":
            self._read_safetensors()
        else:
            self._read_torch()

    def _read_safetensors(self) -> None:
        from safetensors import SafetensorError, safe_open
        try:
            self._file = safe_open(str(self.path), framework="pt")
            keys = list(self._file.keys())
            self.shapes = {k: tuple(self._file.get_slice(k).get_shape()) for k in keys}
            self._dtypes = {k: self._file.get_slice(k).get_dtype() for k in keys}
        except (SafetensorError, OSError) as e:
            raise InputError(f"{self.path}: not a readable safetensors file ({e})") from None
        self.tensor = self._file.get_tensor

    def _read_torch(self) -> None:
        try:
            try:
                ckpt = torch.load(self.path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:
                if "mmap" not in str(e):
                    raise
                ckpt = torch.load(self.path, map_location="cpu", weights_only=True)  # a legacy (non-zip) file
        except Exception as e:  # anything beyond tensors and plain containers is refused, never unpickled
            raise InputError(f"{self.path}: not a weights-only checkpoint ({type(e).__name__}: {e}); it would "
                             f"need unpickling arbitrary objects, which curate never does: use the "
                             f"published .safetensors file, or re-save the plain state dict") from None
        state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None  # Lightning wraps it
        if not isinstance(state, dict) or not any(isinstance(v, torch.Tensor) for v in state.values()):
            raise InputError(f"{self.path}: no tensors in it (expected a state dict, or a Lightning "
                             f"checkpoint with a `state_dict` of tensors)")
        self._state = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        self.shapes = {k: tuple(v.shape) for k, v in self._state.items()}
        self.tensor = self._state.__getitem__

    def is_half(self, name: str) -> bool:
        if hasattr(self, "_dtypes"):
            return self._dtypes[name] in ("F16", "BF16")
        return self._state[name].dtype in HALF


def _shape(s) -> str:
    return "(" + ", ".join(map(str, s)) + ")"


def check(layout: Layout, weights: Weights, against: str) -> tuple[list[str], int]:
    """(problems, skipped tensors): every missing, unexpected, misshapen or half-precision tensor named."""
    found, problems, skipped = weights.shapes, [], 0
    for name, want in layout.expected.items():
        if name not in found:
            problems.append(f"missing tensor {name} (expected shape {_shape(want)})")
        elif found[name] != tuple(want):
            problems.append(f"misshapen tensor {name}: shape {_shape(found[name])} in the file, "
                            f"{_shape(want)} expected by {against}")
        elif weights.is_half(name):
            problems.append(f"tensor {name} is stored in half precision; codec weights must be float32 "
                            f"(16-bit weights flip codes)")
    for name in sorted(found):
        if name in layout.expected:
            continue
        if name.startswith(layout.scope) or (layout.unused is not None and not name.startswith(layout.unused)):
            problems.append(f"unexpected tensor {name} (shape {_shape(found[name])}): not part of the model "
                            f"{against} describes")
        else:
            skipped += 1
    return problems, skipped


def _find(folder: Path, patterns: tuple[str, ...], what: str, family) -> list[Path]:
    """The files of `folder` matching `patterns`: every exact name present; a glob only if nothing
    earlier matched, and then it must match exactly one file."""
    found: list[Path] = []
    for pattern in patterns:
        if not any(c in pattern for c in "*?["):
            if (folder / pattern).is_file():
                found.append(folder / pattern)
            continue
        if found:
            break
        matches = sorted(p for p in folder.glob(pattern) if p.is_file())
        if len(matches) > 1:
            raise InputError(f"{family.kind} codec {folder}: {len(matches)} {what} files match {pattern} "
                             f"({', '.join(p.name for p in matches)}); keep the one published with the checkpoint")
        found += matches
        if found:
            break
    if not found:
        raise InputError(f"{family.kind} codec {folder}: no {what} file ({' or '.join(patterns)}); put the "
                         f"published files there (README, 'Codecs'); nothing is downloaded at run time")
    return found


def _parse(path: Path) -> Any:
    import json
    try:
        text = path.read_text()
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'} ({e})") from None


def open_checkpoint(path: str | Path, family) -> Checkpoint:
    """Build the model of a checkpoint folder (or of a weights file in one) and load its checked weights."""
    path = Path(path)
    if path.is_file() and path.suffix in WEIGHT_SUFFIXES:
        folder, weights_path = path.parent, path
    elif path.is_dir():
        folder, weights_path = path, _find(path, family.weight_files, "weights", family)[0]
    else:
        raise InputError(f"{family.kind} codec {path}: no such folder or weights file; give the folder with "
                         f"the published checkpoint (README, 'Codecs') or a seeded codec yaml")
    config_paths = _find(folder, family.config_files, "configuration", family)
    model = family.from_configs({p.name: _parse(p) for p in config_paths})
    weights = Weights(weights_path)
    layout = model.layout(set(weights.shapes))
    against = " and ".join(p.name for p in config_paths)
    problems, skipped = check(layout, weights, against)
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise InputError(f"{weights_path}: does not fit {against} ({len(problems)} problem(s)):\n  "
                         + "\n  ".join(shown) + "\nuse the configuration and weights published together")
    tensors = {k: weights.tensor(k).to(torch.float32) for k in layout.expected}
    model.load_state_dict(model.assemble(tensors), strict=True)
    return Checkpoint(model.eval(), folder, [p.name for p in config_paths], weights_path.name,
                      used=len(layout.expected), skipped=skipped)


def seeded_codec(path: Path, family):
    cfg = _parse(path)
    if not isinstance(cfg, dict) or "seed" not in cfg:
        raise InputError(f"{family.kind} codec {path}: a codec yaml needs `seed` (a seeded demo configuration); "
                         f"for the published model give the folder holding its files (README, 'Codecs')")
    try:
        return family.seeded(cfg, seed=int(cfg["seed"]))
    except KeyError as e:
        raise InputError(f"{family.kind} codec {path}: {path.name} is not an {family.kind} codec configuration "
                         f"(no {e.args[0]})") from None


def _signature(path: Path) -> tuple:
    """Name, size and mtime of every file the load may read (a weights file's whole folder)."""
    if path.is_file() and path.suffix in WEIGHT_SUFFIXES:
        path = path.parent
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)


@lru_cache(maxsize=4)
def _cached(path: str, family, signature: tuple):
    p = Path(path)
    if p.is_file() and p.suffix in (".yaml", ".yml"):
        return seeded_codec(p, family)
    return open_checkpoint(p, family).model


def load_codec(path: str | Path, family):
    """The `family` codec at `path` (a seeded yaml, a checkpoint folder or a weights file), loaded once
    per process for unchanged files."""
    p = Path(path).resolve()
    if not p.exists():
        raise InputError(f"{family.kind} codec {path}: no such file or folder; give a seeded codec yaml or the "
                         f"folder with the published checkpoint (README, 'Codecs')")
    return _cached(str(p), family, _signature(p))
