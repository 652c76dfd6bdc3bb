"""Report sections of the model classifiers, from the ledger tables `quality_thresholds`,
`quality_selected`, `quality_histogram`, `toxicity` and `classifier_languages`: the selection's thresholds
per pool and language, what it kept per source, the toxicity filter per source and language, what each
classifier was trained and evaluated on per language and what it did not judge; and the figure of
the score histograms per language with the threshold marked (`quality_plot`)."""
from __future__ import annotations

from curation.report.table import Section, table

CLASSIFIERS = "Model classifiers"


def _share(kept: int, n: int) -> str:
    return f"{100 * kept / max(n, 1):.1f}%"


def quality_sections(rows: dict) -> list[Section]:
    out = []
    thresholds = rows.get("quality_thresholds", [])
    if thresholds:
        t0 = thresholds[0]
        out.append(Section(CLASSIFIERS, "Quality selection",
                           "Per pool and language: of the documents that reached the `select` step (after dedup and "
                           f"decontamination), exactly ceil(top fraction × documents) are kept, ranked by "
                           f"`meta.{t0['field']}`, highest first; the threshold is the last kept score. Tie rule: "
                           f"{t0['tie_rule']} (above: documents scoring more than the threshold; tied: exactly it). "
                           "The rest are dropped as `below_quality_quantile`. Ledger table `quality_thresholds`; the "
                           "histograms are a figure above.",
                           table(["pool", "language", "documents", "kept", "kept share", "threshold", "above", "tied",
                                  "tied kept", "top fraction"],
                                 [[t["pool"], t["language"], t["documents"], t["kept"],
                                   _share(t["kept"], t["documents"]), f"{t['threshold']:.6g}", t["above"], t["tied"],
                                   t["tied_kept"], f"{t['top_fraction']:g}"] for t in thresholds])))
        out.append(Section(CLASSIFIERS, "Quality selection per source",
                           "Documents of each source and language that reached the `select` step, and those kept. "
                           "Ledger table `quality_selected`.",
                           table(["pool", "source", "language", "documents", "kept", "kept share"],
                                 [[s["pool"], s["source"], s["language"], s["documents"], s["kept"],
                                   _share(s["kept"], s["documents"])] for s in rows.get("quality_selected", [])])))
    tox = rows.get("toxicity", [])
    if tox:
        out.append(Section(CLASSIFIERS, "Toxicity",
                           "Documents scored by the `toxicity` step per source and language, and those dropped "
                           "(reason `toxic`: a toxic probability at least the language's threshold). Ledger table "
                           "`toxicity`.",
                           table(["source", "language", "scored", "toxic", "toxic share"],
                                 [[t["source"], t["language"], t["scored"], t["toxic"],
                                   f"{100 * t['toxic_share']:.2f}%"] for t in tox])))
    langs = rows.get("classifier_languages", [])
    if langs:
        out.append(Section(CLASSIFIERS, "What the classifiers were trained and evaluated on",
                           "Per source, classifier step and language: the model's training documents of each label "
                           "(training split, before weights and upsampling) and its held-out evaluation (documents, "
                           "precision and recall at 0.5, ROC AUC; n/a: undefined), from the model's card; whether "
                           "the card covers the language (at least its minimum of training documents of each "
                           "label); and what the step did with this source's documents of that language: scored, "
                           "or not scored because the language is not covered (reason "
                           "`classifier_language_not_covered`, quarantined or passed as the filter's "
                           "`uncovered_languages` says). Listed: the languages the model covers and those the "
                           "step met; the model's card lists every language it saw. Ledger table "
                           "`classifier_languages`.",
                           table(["source", "step", "model", "language", "covered", "trained +", "trained −",
                                  "held-out docs", "precision", "recall", "AUC", "scored", "not covered"],
                                 [[c["source"], c["step"], c["model"], c["language"], "yes" if c["covered"] else "no",
                                   c["train_positives"], c["train_negatives"], c["held_out_documents"],
                                   _metric(c["held_out_precision"]), _metric(c["held_out_recall"]),
                                   _metric(c["held_out_auc"]),
                                   c["scored"], f"{c['not_covered']} {c['not_covered_outcome']}"
                                   if c["not_covered"] else 0] for c in langs])))
    return out


def _metric(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"
