"""What the image and audio encoders share: a prefetch loop and a per-batch checkpoint of codes.

`prefetch(items, load)` yields `(item, load(item))` in order while a loader thread already runs
`load` on the next item, so decoding and resizing batch k+1 overlaps the codec encoding batch k.

`BatchCodes` keeps the codec's output of every finished batch in `<part>.codes/<k>.npz` (written
atomically), stamped with the tokenize node's fingerprint: a task killed mid-way resumes by loading
the saved batches and encoding only the rest, and writes the same bytes as an uninterrupted task.
The codes are the expensive part; laying them out into sequences is cheap and simply redone.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from curation.core.atomic import atomic_write_npz

T = TypeVar("T")
L = TypeVar("L")


def one_thread() -> None:
    """Codes depend on how float sums are split over threads (seeded codecs also calibrate at load): run
    codecs on one intra-op thread, as every Ray worker does (OMP_NUM_THREADS=1), so the local and the Ray
    executor write the same bytes. Call before loading a codec."""
    import torch
    torch.set_num_threads(1)


def prefetch(items: Iterable[T], load: Callable[[T], L], enabled: bool = True) -> Iterator[tuple[T, L]]:
    """`(item, load(item))` in order; with `enabled`, item k+1 loads in a thread while k is consumed."""
    if not enabled:
        for item in items:
            yield item, load(item)
        return
    it = iter(items)
    with ThreadPoolExecutor(max_workers=1) as pool:
        current = next(it, None)
        pending = pool.submit(load, current) if current is not None else None
        while current is not None:
            loaded = pending.result()
            nxt = next(it, None)
            pending = pool.submit(load, nxt) if nxt is not None else None
            yield current, loaded
            current = nxt


class BatchCodes:
    """Codes of finished batches, one file per batch, valid for one fingerprint."""

    def __init__(self, folder: Path, fingerprint: str):
        self.folder = Path(folder)
        stamp = self.folder / "fingerprint"
        if not stamp.is_file() or stamp.read_text() != fingerprint:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            stamp.write_text(fingerprint)

    def _path(self, k: int) -> Path:
        return self.folder / f"{k:06d}.npz"

    def saved(self) -> int:
        """Batches whose codes are saved (a batch being written when the task died is not)."""
        return sum(1 for p in self.folder.glob("*.npz") if ".tmp" not in p.name)

    def load(self, k: int, ids: list[str]) -> list[np.ndarray] | None:
        """The saved codes of batch k, if it was saved for exactly these ids."""
        path = self._path(k)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            if [str(i) for i in z["ids"]] != list(ids):
                return None
            return [z[f"c{j}"] for j in range(len(ids))]

    def save(self, k: int, ids: list[str], codes: list[np.ndarray]) -> None:
        atomic_write_npz(self._path(k), ids=np.asarray(ids), **{f"c{j}": c for j, c in enumerate(codes)})

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
