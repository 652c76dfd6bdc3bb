"""The Python API, re-exported by the package (`curation.run`, `curation.load_recipe`, `curation.Ledger`):
what `curate run`, `curate validate` and `curate ledger` do, for a notebook or a script.

A recipe is a path to its YAML file or a dict of the same content. A dict is written as a recipe file,
`.curate-recipe-<sha256 of its JSON, 12 hex>.yaml`, into `base_dir` (default: the current directory),
because a recipe's relative paths (vocabulary, inputs, benchmarks) are read from its file's folder and a
run's tasks open the recipe by path (on every node of a cluster): the same dict in the same folder is the
same file, so it has the same fingerprint and a re-run skips what is complete.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from curation.core.atomic import atomic_write_bytes
from curation.errors import CurateError, UsageError


def recipe_file(recipe: str | Path | dict, base_dir: str | Path | None = None) -> Path:
    """The recipe's file: `recipe` itself, or the file a dict is written to in `base_dir`."""
    if isinstance(recipe, (str, Path)):
        if base_dir is not None:
            raise UsageError("base_dir is for a recipe given as a dict; a recipe file's folder is its base")
        return Path(recipe)
    if not isinstance(recipe, dict):
        raise UsageError(f"a recipe is a path to its YAML file or a dict, not {type(recipe).__name__}")
    import yaml

    try:
        canonical = json.dumps(recipe, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise UsageError(f"the recipe dict holds a value YAML cannot write ({e}); use str, int, float, bool, "
                         f"None, lists and dicts") from None
    folder = Path(base_dir) if base_dir is not None else Path.cwd()
    path = folder / f".curate-recipe-{hashlib.sha256(canonical.encode()).hexdigest()[:12]}.yaml"
    text = yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True).encode()
    if not path.is_file() or path.read_bytes() != text:
        atomic_write_bytes(path, text)
    return path


def load_recipe(recipe: str | Path | dict, *, base_dir: str | Path | None = None):
    """Validate a recipe and resolve its inputs (`curate validate`); returns a `LoadedRecipe` (`.recipe`: the
    typed recipe, `.inputs`: the files per source, `.fingerprint`). Raises `RecipeError` naming the key."""
    from curation.recipe.load import load_recipe as _load

    return _load(recipe_file(recipe, base_dir))


def run(recipe: str | Path | dict, out: str | Path, *, base_dir: str | Path | None = None, **options):
    """Run a recipe into `out` (`curate run`); returns a `RunResult` (`.manifests`, `.rows`: the ledger's
    tables as lists of row dicts, `.report`). `options`: `workers`, `address`, `executor` ("auto", "local",
    "ray"), `force`, `sign` (an ed25519 private key file), `progress` (default False here)."""
    from curation.commands.run import run as _run

    options.setdefault("progress", False)
    return _run(recipe_file(recipe, base_dir), out, **options)


class Ledger:
    """A run's ledger, read-only: `Ledger("out")` (the output folder) or `Ledger("out/ledger/ledger.duckdb")`
    (the file alone, e.g. one that was mailed: its tables, views and `decisions` are all inside it)."""

    def __init__(self, where: str | Path):
        where = Path(where)
        if where.is_dir() and (where / "ledger" / "ledger.duckdb").is_file():
            where = where / "ledger" / "ledger.duckdb"
        elif where.is_dir():
            where = where / "ledger.duckdb"
        if not where.is_file():
            raise CurateError(f"{where}: no ledger.duckdb; give the output folder of a `curate run` or its "
                              f"ledger/ledger.duckdb")
        self.path = where

    def query(self, sql: str, params: list | None = None) -> list[dict]:
        """Rows of a read-only query (DuckDB SQL; `?` placeholders bound to `params`) as dicts."""
        import duckdb

        con = duckdb.connect(str(self.path), read_only=True)
        try:
            cur = con.execute(sql, params or [])
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]
        except duckdb.Error as e:
            raise CurateError(f"ledger query failed: {e}") from None
        finally:
            con.close()

    def tables(self) -> dict[str, str]:
        """Every table and view with its comment (what a row is)."""
        rows = self.query("SELECT table_name AS name, comment FROM duckdb_tables() UNION ALL "
                          "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal ORDER BY name")
        return {r["name"]: r["comment"] for r in rows}

    def table(self, name: str) -> list[dict]:
        """All rows of one table or view."""
        if name not in self.tables():
            raise CurateError(f"{self.path}: no table or view {name!r}; it has {', '.join(self.tables())}")
        return self.query(f'SELECT * FROM "{name}"')

    def why(self, id: str, source: str | None = None) -> list[dict]:
        """Why a record left: its rows of `decisions` (step, outcome, reason, detail); [] if it was kept."""
        sql = "SELECT source, shard, id, step, outcome, reason, detail FROM decisions WHERE id = ?"
        return self.query(sql + (" AND source = ?" if source is not None else ""),
                          [id] + ([source] if source is not None else []))
