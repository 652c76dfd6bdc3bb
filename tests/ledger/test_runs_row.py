"""The ledger's `runs` row: run times, host, curate and library versions; the volatile columns that
the manifests' table digests and the determinism checks leave out."""
import re
import socket
from importlib import metadata

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation import __version__
from curation.ledger.environment import LIBRARIES, TIME_COLUMNS, environment_row, library_versions, utc_now
from curation.ledger.schema import SCHEMAS, VOLATILE_COLUMNS
from curation.mixture.merkle import table_digest
from tests.outputs import _ledger_rows


def test_library_versions_come_from_the_installed_distributions():
    versions = library_versions()
    assert list(versions) == list(LIBRARIES)
    assert versions["datatrove_version"] == metadata.version("datatrove")
    assert versions["pyarrow_version"] == pa.__version__
    assert versions["pillow_version"] == metadata.version("pillow")       # module PIL, distribution pillow
    providers = sorted(set(metadata.packages_distributions().get("fasttext", [])))
    if len(providers) > 1:   # two distributions install the `fasttext` module: both are named
        assert versions["fasttext_version"] == "; ".join(f"{d} {metadata.version(d)}" for d in providers)
    assert all(v is None or isinstance(v, str) for v in versions.values())


def test_a_missing_library_is_null(monkeypatch):
    monkeypatch.setitem(LIBRARIES, "nonexistent_version", "curate_no_such_module")
    assert library_versions()["nonexistent_version"] is None


def test_environment_row_and_utc_times():
    now = utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now)
    row = environment_row(now, now)
    assert row["started_at"] == row["finished_at"] == now and row["host"] == socket.gethostname()
    assert set(row) == {*TIME_COLUMNS, *LIBRARIES}
    assert [f.name for f in SCHEMAS["runs"]][-len(row):] == list(row)


def test_volatile_columns_are_named_once_in_the_ledger():
    """The set is applied to every table by column name, so no other table may use these names."""
    owners = {c: [t for t, s in SCHEMAS.items() if c in s.names] for c in VOLATILE_COLUMNS}
    where = {"seconds": ["steps"], "device_name": ["encoders"], "gpus": ["encoders"], "run_ranks": ["rank_plan"],
             "run_imbalance": ["rank_plan"]}
    assert owners == {c: where.get(c, ["runs"]) for c in VOLATILE_COLUMNS}


def _runs(path, **changes):
    row = {f.name: None for f in SCHEMAS["runs"]} | {"run": "r1", "recipe": "demo", "curate_version": __version__}
    pq.write_table(pa.Table.from_pylist([row | changes], schema=SCHEMAS["runs"]), path)
    return path


def test_table_digest_and_determinism_checks_leave_the_volatile_columns_out(tmp_path):
    (tmp_path / "a" / "ledger").mkdir(parents=True)
    (tmp_path / "b" / "ledger").mkdir(parents=True)
    a = _runs(tmp_path / "a" / "ledger" / "runs.parquet", started_at="2026-01-01T00:00:00Z", host="x",
              torch_version="2.13.0+cpu")
    b = _runs(tmp_path / "b" / "ledger" / "runs.parquet", started_at="2026-02-02T00:00:00Z", host="y",
              torch_version="2.13.0")
    assert table_digest(a) == table_digest(b)
    assert _ledger_rows(tmp_path / "a") == _ledger_rows(tmp_path / "b")
    c = _runs(tmp_path / "c.parquet", curate_version="9.9.9")   # what ran is not volatile
    assert table_digest(c) != table_digest(a)


@pytest.mark.slow
def test_the_demo_runs_row(text_run):
    run = pq.read_table(text_run.out / "ledger" / "runs.parquet").to_pylist()
    assert len(run) == 1
    row = run[0]
    assert row["run"] == text_run.plan.recipe.fingerprint and row["curate_version"] == __version__
    assert row["started_at"] <= row["finished_at"] and row["finished_at"].endswith("Z")
    assert row["host"] == socket.gethostname()
    assert {k: row[k] for k in LIBRARIES} == library_versions()
