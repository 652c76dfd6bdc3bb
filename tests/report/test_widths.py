"""The report fits a 1280 px window, and its Steps table is in pipeline order.

No headless browser is installed on these machines (no chromium, chromium-browser, google-chrome or
Playwright), so widths are a deterministic lower-bound estimate of each table's min-content width
(`tests/report/widths.py`), with a 10% margin: a table narrower than the page by that estimate is laid out
within it by a browser, which shrinks columns down to their min-content widths before overflowing."""
from __future__ import annotations

import pytest

from curation.report import write_report
from curation.report.removals import pipeline_order
from tests.conftest import REPO
from tests.report.ledgers import soofi_like
from tests.report.widths import PAGE_1280_PX, table_min_widths, text_px


def _too_wide(page: str) -> list[str]:
    return [f"{w:.0f} px: {header[:120]}" for w, header in table_min_widths(page) if w > PAGE_1280_PX]


@pytest.mark.slow
@pytest.mark.parametrize("n_sources", [4, 8, 24])
def test_no_table_is_wider_than_the_page(tmp_path, n_sources):
    write_report(soofi_like(n_sources), tmp_path)
    page = (tmp_path / "reports" / "index.html").read_text()
    assert len(table_min_widths(page)) > 10
    assert _too_wide(page) == []


def test_the_committed_demo_report_fits_the_page():
    page = (REPO / "reports" / "demo" / "index.html").read_text()
    assert _too_wide(page) == []


def test_the_estimate_sees_an_unbreakable_run():
    wide = "<table><tr><td>" + "x" * 200 + "</td></tr></table>"
    broken = "<table><tr><td>" + "x_<wbr>" * 40 + "</td></tr></table>"
    assert table_min_widths(wide)[0][0] > PAGE_1280_PX > table_min_widths(broken)[0][0]
    assert text_px("quarantined", bold=True) > text_px("quarantined")


def _steps(chains: dict[str, list[str]]) -> dict:
    return {"steps": [{"source": s, "position": i, "step": st} for s, chain in chains.items()
                      for i, st in enumerate(chain)]}


def test_steps_merge_every_chain_in_order():
    text = ["read", "licence", "robots_optout", "normalize", "length", "language", "gopher_quality", "pii",
            "exact_dedup", "near_dedup", "decontaminate", "tokenize"]
    image = ["read", "licence", "image_check", "exact_dedup", "decontaminate", "tokenize"]
    audio = ["read", "licence", "audio_check", "exact_dedup", "decontaminate", "tokenize"]
    order = pipeline_order(_steps({"web": text, "pics": image, "clips": audio}))
    assert order == [*text[:8], "image_check", "audio_check", *text[8:]]
    for chain in (text, image, audio):
        assert [st for st in order if st in chain] == chain
    # chains that contradict each other still give every step once, deterministically
    odd = pipeline_order(_steps({"a": ["read", "x", "y"], "b": ["read", "y", "x"]}))
    assert sorted(odd) == ["read", "x", "y"] and odd[0] == "read"


@pytest.mark.slow
def test_the_report_steps_table_is_in_pipeline_order(tmp_path):
    rows = soofi_like(8)
    write_report(rows, tmp_path)
    md = (tmp_path / "reports" / "report.md").read_text()
    table = md.split("### Steps", 1)[1].split("\n\n", 3)[2]
    listed = [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]]
    assert listed == pipeline_order(rows)
    by_source: dict[str, list[tuple[int, str]]] = {}
    for r in rows["steps"]:
        by_source.setdefault(r["source"], []).append((r["position"], r["step"]))
    for source, chain in by_source.items():
        steps = [st for _, st in sorted(chain)]
        assert [st for st in listed if st in steps] == steps, source
