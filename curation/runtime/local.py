"""The local executor: every task in this process, one after another, in plan order.

It is the determinism reference (the Ray executor must write the same bytes, with any number of
workers or nodes), what most tests use, and what small runs use so that they do not pay Ray's
start-up. Codecs run on one intra-op thread either way (`curation.steps.encode.one_thread`), as in a Ray
worker. One task is in flight at a time: `submit` queues it, `wait` runs it.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from curation.core.resources import Resources
from curation.errors import CurateError
from curation.runtime.schedule import run_all


class LocalExecutor:
    name = "local"
    slots = 1

    def __init__(self, progress: bool = True, **_):
        self.progress = progress
        self.retries: list[dict] = []   # a task here cannot lose its worker: never any
        self._queue: deque = deque()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def check_resources(self, resources: dict[str, dict]) -> None:
        """A codec asked onto CUDA (`device: cuda`) needs CUDA in this process; `auto` falls back to the CPU."""
        wanting = sorted(k for k, r in resources.items() if Resources.from_json(r).device == "cuda")
        if wanting:
            import torch
            if not torch.cuda.is_available():
                raise CurateError(f"{len(wanting)} task(s) ask for `device: cuda` (first: {wanting[0]}) but torch sees "
                                  f"no CUDA device here (torch {torch.__version__}); run on a GPU machine or cluster, "
                                  f"or set the source's `device: auto` or `cpu`")

    def submit(self, key: str, fn: Callable, args: tuple, resources: dict | None = None) -> None:
        """`resources` are not scheduled here: every task runs in this process, one at a time."""
        self._queue.append((key, fn, args))

    def wait(self) -> list[tuple[str, Any]]:
        key, fn, args = self._queue.popleft()
        try:
            return [(key, fn(*args))]
        except CurateError:
            raise
        except Exception as e:  # noqa: BLE001 - named like the Ray executor names a failed task
            raise CurateError(f"task {key} failed: {e!r}") from e

    def cancel(self) -> None:
        self._queue.clear()

    def map(self, fn: Callable, calls: Sequence[tuple[str, tuple]], label: str,
            resources: dict[str, dict] | None = None) -> dict[str, Any]:
        return run_all(self, fn, calls, label, self.progress, resources)
