"""The ledger tables the EU AI Act public summary (`curation.report.ai_act`) reads besides the core ones:
- `transparency`: the recipe's `transparency:` declarations (provider, model, crawler, collection period),
  one row per field, NULL where the recipe declares none, so the summary says "not declared";
- `source_origins`: each source's category in the template's section 2 and why (declared or derived);
- `robots_snapshots`: the robots.txt snapshot dates the opt-out read and how many domains each held;
- `domain_tokens`: documents and tokens in each source's main shards per web domain of the page URL
  (registrable domain, else host), counted by the tokenize tasks where the tokens are counted and summed per
  source by the merge tasks (`curation.runtime.tasks`), into files that DuckDB copies: never on the driver.
"""
from __future__ import annotations

import pyarrow as pa

SCHEMAS: dict[str, pa.Schema] = {
    "transparency": pa.schema([("run", pa.string()), ("field", pa.string()), ("value", pa.string())]),
    "source_origins": pa.schema([("run", pa.string()), ("source", pa.string()), ("origin", pa.string()),
                                 ("basis", pa.string())]),
    "robots_snapshots": pa.schema([("run", pa.string()), ("snapshot", pa.string()), ("domains", pa.int64())]),
    "domain_tokens": pa.schema([("run", pa.string()), ("source", pa.string()), ("web_domain", pa.string()),
                                ("documents", pa.int64()), ("tokens", pa.int64())]),
}
DOMAIN_COLUMNS = tuple(SCHEMAS["domain_tokens"].names)

def origin(src, declared: dict[str, str]) -> tuple[str, str]:
    """(category, basis) of a source in the template's section 2."""
    if src.name in declared:
        return declared[src.name], "declared in the recipe (transparency.sources)"
    if src.gives("synthetic_tasks"):
        return "synthetic", "derived: the source's documents become synthetic task examples (synthetic_tasks)"
    if src.acquire is not None and src.acquire.kind == "urls":
        return "crawled", "derived: curate fetched its pages from a URL list (acquire.kind: urls)"
    return "publicly_available", "derived: a dataset read from files (no transparency.sources entry)"


def transparency_rows(run: str, recipe, optout_index) -> dict[str, list[dict]]:
    t = recipe.transparency
    # the recipe's own compliance settings the summary's section 3 states, beside the declarations
    policy = [("licence_policy.exclude", ", ".join(sorted(recipe.licence_policy.exclude)) or None),
              ("optout.agents", ", ".join(optout_index.agents) if optout_index is not None else None),
              ("optout.match", recipe.optout.match if recipe.optout is not None else None)]
    rows = {"transparency": [{"run": run, "field": f, "value": v} for f, v in (*t.fields(), *policy)],
            "source_origins": [{"run": run, "source": s.name, **dict(zip(("origin", "basis"), origin(s, t.sources)))}
                               for s in recipe.sources],
            "robots_snapshots": [] if optout_index is None else [
                {"run": run, "snapshot": d, "domains": n} for d, n in optout_index.domains_per_snapshot.items()]}
    return rows


def domain_rows(run: str, source: str, counts: list[dict]) -> list[dict]:
    """`domain_tokens` rows of one source from its tokenize markers' `domains` ({domain: [documents,
    tokens]}, the key "" for no URL), summed over the shards, sorted by domain (NULL first)."""
    total: dict[str, list[int]] = {}
    for marker in counts:
        for dom, (docs, toks) in marker.items():
            acc = total.setdefault(dom, [0, 0])
            acc[0] += docs
            acc[1] += toks
    return [{"run": run, "source": source, "web_domain": dom or None, "documents": d, "tokens": t}
            for dom, (d, t) in sorted(total.items())]
