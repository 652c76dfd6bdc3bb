"""The run report: `reports/index.html` and its Markdown twin `report.md`, the same sections, plus plots.

Layout: the run (recipe, fingerprint, run date and duration, curate and library versions), a table of
contents, the figures (mixture flow per source, composition of each stage, records through the
pipeline, quality scores per language), then the tables in groups: mixture, compliance (licences and
provenance, acquisition, opt-out, PII), decontamination, deduplication, model classifiers (quality
selection, toxicity), images and audio, training, records and tokens. Every number comes from the ledger
rows; the run date is the ledger's `runs.started_at`, never the clock at render time, so the same
ledger renders to the same bytes.
"""
from __future__ import annotations

import html
from datetime import datetime
from pathlib import Path

from curation.core.atomic import atomic_write_bytes
from curation.ledger.environment import LIBRARIES
from curation.report.ai_act import write_summary
from curation.report.extension import extension_sections
from curation.report.flow import flow_plot
from curation.report.plots import composition_plot, funnel_plot, quality_plot
from curation.report.provenance import compliance_sections
from curation.report.quality import quality_sections
from curation.report.sections import (
    consumed_sections,
    decont_sections,
    dedup_sections,
    media_sections,
    mixture_sections,
    record_sections,
    retry_sections,
)
from curation.report.table import Section, inline, slug

CSS = """body{font-family:system-ui,sans-serif;max-width:1180px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}code{background:#f4f4f4}
td.warn{color:#b00020;font-weight:600;background:#fdecee}tr.fold td{color:#666;font-style:italic}
tr.total td{font-weight:600;background:#fafafa}td.nw{white-space:nowrap}
details{margin:.5em 0 1.5em}summary{cursor:pointer;color:#0645ad}
figure{margin:1em 0 2em}figure img{max-width:100%}figcaption{color:#444;font-size:14px;max-width:900px}
.meta td:first-child{color:#555}nav.toc{columns:2;font-size:14px;background:#f7f7f7;padding:.6em 1.2em;
border-radius:4px}nav.toc ul{margin:.2em 0;padding-left:1.2em}nav.toc>ul{padding-left:0;list-style:none}
nav.toc>ul>li{break-inside:avoid;margin-bottom:.4em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}"""

# ledger columns renamed since (one spelling, `licence`); a report of an older ledger still renders
_RENAMED = {"sources": {"license": "licence", "license_class": "licence_class"}}


def _upgrade(rows: dict) -> dict:
    out = dict(rows)
    for table, names in _RENAMED.items():
        out[table] = [{names.get(k, k): v for k, v in r.items()} for r in rows.get(table, [])]
    return out


def _when(start: str | None, end: str | None) -> str:
    """`2026-03-24 09:15:02 to 09:17:40 UTC (2 min 38 s)` from the runs row's UTC ISO times."""
    if not start:
        return "not recorded (a ledger written before curate recorded run times)"
    try:
        t0 = datetime.fromisoformat(start.replace("Z", "+00:00"))
        t1 = datetime.fromisoformat(end.replace("Z", "+00:00")) if end else None
    except ValueError:
        return f"{start} to {end}"
    text = t0.strftime("%Y-%m-%d %H:%M:%S")
    if t1 is None:
        return f"{text} UTC (no end recorded)"
    secs = int((t1 - t0).total_seconds())
    took = f"{secs // 3600} h {secs % 3600 // 60} min" if secs >= 3600 else \
        f"{secs // 60} min {secs % 60} s" if secs >= 60 else f"{secs} s"
    return f"{text} to {t1.strftime('%H:%M:%S' if t1.date() == t0.date() else '%Y-%m-%d %H:%M:%S')} UTC ({took})"


def _version(col: str, value: str) -> str:
    lib = col.removesuffix("_version")
    return f"{lib} {value}" if " " not in value else f"{lib} ({value})"   # several distributions: name them


def _run_facts(run: dict) -> list[tuple[str, str]]:
    """(label, value) lines of the run's header, from its `runs` row."""
    when = _when(run.get("started_at"), run.get("finished_at"))
    versions = ", ".join(_version(col, run[col]) for col in LIBRARIES if run.get(col))
    facts = [("recipe", f"`{run['recipe']}`, fingerprint `{run['run']}`"), ("run", when),
             ("curate", run.get("curate_version") or "unknown"),
             ("vocabulary", f"`{run['vocabulary']}` (sha256 `{run['vocabulary_sha256'][:16]}`)"),
             ("stages", run["stages"] or "none")]
    if versions:
        facts.append(("libraries", versions))
    facts.append(("outputs", "manifests in `manifests/`, ledger in `ledger/` (query with `curate ledger <out>`, "
                  "export with `--format csv|json|parquet`)"))
    return facts


def _figures(rows: dict, rdir: Path) -> list[tuple[str, str, Path]]:
    """(title, caption, png) of each plot, in the order shown."""
    figs = []
    if rows.get("stages"):
        total = ", ".join(f"{s['stage']} {sum(m['effective_tokens'] for m in rows['mixture'] if m['stage'] == s['stage']):,}"
                          for s in rows["stages"])
        figs.append(("Mixture flow", "Effective-token mixture across the stages, traced per source (Soofi S Figure 3): "
                     "from the source pools (tokens in the shards) into each stage; bands are categories, segment "
                     f"heights shares of the column. Effective tokens: {total}.",
                     flow_plot(rows, rdir / "flow.png")))
        figs.append(("Composition of each stage", "Effective tokens (epochs applied) of each stage, by source.",
                     composition_plot(rows, rdir / "composition.png")))
    figs.append(("Records and tokens", "Records left after each step, per source, and the tokens each source has "
                 "in its shards.", funnel_plot(rows, rdir / "funnel.png")))
    if rows.get("quality_thresholds"):
        figs.append(("Quality scores per language", "Histogram of the selection's score per pool and language (the "
                     "largest twelve) over the documents that reached the `select` step: kept (blue) and dropped "
                     "(grey), the threshold in red. Numbers: section Quality selection.",
                     quality_plot(rows, rdir / "quality.png")))
    return figs


def _sections(rows: dict) -> list[Section]:
    return [*mixture_sections(rows), *extension_sections(rows), *compliance_sections(rows), *decont_sections(rows), *dedup_sections(rows),
            *quality_sections(rows), *media_sections(rows), *consumed_sections(rows), *record_sections(rows),
            *retry_sections(rows)]


def _grouped(sections: list[Section]) -> dict[str, list[Section]]:
    groups: dict[str, list[Section]] = {}
    for s in sections:
        groups.setdefault(s.group, []).append(s)
    return groups


def _anchors(groups: dict[str, list[Section]]) -> dict[object, str]:
    """An anchor for each heading, in document order: the contents, the figures, each group and section."""
    taken: set[str] = set()
    out: dict[object, str] = {"contents": slug("Contents", taken), "figures": slug("Figures", taken)}
    for group, secs in groups.items():
        out[group] = slug(group, taken)
        for s in secs:
            out[id(s)] = slug(s.title, taken)
    return out


def _markdown(run: dict, facts, figs, groups, anchor) -> str:
    md = [f"# Curation report: {run['recipe']}", ""]
    md += [f"- **{label}**: {value}" for label, value in facts] + ["", "## Contents", ""]
    md.append(f"- [Figures](#{anchor['figures']})")
    for group, secs in groups.items():
        md.append(f"- [{group}](#{anchor[group]})")
        md += [f"  - [{s.title}](#{anchor[id(s)]})" for s in secs]
    md += ["", "## Figures", ""]
    for i, (title, caption, png) in enumerate(figs, start=1):
        md += [f"![{title}]({png.name})", "", f"*Figure {i}: {caption}*", ""]
    for group, secs in groups.items():
        md += [f"## {group}", ""]
        for s in secs:
            md += [f"### {s.title}", "", s.note, "", s.table[0], ""]
    return "\n".join(md)


def _html(run: dict, facts, figs, groups, anchor) -> str:
    title = html.escape(run["recipe"])
    body = [f"<h1>Curation report: {title}</h1>", "<table class='meta'>"]
    body += [f"<tr><td>{html.escape(label)}</td><td>{inline(value)}</td></tr>" for label, value in facts]
    body += ["</table>", f"<nav class='toc'><ul><li><a href='#{anchor['figures']}'>Figures</a><ul>"]
    body += [f"<li><a href='#figure-{i}'>{html.escape(t)}</a></li>" for i, (t, _, _) in enumerate(figs, start=1)]
    body.append("</ul></li>")
    for group, secs in groups.items():
        body.append(f"<li><a href='#{anchor[group]}'>{html.escape(group)}</a><ul>")
        body += [f"<li><a href='#{anchor[id(s)]}'>{html.escape(s.title)}</a></li>" for s in secs]
        body.append("</ul></li>")
    body += ["</ul></nav>", f"<h2 id='{anchor['figures']}'>Figures</h2>"]
    for i, (t, caption, png) in enumerate(figs, start=1):
        body.append(f"<figure id='figure-{i}'><img src='{png.name}' alt='{html.escape(t, quote=True)}'>"
                    f"<figcaption><b>Figure {i}:</b> {inline(caption)}</figcaption></figure>")
    for group, secs in groups.items():
        body.append(f"<h2 id='{anchor[group]}'>{html.escape(group)}</h2>")
        for s in secs:
            body += [f"<h3 id='{anchor[id(s)]}'>{html.escape(s.title)}</h3>", f"<p>{inline(s.note)}</p>", s.table[1]]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>curate report: {title}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(rows: dict, out: Path) -> Path:
    """Write `<out>/reports/index.html`, its Markdown twin `report.md`, the plots and the EU AI Act public
    summary (`ai_act_summary.md` / `.html`, `curation.report.ai_act`), from the ledger rows."""
    rows = _upgrade(rows)
    rdir = out / "reports"
    run = rows["runs"][0]
    facts, figs, groups = _run_facts(run), _figures(rows, rdir), _grouped(_sections(rows))
    anchor = _anchors(groups)
    atomic_write_bytes(rdir / "report.md", _markdown(run, facts, figs, groups, anchor).encode())
    atomic_write_bytes(rdir / "index.html", _html(run, facts, figs, groups, anchor).encode())
    write_summary(rows, rdir)   # the EU AI Act public summary, from the same ledger rows
    return rdir / "index.html"
