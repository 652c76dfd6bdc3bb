"""The report's long-context extension tables, from the ledger's `lc_classes` and `mixture` rows: per step
and class the tokens with their within-step share beyond the cooldown subsample (Apertus 1.5 Table 5), the
native and topped-up tokens of each class that tops up, and per source and step the tokens drawn
(Appendix F)."""
from __future__ import annotations

from curation.report.table import Cell, Section, table

MIXTURE = "Mixture"
COOLDOWN = "cooldown"   # the class name of the cooldown subsample (curation.mixture.extension.COOLDOWN)


def _steps(rows: dict) -> list[str]:
    """Extension steps in recipe order (the `stages` table's order)."""
    named = {c["stage"] for c in rows.get("lc_classes", [])}
    return [st["stage"] for st in rows.get("stages", []) if st["stage"] in named]


def extension_sections(rows: dict) -> list[Section]:
    lc = rows.get("lc_classes", [])
    steps = _steps(rows)
    if not steps:
        return []
    classes: list[str] = []
    for c in lc:
        if c["class"] != COOLDOWN and c["class"] not in classes:
            classes.append(c["class"])
    at = {(c["stage"], c["class"]): c for c in lc}
    body = []
    for st in steps:
        first = at[next(k for k in at if k[0] == st)]
        beyond = sum(at[(st, k)]["realised_tokens"] for k in classes if (st, k) in at)
        cells = []
        for k in classes:
            c = at.get((st, k))
            cells.append("—" if c is None else
                         f"{c['realised_tokens']:,} ({100 * c['realised_tokens'] / max(beyond, 1):.1f}%)")
        cool = at.get((st, COOLDOWN))
        body.append([st, f"{first['seq_length']:,}", first["start_from"], *cells, beyond,
                     cool["realised_tokens"] if cool else 0, beyond + (cool["realised_tokens"] if cool else 0)])
    out = [Section(MIXTURE, "Long-context extension: tokens per class and step",
                   "As Apertus 1.5 Table 5: per extension step, the tokens of each class of long documents with the "
                   "within-step share of the tokens beyond the cooldown subsample (ledger table `lc_classes`). "
                   "Each step starts from the checkpoint of the stage in `start from`.",
                   table(["step", "seq length", "start from", *classes, "total", "cooldown subsample",
                          "step total"], body))]
    plan = []
    for st in steps:
        for k in [COOLDOWN, *classes]:
            c = at.get((st, k))
            if c is None:
                continue
            rng = (f"≤ {c['native_upper']:,}" if k == COOLDOWN else
                   f"({c['native_lower']:,}, {c['native_upper']:,}]")
            top = "" if c["topup_min"] is None else f"[{c['topup_min']:,}, {c['topup_max']:,}]"
            real = c["realised_tokens"]
            short = real < c["planned_tokens"]
            plan.append([st, k, f"{100 * c['share']:.1f}%", c["planned_tokens"], rng, c["native_tokens"], top,
                         c["topup_tokens"], Cell(real, "warn" if short else ""),
                         f"{100 * c['native_tokens'] / real:.0f}%" if real else "—", c["documents"],
                         c["sources"] or "none"])
    out.append(Section(MIXTURE, "Long-context extension: planned, native and topped-up tokens",
                       "Per step and class: the share the recipe asks (cooldown: of the step's budget; classes: of "
                       "the tokens beyond it), the planned tokens, those drawn from native long documents (their "
                       "length range) and those topped up from short-context documents where the native pool falls "
                       "short (Apertus 1.5 §3.3: 79%, 47%, 34% native images at 32k, 65k, 131k). Realised below "
                       "plan is flagged (`class_short`).",
                       table(["step", "class", "share", "planned", "native range", "native", "top-up range",
                              "topped up", "realised", "native %", "documents", "sources"], plan)))
    # Appendix F: per source (grouped by class) and step, the tokens drawn
    source_class: dict[str, str] = {}
    per: dict[tuple[str, str], int] = {}
    for c in lc:
        for part in filter(None, (c["sources"] or "").split(", ")):
            name, n = part.rsplit("=", 1)
            per[(c["stage"], c["class"], name)] = per.get((c["stage"], c["class"], name), 0) + int(n)
            if c["class"] != COOLDOWN:
                source_class.setdefault(name, c["class"])
    fbody = []
    for k in [COOLDOWN, *classes]:
        names = sorted({key[2] for key in per if key[1] == k})
        if not names:
            continue
        fbody.append([Cell(k, "total"), *[""] * len(steps)])
        for name in names:
            fbody.append([f"  {name}", *[per.get((st, k, name), 0) for st in steps]])
    totals = {st: sum(v for key, v in per.items() if key[0] == st) for st in steps}
    fbody.append([Cell("total", "total"), *[totals[st] for st in steps]])
    out.append(Section(MIXTURE, "Long-context extension: tokens per source and step",
                       "As Apertus 1.5 Appendix F: per class (the cooldown subsample first) and source, the tokens "
                       "each step draws, native and topped-up together.",
                       table(["source", *steps], fbody)))
    return out
