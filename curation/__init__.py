"""curate: data curation and mixture accounting for multimodal LLM pretraining.

The Python API (`curation.commands.api`): `curation.run(recipe, out)`, `curation.load_recipe(recipe)` and
`curation.Ledger(out)`, a recipe given as a path or a dict. They are imported on first use, so `import
curation` stays light (a text-only install imports no torch, and nothing starts Ray).
"""
__version__ = "0.1.0"

API = ("run", "load_recipe", "Ledger")
__all__ = ["__version__", *API]


def __getattr__(name: str):
    if name in API:   # the package's one upward import: its facade (tests/test_layers.py allows it)
        from curation.commands.api import Ledger, load_recipe, run
        return {"run": run, "load_recipe": load_recipe, "Ledger": Ledger}[name]
    raise AttributeError(f"module 'curation' has no attribute {name!r}")
