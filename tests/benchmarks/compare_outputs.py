"""Compare two output folders of the same recipe, run by two versions of curate: exit 0 only when
`tokenized/` and `manifests/` are byte-identical, every ledger table holds the same rows (the volatile
columns aside: timings, run times, host, library versions; and the tables of the execution, such as the
task retries of a run that lost a node), every phase's drop lists hold the same rows
and the decontamination review the same rows and page.

    python tests/benchmarks/compare_outputs.py OUT_A OUT_B
"""
from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from curation.ledger.schema import EXECUTION_TABLES, VOLATILE_COLUMNS
from curation.mixture.merkle import duckdb_digests


def _files(root: Path, sub: str) -> dict[Path, Path]:
    base = root / sub
    return {p.relative_to(base): p for p in base.rglob("*") if p.is_file()}


def _rows(path: Path) -> list[dict]:
    return [{c: v for c, v in r.items() if c not in VOLATILE_COLUMNS} for r in pq.read_table(path).to_pylist()]


def _duckdb(db: Path) -> tuple[dict[str, str], dict[str, str], list[tuple]]:
    import duckdb

    digests, views = duckdb_digests(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        types = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE NOT internal "
                            "ORDER BY table_name, column_index").fetchall()
    finally:
        con.close()
    return digests, views, types


def _compare_duckdb(a: Path, b: Path) -> list[str]:
    """`ledger.duckdb`: the same tables with the same rows in the same order (volatile columns aside), the same
    column types and the same views."""
    if not a.is_file() and not b.is_file():
        return []
    (da, va, ta), (db, vb, tb) = _duckdb(a), _duckdb(b)
    skip = set(EXECUTION_TABLES)
    problems = [f"ledger.duckdb: table {t}: only in one file" for t in sorted(set(da) ^ set(db))]
    problems += [f"ledger.duckdb: table {t}: rows differ" for t in sorted(set(da) & set(db))
                 if t not in skip and da[t] != db[t]]
    problems += [f"ledger.duckdb: view {v}: SQL differs" for v in sorted(set(va) | set(vb)) if va.get(v) != vb.get(v)]
    if ta != tb:
        problems.append("ledger.duckdb: column types differ: "
                        + ", ".join(f"{x[0]}.{x[1]}" for x in sorted(set(ta) ^ set(tb))[:10]))
    print(f"ledger.duckdb: {len(set(da) & set(db))} tables compared")
    return problems


def compare(a: Path, b: Path) -> list[str]:
    problems = []
    for sub in ("tokenized", "manifests"):
        fa, fb = _files(a, sub), _files(b, sub)
        problems += [f"{sub}/{k}: only in one folder" for k in sorted(set(fa) ^ set(fb))]
        problems += [f"{sub}/{k}: bytes differ" for k in sorted(set(fa) & set(fb))
                     if fa[k].read_bytes() != fb[k].read_bytes()]
        print(f"{sub}: {len(set(fa) & set(fb))} files compared")
    la, lb = ({k: v for k, v in _files(x, "ledger").items() if k.stem not in EXECUTION_TABLES} for x in (a, b))
    tables = [k for k in sorted(la) if k.suffix == ".parquet"]
    problems += [f"ledger/{k}: only in one folder" for k in sorted(set(la) ^ set(lb)) if k.suffix == ".parquet"]
    problems += [f"ledger/{k}: rows differ" for k in tables if k in lb and _rows(la[k]) != _rows(lb[k])]
    print(f"ledger: {len(tables)} tables compared")
    problems += _compare_duckdb(a / "ledger" / "ledger.duckdb", b / "ledger" / "ledger.duckdb")
    da = {p.relative_to(a): p for p in (a / "work").glob("*/drops/*/*.parquet")}
    db = {p.relative_to(b): p for p in (b / "work").glob("*/drops/*/*.parquet")}
    problems += [f"{k}: only in one folder" for k in sorted(set(da) ^ set(db))]
    problems += [f"{k}: rows differ" for k in sorted(set(da) & set(db)) if _rows(da[k]) != _rows(db[k])]
    dropped = sum(pq.read_metadata(p).num_rows for p in da.values())
    print(f"drop lists: {len(set(da) & set(db))} compared, {dropped} dropped records")
    review = Path("review") / "decontamination.parquet"
    if (a / review).is_file() or (b / review).is_file():
        if _rows(a / review) != _rows(b / review):
            problems.append(f"{review}: rows differ")
        page = Path("review") / "decontamination.html"
        if (a / page).read_bytes() != (b / page).read_bytes():
            problems.append(f"{page}: bytes differ")
        print(f"review: {len(_rows(a / review))} flagged samples compared")
    return problems


if __name__ == "__main__":
    found = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(found) or "identical")
    sys.exit(1 if found else 0)
