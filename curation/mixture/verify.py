"""`verify_manifest`: everything a trainer reads from a stage, re-read and checked, every failure reported.

- the manifest's shape (`manifest_schema.load_manifest`) and each field against its digest, so an edit to
  `training.goldfish`, `vocabulary.eod`, `seq_length`, `samples`, ... is named, not silently used;
- settings against the ledger: `seq_length`, `budget_tokens` and `training` against the `stages` row of the
  run's recipe fingerprint (a manifest edited and re-digested with our own functions is refused there), the
  vocabulary against `runs`;
- every shard file (size, sha256) and its exact document and token counts, against the manifest and the
  ledger's `tokens` table (other shard sets: its `mixture` rows);
- shares, the ledger's `mixture` rows, each sampling plan (recomputed from its seed);
- the hand-off of every trainer format (`curation.mixture.handoffs`: Megatron's, `megatron_check`, and
  e.g. OLMo-core's, `olmo_core`);
- the ledger: each Parquet table against the manifest's digest, and every table of `ledger.duckdb`
  against its Parquet file (an `UPDATE` in the DuckDB file alone is caught), its views against ours;
- the Merkle root over all of it;
- the precision contract: a stage whose parts were encoded at more than one precision (the ledger's
  `encoders`: CPU float32 parts next to CUDA TF32 ones, after a run resumed on other hardware) is reported
  with the parts of each, as a `warning:` line; the shards are still what the manifest froze.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

from curation.core.hashing import sha256_file
from curation.core.vocab import Block
from curation.errors import VerifyError
from curation.ledger.pools import MAIN_POOL, pool_name
from curation.mixture import merkle
from curation.mixture.handoffs import check as check_handoffs
from curation.mixture.manifest_schema import field_digests, load_manifest, training_json
from curation.mixture.merkle import (
    duckdb_digests,
    ledger_digests,
    manifest_leaves,
    merkle_root,
    processes_map,
)
from curation.mixture.sampling import read_plan, sample_counts
from curation.shards.shardset import ShardSet

WRITTEN_BACK = ("consumed",)   # tables `curate train` writes after the manifest


def precision_warnings(m: dict, ledger_dir: Path) -> list[str]:
    """`warning:` lines when the parts of the manifest's sources mix precisions (per codec)."""
    run = m["recipe_fingerprint"].replace("'", "''")
    problems: list[str] = []
    _, rows = _query(ledger_dir, f"SELECT source, shard, codec, device, precision FROM encoders WHERE run = '{run}' "
                     f"ORDER BY codec, source, shard", problems)
    names = {s["name"] for s in m["sources"]}
    mine = [r for r in rows if any(n == r[0] or n.startswith(f"{r[0]}.") for n in names)]
    out = []
    for codec in sorted({r[2] for r in mine}):
        by: dict[str, list[str]] = {}
        for source, shard, _, device, precision in (r for r in mine if r[2] == codec):
            by.setdefault(f"{device} {precision}", []).append(f"{source}/{shard}")
        if len(by) > 1:
            out.append(f"warning: the {codec} codes of this stage mix precisions: " + "; ".join(
                f"{k}: {len(v)} part(s) (e.g. {v[0]})" for k, v in sorted(by.items()))
                + " (codes of one image or clip may differ between them; re-run on one kind of device for one "
                  "contract)")
    return out


def _check_fields(m: dict) -> list[str]:
    want, got = m["field_digests"], field_digests(m)
    problems = [f"manifest field `{k}` was changed after the manifest was written (its digest differs)"
                for k in sorted(set(want) & set(got)) if want[k] != got[k]]
    problems += [f"manifest field `{k}` was added after the manifest was written" for k in sorted(set(got) - set(want))]
    problems += [f"manifest field `{k}` was removed after the manifest was written" for k in sorted(set(want) - set(got))]
    return problems


def _query(ledger_dir: Path, sql: str, problems: list[str]) -> tuple[list, list]:
    from curation.ledger import query

    try:
        return query(ledger_dir, sql)
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        problems.append(f"ledger {ledger_dir / 'ledger.duckdb'}: {e}")
        return [], []


def _check_settings(m: dict, ledger_dir: Path) -> list[str]:
    problems: list[str] = []
    run = m["recipe_fingerprint"].replace("'", "''")
    stage = m["stage"].replace("'", "''")
    cols, rows = _query(ledger_dir, f"SELECT * FROM stages WHERE run = '{run}' AND stage = '{stage}'", problems)
    if not rows and not problems:
        problems.append(f"the ledger's stages table has no stage {m['stage']!r} for run {m['recipe_fingerprint']}")
    for row in rows[:1]:
        row = dict(zip(cols, row))
        seq, budget, training = row["seq_length"], row["budget_tokens"], row.get("training")
        # the run's recipe (the row of its fingerprint) decides what the trainer is told, not the manifest alone
        if training is None:
            problems.append("the ledger's stages table records no training settings (a ledger written before "
                            "they were); re-run `curate run` (completed tasks are skipped) to record them")
        elif training != training_json(m["training"]):
            problems.append(f"training = {training_json(m['training'])} in the manifest, but the run's recipe "
                            f"(the ledger's stages table, run {m['recipe_fingerprint'][:12]}, stage {m['stage']}) "
                            f"says {training}: the manifest's training settings are not its run's")
        if seq != m["seq_length"]:
            problems.append(f"seq_length = {m['seq_length']} in the manifest, the ledger's stages table says {seq}")
        if budget != m["budget_tokens"]:
            problems.append(f"budget_tokens = {m['budget_tokens']} in the manifest, the ledger's stages table "
                            f"says {budget}")
    _, rows = _query(ledger_dir, f"SELECT vocabulary, vocabulary_sha256 FROM runs WHERE run = '{run}'", problems)
    for vid, vsha in rows[:1]:
        if (vid, vsha) != (m["vocabulary"]["id"], m["vocabulary"]["sha256"]):
            problems.append(f"vocabulary {m['vocabulary']['id']} ({m['vocabulary']['sha256'][:12]}) in the manifest, "
                            f"the ledger's runs table says {vid} ({str(vsha)[:12]})")
    return problems


def _check_sources(m: dict, base: Path, ledger_dir: Path, ok: list[str]) -> list[str]:
    problems: list[str] = []
    blocks = [Block(b["name"], b["start"], b["size"]) for b in m["vocabulary"]["blocks"]]
    run = m["recipe_fingerprint"].replace("'", "''")
    cols, rows = _query(ledger_dir, f"SELECT * FROM tokens WHERE run = '{run}'", problems)
    # one row per source and pool (`ledger.pools`); a ledger written before pools has the main pool only
    has_pools = "pool" in cols
    tokens_rows = {(r[cols.index("source")], r[cols.index("pool")] if has_pools else MAIN_POOL): dict(zip(cols, r))
                   for r in rows}
    stage = m["stage"].replace("'", "''")
    cols, rows = _query(ledger_dir, f"SELECT source, raw_tokens, documents FROM mixture WHERE run = '{run}' "
                        f"AND stage = '{stage}'", problems)
    mixture_rows = {r[0]: r[1:] for r in rows}
    for src in m["sources"]:
        name, bad = src["name"], len(problems)
        for f in src["files"]:
            fp = base / f["path"]
            if not fp.is_file():
                problems.append(f"{name}: {fp} is missing")
            elif fp.stat().st_size != f["bytes"]:
                problems.append(f"{name}: {fp} has {fp.stat().st_size} bytes, manifest says {f['bytes']}")
            elif sha256_file(fp) != f["sha256"]:
                problems.append(f"{name}: {fp} sha256 differs from the manifest (file changed or corrupt)")
        if len(problems) > bad:
            continue
        prefix = base / src["prefix"]
        try:
            shards = ShardSet.of_entry(base, src)
            counts = shards.counts(blocks, m["vocabulary"]["reserved"])
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: cannot read {prefix}.idx/.bin: {e}")
            continue
        problems += _check_parts(name, src, shards)
        got = {"documents": counts["documents"], **{k: counts[k] for k in ("text", "image", "audio", "total")}}
        want = {"documents": src["documents"], **src["tokens"]}
        problems += [f"{name}: {k} = {got[k]} in the shard, manifest says {want.get(k)}" for k in got if got[k] != want.get(k)]
        pool = pool_name(src["variant"])
        checks = [("tokens table" + (f" (pool {pool})" if src["variant"] else ""), tokens_rows.get((name, pool)),
                   lambda r: {"documents": r["documents"], "text": r["text_tokens"], "image": r["image_tokens"],
                              "audio": r["audio_tokens"], "total": r["total_tokens"]})][: 1 if has_pools or not src["variant"] else 0]
        if src["variant"]:          # another shard set: the planner's mixture row counted it too
            checks.append((f"mixture row of stage {m['stage']}", mixture_rows.get(name),
                           lambda r: {"total": r[0], "documents": r[1]}))
        for what, lrow, fields in checks:
            if lrow is None:
                problems.append(f"{name}: no row in the ledger's {what} for run {m['recipe_fingerprint']}")
            else:
                problems += [f"{name}: {k} = {got[k]} in the shard, ledger's {what} says {v}"
                             for k, v in fields(lrow).items() if got[k] != v]
        ok.append(f"{name}{src['variant']}: {counts['documents']} documents, {counts['total']} tokens, "
                  f"{len(src['files'])} files match")
    return problems


def _check_parts(name: str, src: dict, shards: ShardSet) -> list[str]:
    """A split shard set: every part is listed with its files, and `unsplit_sha256` (what the stage fingerprint
    and so its plans are seeded from) recomputes from the parts."""
    if "parts" not in src and "unsplit_sha256" not in src:
        return []
    listed = {f["path"] for f in src["files"]}
    problems = [f"{name}: part {p} has no {ext} among the manifest's files" for p in src.get("parts", [])
                for ext in (".bin", ".idx") if f"{p}{ext}" not in listed]
    if src.get("unsplit_sha256") != shards.unsplit_sha256():
        problems.append(f"{name}: unsplit_sha256 does not recompute from its parts {src.get('parts')}")
    return problems


def _check_mixture(m: dict, ledger_dir: Path) -> list[str]:
    """Shares recompute from effective tokens and the ledger's mixture rows agree."""
    problems: list[str] = []
    total = sum(s["effective_tokens"] for s in m["sources"])
    for s in m["sources"]:
        share = s["effective_tokens"] / total if total else 0.0
        if abs(share - s["share"]) > 1e-6:
            problems.append(f"{s['name']}: share {s['share']} does not recompute from effective tokens ({share:.9f})")
    run, stage = m["recipe_fingerprint"].replace("'", "''"), m["stage"].replace("'", "''")
    _, rows = _query(ledger_dir, "SELECT source, epochs, effective_tokens, share FROM mixture WHERE run = "
                     f"'{run}' AND stage = '{stage}'", problems)
    ledger = {r[0]: r[1:] for r in rows}
    for s in m["sources"]:
        got = ledger.get(s["name"])
        if got is None:
            problems.append(f"{s['name']}: no mixture row in the ledger for stage {m['stage']}")
        elif (got[0], got[1], got[2]) != (s["epochs"], s["effective_tokens"], s["share"]):
            problems.append(f"{s['name']}: ledger mixture (epochs {got[0]}, effective {got[1]}, share {got[2]}) "
                            f"differs from the manifest ({s['epochs']}, {s['effective_tokens']}, {s['share']})")
    return problems


def _check_draws(m: dict, ledger_dir: Path) -> list[str]:
    """The ledger's `handoff` rows of the stage are the manifest's planned and drawn tokens per source."""
    problems: list[str] = []
    run, stage = m["recipe_fingerprint"].replace("'", "''"), m["stage"].replace("'", "''")
    _, rows = _query(ledger_dir, "SELECT source, mode, planned_tokens, drawn_tokens, train_samples FROM handoff "
                     f"WHERE run = '{run}' AND stage = '{stage}' ORDER BY source", problems)
    mg = m["megatron"]
    want = sorted((d["name"], mg["mode"], d["planned_tokens"], d["drawn_tokens"], mg["train_samples"])
                  for d in mg["draws"])
    if not problems and sorted(tuple(r) for r in rows) != want:
        problems.append(f"ledger handoff rows of stage {m['stage']} {sorted(tuple(r) for r in rows)} differ from the "
                        f"manifest's draws {want}")
    return problems


def _check_plans(m: dict, base: Path) -> list[str]:
    """Each sampling plan is the file the manifest names and recomputes from its seed."""
    problems = []
    for s in m["sources"]:
        plan = s.get("plan")
        if plan is None:
            if s["effective_tokens"] > 0:
                problems.append(f"{s['name']}: planned {s['effective_tokens']} tokens but has no sampling plan")
            continue
        path = base / plan["path"]
        if not path.is_file() or sha256_file(path) != plan["sha256"]:
            problems.append(f"{s['name']}: sampling plan {path} is missing or changed")
            continue
        try:
            lengths = ShardSet.of_entry(base, s).lengths()
            counts = read_plan(path)
        except (OSError, ValueError) as e:
            problems.append(f"{s['name']}: cannot read its shard index or plan: {e}")
            continue
        tokens = int((counts.astype(np.int64) * lengths).sum()) if counts.size == lengths.size else None
        if counts.size != lengths.size:
            problems.append(f"{s['name']}: sampling plan has {counts.size} documents, the shard {lengths.size}")
        elif plan["kind"] == "epochs" and not (counts == sample_counts(lengths, s["epochs"], plan["seed"])).all():
            problems.append(f"{s['name']}: sampling plan does not recompute from its seed {plan['seed']}")
        elif plan["kind"] != "epochs" and tokens != s["effective_tokens"]:
            problems.append(f"{s['name']}: selected documents hold a different number of tokens than planned")
        elif tokens != plan["tokens"]:
            problems.append(f"{s['name']}: plan.tokens = {plan['tokens']}, the plan holds {tokens}")
    return problems


def _digested_whole(path: Path, digest: str) -> bool:
    """Whether `digest` is the table's rows hashed as one list: what a manifest written before large tables
    were digested in chunks (`merkle.CHUNK_ROWS`) holds for a table of more rows than a chunk."""
    import pyarrow.parquet as pq

    if not path.is_file() or pq.ParquetFile(path).metadata.num_rows <= merkle.CHUNK_ROWS:
        return False
    return merkle.table_digest(path, chunk_rows=sys.maxsize) == digest


def _check_ledger(m: dict, ledger_dir: Path, check_location: bool = True) -> list[str]:
    """Parquet tables against the manifest; `ledger.duckdb` (what `curate ledger` shows) against Parquet, its
    `decisions` table against `decisions/`, its views against ours. A `ledger.duckdb` written before the
    decisions were stored in it has a `decisions` view naming `decisions/` by absolute path: a location
    problem (like the hand-off's paths) that `--relocate` converts."""
    problems = []
    parquet = ledger_digests(ledger_dir, tasks=processes_map)
    for table, digest in m["ledger_tables"].items():
        if parquet.get(table) != digest and not _digested_whole(ledger_dir / f"{table}.parquet", digest):
            problems.append(f"ledger table {table!r} changed since the manifest was written")
    db = ledger_dir / "ledger.duckdb"
    try:
        tables, views = duckdb_digests(db, tasks=processes_map)
    except Exception as e:  # noqa: BLE001
        return problems + [f"{db}: cannot be read ({e})"]
    evidence = tables.pop("decisions", None)
    for table in sorted(set(parquet) | set(tables)):
        if table not in tables:
            problems.append(f"{db}: table {table!r} is missing (its Parquet file exists)")
        elif table not in parquet:
            problems.append(f"{db}: table {table!r} has no Parquet file of the ledger (added to the DuckDB file)")
        elif tables[table] != parquet[table]:
            problems.append(f"{db}: table {table!r} differs from {table}.parquet (rows were changed in the "
                            f"DuckDB file); re-run `curate run` (completed tasks are skipped) to rebuild it")
    if evidence is not None and evidence != decisions_digest(ledger_dir):
        problems.append(f"{db}: table 'decisions' differs from {ledger_dir / 'decisions'} (rows were changed in "
                        f"the DuckDB file or in decisions/); re-run `curate run` to rebuild it")
    elif evidence is None and "decisions" in views:
        if check_location:
            problems.append(f"{db}: 'decisions' is a view reading decisions/ by absolute path (a ledger written "
                            f"before they were stored in it); store them with `curate verify --relocate MANIFEST`")
        views.pop("decisions")
    elif evidence is None:
        problems.append(f"{db}: table 'decisions' is missing")
    want = _view_sql()
    for view in sorted(set(want) | set(views)):
        if views.get(view) != want.get(view):
            problems.append(f"{db}: view {view!r} is not curate's definition (changed, added or removed)")
    return problems


def decisions_digest(ledger_dir: Path) -> str:
    """The content digest (`merkle.duckdb_digests`' canonical rows) of what `decisions/` holds."""
    import duckdb

    from curation.ledger.store import decisions_select
    from curation.mixture.merkle import rows_digest

    con = duckdb.connect()
    try:
        cur = con.execute(decisions_select(ledger_dir))
        cols = [d[0] for d in cur.description]
        return rows_digest([dict(zip(cols, r)) for r in cur.fetchall()])
    finally:
        con.close()


@functools.cache   # the same for every manifest this process verifies (a database file made and read back)
def _view_sql() -> dict[str, str]:
    """The SQL DuckDB stores for our views: from an empty database file with the same schemas, written in
    the ledger's storage format and read back (a view's SQL text is what its serialisation gives back)."""
    import tempfile

    import duckdb
    import pyarrow as pa

    from curation.ledger.schema import SCHEMAS
    from curation.ledger.store import VIEWS as views
    from curation.ledger.store import open_new

    with tempfile.TemporaryDirectory(prefix="curate-views-") as tmp:
        db = Path(tmp) / "views.duckdb"
        con = open_new(db)
        try:
            for name, schema in SCHEMAS.items():
                con.register("empty_table", pa.Table.from_pylist([], schema=schema))
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM empty_table")
                con.unregister("empty_table")
            for name, sql in views.items():
                con.execute(f"CREATE VIEW {name} AS {sql}")
        finally:
            con.close()
        con = duckdb.connect(str(db), read_only=True)
        try:
            return dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
        finally:
            con.close()


def verify_manifest(path: Path, *, check_location: bool = True, key: str | Path | None = None) -> list[str]:
    """Return a list of human-readable checks passed; raise VerifyError listing every failure.

    `check_location=False` accepts a hand-off whose files name another location of this output folder
    (copied or moved; `curation.mixture.handoffs.relocate_handoff` rewrites them): for trainers that read
    the manifest, not the hand-off's absolute paths (`curate train`). Their content is checked either way.
    `key`: an ed25519 public key (PEM file) whose signature of the stage's Merkle root is required too
    (`curation.mixture.signing`)."""
    from curation.mixture.signing import check_signature, load_public_key, signature_path

    public_key = load_public_key(Path(key)) if key is not None else None
    path = Path(path)
    m = load_manifest(path)
    base = path.resolve().parent
    ledger_dir = (base / m["ledger"]).parent
    ok: list[str] = []
    problems = _check_fields(m)
    problems += _check_settings(m, ledger_dir)
    problems += _check_sources(m, base, ledger_dir, ok)
    problems += _check_mixture(m, ledger_dir)
    problems += _check_draws(m, ledger_dir)
    problems += _check_plans(m, base)
    handoff, fine = check_handoffs(m, base, check_location)     # every trainer format the manifest holds
    problems += handoff
    ok += fine
    problems += _check_ledger(m, ledger_dir, check_location)
    if merkle_root(manifest_leaves(m, field_digests(m))) != m["merkle_root"]:
        problems.append(f"merkle root {m['merkle_root']} does not recompute from the manifest's files, fields "
                        f"and tables")
    if problems:
        raise VerifyError(f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    if public_key is not None:      # only a root that recomputes is worth a signature check
        ok.append(check_signature(path, m, public_key))
    elif signature_path(path).is_file():
        ok.append(f"signed ({signature_path(path).name}), signature not checked: give --key PUB to require it")
    return ok + precision_warnings(m, ledger_dir)
