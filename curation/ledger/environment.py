"""What the ledger's `runs` row records about one execution: when it ran (UTC), on which host, and the
versions of the libraries whose behaviour decides the outputs.

Versions are read from the installed distributions' metadata (`importlib.metadata`), never by
importing the library: a text-only run does not pay for importing torch to say which torch it had.
A module can be installed by more than one distribution (the `fasttext` module comes from
`fasttext-numpy2-wheel` and from `fasttext-predict`, which install over each other); then every
one is named, e.g. ``"fasttext-numpy2-wheel 0.9.2; fasttext-predict 0.9.2.4"``. A library that is
not installed is null.

These columns differ between two runs of the same recipe (time, host) or between machines with the
same outputs (a range-pinned pyarrow), so they are in `VOLATILE_COLUMNS`
(`curation.ledger.schema`): left out of the manifests' table digests and of determinism checks.
"""
from __future__ import annotations

import functools
import re
import socket
from datetime import UTC, datetime
from importlib import metadata

# ledger column -> the import name of the library it reports
LIBRARIES: dict[str, str] = {
    "datatrove_version": "datatrove",
    "tokenizers_version": "tokenizers",
    "torch_version": "torch",
    "fasttext_version": "fasttext",
    "lhotse_version": "lhotse",
    "pillow_version": "PIL",
    "imagehash_version": "imagehash",
    "pyarrow_version": "pyarrow",
    "duckdb_version": "duckdb",
}
TIME_COLUMNS = ("started_at", "finished_at", "host")


def utc_now() -> str:
    """The current time as UTC ISO 8601 to the second, e.g. ``2026-03-24T09:15:02Z``."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _providers() -> dict[str, list[str]]:
    """Import name -> distributions, read once per process: scanning every installed distribution's RECORD
    took 0.35 s, a fifth of a small run; what a process has imported does not change under it."""
    return metadata.packages_distributions()


def library_versions() -> dict[str, str | None]:
    """`{column: version}` for `LIBRARIES`; see the module docstring for the value's forms."""
    providers = _providers()
    out: dict[str, str | None] = {}
    for column, module in LIBRARIES.items():
        found = []
        for dist in sorted(set(providers.get(module, ()))):
            try:
                found.append((dist, metadata.version(dist)))
            except metadata.PackageNotFoundError:   # listed by a stale RECORD, not installed
                continue
        library = column.removesuffix("_version")
        if not found:
            out[column] = None
        elif len(found) == 1 and _canonical(found[0][0]) == _canonical(library):
            out[column] = found[0][1]
        else:
            out[column] = "; ".join(f"{dist} {version}" for dist, version in found)
    return out


def environment_row(started_at: str | None, finished_at: str | None) -> dict[str, str | None]:
    """The execution columns of a `runs` row: `started_at`, `finished_at`, `host` and the versions."""
    return {"started_at": started_at, "finished_at": finished_at, "host": socket.gethostname(),
            **library_versions()}
