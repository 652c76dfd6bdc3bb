"""Report sections of the model classifiers: the selection's thresholds per language (with the score
histograms, threshold marked), what it kept per source, and the toxicity filter per source and language.
Read from the ledger tables `quality_thresholds`, `quality_selected`, `quality_histogram` and `toxicity`."""
from __future__ import annotations

import html

from curation.report.tables import table


def _fmt(score: float) -> str:
    return f"{score:.6g}"


def quality_sections(rows: dict, plot: str | None) -> list[tuple[str, str, tuple[str, str]]]:
    """`plot`: the file name of the histograms (`quality.png`, beside the report), or None."""
    out = []
    thresholds = rows.get("quality_thresholds", [])
    if thresholds:
        body = [[t["pool"], t["language"], t["documents"], t["kept"], f"{100 * t['kept'] / max(t['documents'], 1):.1f}%",
                 _fmt(t["threshold"]), t["above"], t["tied"], t["tied_kept"], f"{t['top_fraction']:g}"]
                for t in thresholds]
        md, h = table(["pool", "language", "documents", "kept", "kept share", "threshold", "above", "tied",
                       "tied kept", "top fraction"], body)
        if plot:
            md = f"![score histograms per language, threshold marked]({plot})\n\n{md}"
            h = f"<img src='{html.escape(plot)}' alt='score histograms per language with the threshold marked'>{h}"
        field = thresholds[0]["field"]
        out.append(("Quality selection", f"Per pool and language: of the documents that reached the `select` step "
                    f"(after dedup and decontamination), exactly ceil(top fraction × documents) are kept, ranked by "
                    f"`meta.{field}` (highest first); the threshold is the last kept score. Tie rule: "
                    f"{thresholds[0]['tie_rule']} (above: documents scoring more than the threshold; tied: scoring "
                    f"exactly it). The rest are dropped as `below_quality_quantile`. Ledger tables "
                    f"`quality_thresholds`, `quality_selected`, `quality_histogram`.", (md, h)))
        sel = rows.get("quality_selected", [])
        out.append(("Quality selection per source", "Documents of each source and language that reached the "
                    "`select` step, and those kept.",
                    table(["pool", "source", "language", "documents", "kept", "kept share"],
                          [[s["pool"], s["source"], s["language"], s["documents"], s["kept"],
                            f"{100 * s['kept'] / max(s['documents'], 1):.1f}%"] for s in sel])))
    tox = rows.get("toxicity", [])
    if tox:
        out.append(("Toxicity", "Documents scored by the `toxicity` step per source and language, and those "
                    "dropped (reason `toxic`: the toxic probability at least the language's threshold). Ledger "
                    "table `toxicity`.",
                    table(["source", "language", "scored", "toxic", "toxic share"],
                          [[t["source"], t["language"], t["scored"], t["toxic"], f"{100 * t['toxic_share']:.2f}%"]
                           for t in tox])))
    return out
