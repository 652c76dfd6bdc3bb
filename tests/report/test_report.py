"""The run report from ledger rows: sections, table of contents, run facts, deterministic bytes, one
colour per source and category in every plot, grouped removals, revisions, licence warnings."""
import hashlib
import random
import re

import pytest
from PIL import Image

from curation.report import write_report
from curation.report.colours import (
    CATEGORY_PALETTE,
    SOURCE_PALETTE,
    category_colour_map,
    report_colours,
    source_colour_map,
)
from curation.report.provenance import inputs_digest, revision_cell
from curation.report.removals import group_removals
from curation.steps.compliance.licences import UNKNOWN_ADMITTED
from tests.report.ledgers import CATEGORIES, LANGUAGES, soofi_like


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    write_report(soofi_like(), out)
    return out / "reports"


@pytest.mark.slow
def test_sections_contents_and_run_facts(rendered):
    md = (rendered / "report.md").read_text()
    for heading in ("## Contents", "## Figures", "## Mixture", "## Compliance", "## Records and tokens",
                    "### Stage phase1: mixture", "### Stage long-context: categories", "### Licences and provenance",
                    "### Sources", "### Why records were removed", "### Tokens by modality", "### Steps"):
        assert f"\n{heading}\n" in md, heading
    assert "- **run**: 2026-03-24 09:15:02 to 11:02:40 UTC (1 h 47 min)" in md
    assert "- **curate**: 0.1.0" in md
    assert "fasttext (fasttext-numpy2-wheel 0.9.2; fasttext-predict 0.9.2.4)" in md
    assert md.count("*Figure ") == 3
    html = (rendered / "index.html").read_text()
    ids = re.findall(r" id='([^']+)'", html)
    links = re.findall(r"href='#([^']+)'", html)
    assert len(ids) == len(set(ids)) and links and set(links) <= set(ids)   # every contents link lands
    assert "Licences and provenance" in re.search(r"<nav class='toc'>.*?</nav>", html, re.S).group(0)
    md_links = re.findall(r"\]\(#([^)]+)\)", md)   # GitHub-style anchors of the Markdown headings
    assert "licences-and-provenance" in md_links and "stage-phase1-mixture" in md_links


@pytest.mark.slow
def test_same_ledger_same_bytes(rendered, tmp_path):
    write_report(soofi_like(), tmp_path)
    again = {p.name: p.read_bytes() for p in sorted((tmp_path / "reports").iterdir())}
    first = {p.name: p.read_bytes() for p in sorted(rendered.iterdir())}
    assert sorted(first) == ["ai_act_summary.html", "ai_act_summary.md", "composition.png", "flow.png", "funnel.png",
                            "index.html", "report.md"]
    assert again == first


@pytest.mark.slow
def test_the_run_date_comes_from_the_ledger(tmp_path):
    rows = soofi_like()
    rows["runs"][0]["started_at"], rows["runs"][0]["finished_at"] = "2031-01-02T23:59:00Z", "2031-01-03T00:01:05Z"
    md = write_report(rows, tmp_path).with_name("report.md").read_text()
    assert "- **run**: 2031-01-02 23:59:00 to 2031-01-03 00:01:05 UTC (2 min 5 s)" in md


def test_colour_maps_are_functions_of_the_sorted_names():
    names = [f"s{i}" for i in range(30)]
    for n in (3, 18, 30):   # within the palette and beyond it
        shuffled = random.Random(n).sample(names[:n], n)
        assert source_colour_map(shuffled) == source_colour_map(names[:n]) == source_colour_map(names[:n] * 2)
        assert len(set(source_colour_map(names[:n]).values())) == n
    assert source_colour_map(["web_de", "c4_en", "web_en"]) == {"c4_en": SOURCE_PALETTE[0], "web_de": SOURCE_PALETTE[1],
                                                                "web_en": SOURCE_PALETTE[2]}
    assert set(SOURCE_PALETTE).isdisjoint(CATEGORY_PALETTE)   # a colour never means a source and a category
    assert category_colour_map(CATEGORIES) == category_colour_map(sorted(CATEGORIES))
    rows = soofi_like()
    before = report_colours(rows)
    rows["sources"].reverse()
    assert report_colours(rows) == before


def _pixels(png, colour: str) -> int:
    rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(n for n, c in Image.open(png).convert("RGB").getcolors(1 << 24) if c == rgb)


@pytest.mark.slow
def test_every_plot_draws_a_source_in_its_colour(tmp_path):
    rows = soofi_like(n_sources=6)
    write_report(rows, tmp_path)
    colours, _ = report_colours(rows)
    for plot in ("flow.png", "composition.png", "funnel.png"):
        for source, colour in colours.items():
            assert _pixels(tmp_path / "reports" / plot, colour) > 50, (plot, source)


def test_removals_group_language_codes_and_fold_the_long_tail():
    rows = soofi_like(n_sources=9)
    extra = [("src_00_en", "gopher_quality", f"rare_{k}", 1) for k in range(4)]
    rows["drops"] += [{"run": "r", "source": s, "step": st, "reason": r, "records": n} for s, st, r, n in extra]
    groups = group_removals(rows)
    language = [g for g in groups if g.step == "language" and g.reason == "language (other)"]
    assert len(language) == 1 and language[0].detail.startswith(f"{len(LANGUAGES)} languages: es ")
    assert not any(g.reason.startswith("language_") and g.reason != "language_low_score" for g in groups)
    other = [g for g in groups if g.folded]
    assert [g.reason for g in other] == ["other (4 reasons)"] and other[0].step == "gopher_quality"
    assert other[0].members == {f"rare_{k}": 1 for k in range(4)}
    for source in {d["source"] for d in rows["drops"]}:   # every removed record still counted once
        want = sum(d["records"] for d in rows["drops"] + rows["quarantine"] if d["source"] == source)
        assert sum(g.records.get(source, 0) for g in groups) == want
    steps = [g.step for g in groups]
    assert steps == sorted(steps, key=["read", "length", "language", "gopher_quality", "near_dedup"].index)


def test_a_reason_that_matters_to_one_small_source_keeps_its_row():
    rows = soofi_like(n_sources=3)
    rows["drops"].append({"run": "r", "source": "src_02_en", "step": "near_dedup", "reason": "url_duplicate",
                          "records": 40})   # under 2% overall, not for src_02_en
    rows["drops"].append({"run": "r", "source": "src_00_en", "step": "near_dedup", "reason": "tiny", "records": 1})
    reasons = {g.reason for g in group_removals(rows) if g.step == "near_dedup"}
    assert "url_duplicate" in reasons and "tiny" in reasons   # one small reason in a step is not folded


def test_revisions_say_where_they_come_from():
    inputs = [{"path": "b/2.jsonl", "sha256": "2" * 64}, {"path": "a/1.jsonl", "sha256": "1" * 64}]
    lines = f"{'1' * 64}  a/1.jsonl\n{'2' * 64}  b/2.jsonl\n"   # what `sha256sum a/1.jsonl b/2.jsonl` prints
    digest = hashlib.sha256(lines.encode()).hexdigest()
    assert inputs_digest(inputs) == digest
    cell = revision_cell({"revision": None, "fetched_sha256": None}, inputs)
    assert cell.value == f"no revision; 2 input files sha256 `{digest[:12]}`" and cell.title == digest
    assert revision_cell({"revision": "f" * 40}, inputs).value == f"`{'f' * 12}`"
    assert revision_cell({"revision": "v1.2"}, inputs).value == "`v1.2`"
    assert revision_cell({"revision": None, "fetched_sha256": "e" * 64}, []).value == f"fetched sha256 `{'e' * 12}`"


@pytest.mark.slow
def test_decisions_that_admit_unknown_licences_are_red(rendered):
    html = (rendered / "index.html").read_text()
    cells = re.findall(r"<td class='([^']*)'>((?:[^<]|<wbr>)*UNKNOWN LICENCES ADMITTED(?:[^<]|<wbr>)*)</td>", html)
    assert cells and all("warn" in c for c, _ in cells)
    assert f"**included; {UNKNOWN_ADMITTED}**" in (rendered / "report.md").read_text()
    assert "td.warn{color:#b00020" in html


@pytest.mark.slow
def test_a_ledger_from_before_the_renames_still_renders(tmp_path):
    rows = soofi_like(n_sources=3)
    for s in rows["sources"]:
        s["license"], s["license_class"] = s.pop("licence"), s.pop("licence_class")
    for k in ("started_at", "finished_at"):
        rows["runs"][0].pop(k)
    md = write_report(rows, tmp_path).with_name("report.md").read_text()
    assert "not recorded" in md and "| CC-BY-4.0 | permissive |" in md


def test_labels_are_drawn_only_where_they_fit():
    from curation.report.plots import fits, pyplot
    fig, ax = pyplot().subplots(figsize=(4, 3))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    assert fits(ax, ax.text(5, 5, "ok", ha="center", va="center", fontsize=7), 0, 10, 0, 10)
    assert not fits(ax, ax.text(5, 5, "a label far too long for its box", ha="center", va="center"), 4, 6, 4, 6)
    pyplot().close(fig)


@pytest.mark.slow
def test_task_retries_have_a_section_only_when_there_were_some(tmp_path):
    rows = soofi_like()
    assert "Task retries" not in write_report(rows, tmp_path / "none").with_name("report.md").read_text()
    rows["task_retries"] = [{"run": "f00dfeedc0ffee00", "node": "tokenize/src_00_en/00003", "attempt": 1,
                             "error": "NodeDiedError", "message": "Task failed because the node it was running on "
                                                                  "is dead or unavailable."}]
    md = write_report(rows, tmp_path / "lost").with_name("report.md").read_text()
    section = md[md.index("Task retries"):]
    assert "1 task run(s) were lost" in section and "tokenize/src_00_en/00003" in section
    assert "NodeDiedError" in section
