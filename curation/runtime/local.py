"""The local executor: every task in this process, one after another, in plan order.

It is the determinism reference (the Ray executor must write the same bytes, with any number of
workers or nodes), what most tests use, and what small runs use so that they do not pay Ray's
start-up. Codecs run on one intra-op thread either way (`curation.steps.encode.one_thread`), as in a Ray
worker.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from curation.core.resources import Resources
from curation.errors import CurateError
from curation.runtime.progress import Bar


class LocalExecutor:
    name = "local"

    def __init__(self, progress: bool = True, **_):
        self.progress = progress

    def __enter__(self) -> "LocalExecutor":
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

    def map(self, fn: Callable, calls: Sequence[tuple[str, tuple]], label: str,
            resources: dict[str, dict] | None = None) -> dict[str, Any]:
        """`resources` (per key) are not scheduled here: every task runs in this process, one at a time."""
        bar = Bar(label, len(calls), self.progress)
        results = {}
        try:
            for key, args in calls:
                try:
                    results[key] = fn(*args)
                except CurateError:
                    raise
                except Exception as e:  # noqa: BLE001 - named like the Ray executor names a failed task
                    raise CurateError(f"task {key} failed: {e!r}") from e
                bar.advance(key)
        finally:
            bar.close()
        return results
