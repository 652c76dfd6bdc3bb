"""`curate classifier train SPEC --out DIR`: train a quality or toxicity classifier from a spec and
print what it did (pools, upsampling, held-out metrics per language, where the model and card are)."""
from __future__ import annotations

from pathlib import Path


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def train(spec: str, out: str) -> list[str]:
    """Train and return the summary lines the CLI prints."""
    from curation.classify import train_classifier
    t = train_classifier(Path(spec), Path(out))
    c = t.card
    lines = [f"{c['name']}: task {c['task']}, labels {c['labels']} (score = P({c['score_label']}))"]
    for p in c["pools"]:
        lines.append(f"  pool {p['name']} ({p['role']}): {p['documents']} documents of {p['records_read']} read"
                     + (f", quarantined {p['quarantined']}" if p["quarantined"] else "")
                     + (f", excluded {p['excluded']}" if p["excluded"] else ""))
    if c["negative_band"]:
        sel = sum(g["selected"] for g in c["negative_band"]["groups"].values())
        lines.append(f"  negatives: {sel} documents in the {c['negative_band']['percentiles']} percentile band "
                     f"of the {c['proxy']['kind']} proxy (by {c['negative_band']['by']})")
    up = c["upsampling"]
    lines.append(f"  languages: median {up['median']}; upsampled: "
                 + (", ".join(f"{k} x{v:.2f}" for k, v in up["factors"].items() if v != 1.0) or "none"))
    m = c["held_out"]["metrics"]
    for lang, r in [("overall", m["overall"]), *m["per_language"].items()]:
        lines.append(f"  held-out {lang}: {r['documents']} docs, precision {_fmt(r['precision'])}, "
                     f"recall {_fmt(r['recall'])}, AUC {_fmt(r['auc'])}")
    cov = c["languages"]
    lines.append(f"  covers: {cov['covered'] or 'no language'} (at least {cov['min_documents']} training documents "
                 f"of each label); other languages are not judged"
                 + (f"; one-sided, allowed by the spec: {cov['one_sided_allowed']}" if cov["one_sided_allowed"] else ""))
    lines.append(f"model: {t.model} ({c['model']['bytes']:,} bytes, trained in {t.seconds:.2f} s, one thread)")
    lines.append(f"card:  {t.card_path}")
    return lines
