"""Small pools for classifier training tests: documents with a `language` field, so that the tests
do not depend on what language ID makes of synthetic text (one test covers LID on real text)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

_GOOD = {"en": "The committee published its annual report on water quality, describing how samples were "
               "taken at {i} river sites and why the results matter for public health.",
         "de": "Der Ausschuss veröffentlichte seinen Jahresbericht zur Wasserqualität und beschrieb, wie an "
               "{i} Flussstellen Proben genommen wurden und warum die Ergebnisse wichtig sind.",
         "sw": "Kamati ilichapisha ripoti yake ya mwaka kuhusu ubora wa maji katika maeneo {i} ya mto."}
_WEB = {"en": "Home | Login | Cart ({i})\nBuy now cheap deals deals deals\nClick here\n"
              "Our shop sells many products and you can order them today for delivery number {i}.",
        "de": "Startseite | Anmelden | Warenkorb ({i})\nJetzt kaufen billig billig\nHier klicken\n"
              "Unser Laden verkauft viele Produkte und Sie können sie heute bestellen, Nummer {i}.",
        "sw": "Nyumbani | Ingia ({i})\nNunua sasa\nBonyeza hapa kwa bidhaa nyingi leo {i}."}


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def quality_spec(tmp_path) -> Path:
    """en: 60 good + 80 web documents, de: 30 + 40, sw: 4 + 8 (below the median: upsampled)."""
    sizes = {"en": (60, 80), "de": (30, 40), "sw": (4, 8)}
    good, web = [], []
    for lang, (g, w) in sizes.items():
        good += [{"id": f"g-{lang}-{i}", "text": _GOOD[lang].format(i=i), "language": lang} for i in range(g)]
        web += [{"id": f"w-{lang}-{i}", "text": _WEB[lang].format(i=i) + " extra" * (i % 7), "language": lang}
                for i in range(w)]
    _write(tmp_path / "pools" / "good.jsonl", good)
    _write(tmp_path / "pools" / "web.jsonl", web)
    spec = tmp_path / "q.yaml"
    spec.write_text(
        "name: tq\ntask: quality\n"
        "positives: [{name: good, paths: [pools/good.jsonl], id_field: id, language_field: language}]\n"
        "negatives:\n  pools: [{name: web, paths: [pools/web.jsonl], id_field: id, language_field: language}]\n"
        "  proxy: {heuristic: signals}\n"
        "fasttext: {dim: 8, epoch: 5, lr: 0.3, bucket: 5000}\nseed: 3\nheld_out: 0.25\n")
    return spec


@pytest.fixture
def toxicity_spec(tmp_path) -> Path:
    rows = []
    for i in range(40):
        rows.append({"text": f"you are a stupid worthless idiot number {i}", "label": "toxic", "language": "en"})
        rows.append({"text": f"thanks for the helpful article number {i}", "label": 0, "language": "en"})
        rows.append({"text": f"du bist ein dummer Idiot Nummer {i}", "label": 1, "language": "de"})
        rows.append({"text": f"danke für den hilfreichen Artikel Nummer {i}", "label": "clean"})
    rows.append({"text": "an unlabelled comment", "label": "spam", "language": "en"})
    _write(tmp_path / "tox.jsonl", rows)
    spec = tmp_path / "t.yaml"
    spec.write_text("name: tt\ntask: toxicity\n"
                    "labelled: [{name: comments, paths: [tox.jsonl], language_field: language}]\n"
                    "fasttext: {dim: 8, epoch: 5, bucket: 2000, quantize: {cutoff: 500}}\nheld_out: 0.25\n")
    return spec
