"""The run report: Markdown and HTML with the same tables, plus a funnel plot.

Sections: run summary, per-source summary, step-by-step counts, drop and quarantine
reasons, tokens by modality. Everything comes from the ledger rows of this run.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from curation.report.plots import funnel_plot
from curation.runtime.files import atomic_write_bytes


def _table(header: list[str], body: list[list]) -> tuple[str, str]:
    def fmt(v):
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in body]
    h = ["<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr></thead><tbody>"]
    for row in body:
        cells = "".join(f"<td class='{'num' if isinstance(c, (int, float)) else ''}'>{html.escape(fmt(c))}</td>"
                        for c in row)
        h.append(f"<tr>{cells}</tr>")
    h.append("</tbody></table>")
    return "\n".join(md), "\n".join(h)


def _inline(text: str) -> str:
    """Escape for HTML and render `code` spans as in the Markdown version."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    tokens = {t["source"]: t for t in rows["tokens"]}
    first = {r["source"]: r["records_in"] for r in rows["steps"] if r["position"] == 0}
    total_tokens = sum(t["total_tokens"] for t in rows["tokens"]) or 1
    summary = []
    for s in rows["sources"]:
        t = tokens[s["source"]]
        summary.append([s["source"], s["category"], s["input_files"], first[s["source"]], t["documents"],
                        f"{100 * t['documents'] / max(first[s['source']], 1):.1f}%", t["total_tokens"],
                        f"{100 * t['total_tokens'] / total_tokens:.1f}%", s["weight"]])
    steps = [[r["source"], r["step"], r["records_in"], r["records_out"], r["dropped"], r["quarantined"]]
             for r in rows["steps"]]
    reasons = [[d["source"], d["step"], d["reason"], "dropped", d["records"]] for d in rows.get("drops", [])]
    reasons += [[q["source"], q["step"], q["reason"], "quarantined", q["records"]]
                for q in rows.get("quarantine", [])]
    order = {s["source"]: i for i, s in enumerate(rows["sources"])}
    reasons.sort(key=lambda r: (order[r[0]], -r[4], r[1], r[2]))
    toks = [[t["source"], t["documents"], t["text_tokens"], t["image_tokens"], t["audio_tokens"],
             t["total_tokens"]] for t in rows["tokens"]]
    return [
        ("Sources", "Records read, documents kept and their tokens (counted from the shards).",
         _table(["source", "category", "files", "records read", "documents kept", "kept", "tokens",
                 "token share", "weight"], summary)),
        ("Steps", "Per step: in = out + dropped + quarantined (checked for every shard).",
         _table(["source", "step", "in", "out", "dropped", "quarantined"], steps)),
        ("Why records were removed", "Drop and quarantine reasons; quarantined records are in `quarantine/`.",
         _table(["source", "step", "reason", "kind", "records"], reasons)),
        ("Tokens by modality", f"In the vocabulary `{rows['runs'][0]['vocabulary']}`.",
         _table(["source", "documents", "text", "image", "audio", "total"], toks)),
    ]


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}code{background:#f4f4f4}
img{max-width:100%}.meta{color:#555}"""


def write_report(rows: dict, out: Path) -> Path:
    """Write `<out>/reports/report.{md,html}` and `funnel.png` from the ledger rows of one run."""
    rdir = out / "reports"
    png = funnel_plot(rows, rdir / "funnel.png")
    run = rows["runs"][0]
    head = (f"Recipe `{run['recipe']}`, fingerprint `{run['run']}`, vocabulary `{run['vocabulary']}`, "
            f"stages: {run['stages']}. Manifests in `manifests/`, ledger in `ledger/` "
            f"(query with `curate ledger <out>`).")
    sections = _sections(rows)
    md = [f"# Curation report: {run['recipe']}", "", head, "", f"![records and tokens]({png.name})", ""]
    body = [f"<h1>Curation report: {html.escape(run['recipe'])}</h1>", f"<p class='meta'>{_inline(head)}</p>",
            f"<img src='{png.name}' alt='records through the pipeline and tokens per source'>"]
    for title, note, (tmd, thtml) in sections:
        md += [f"## {title}", "", note, "", tmd, ""]
        body += [f"<h2>{html.escape(title)}</h2>", f"<p>{_inline(note)}</p>", thtml]
    atomic_write_bytes(rdir / "report.md", "\n".join(md).encode())
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>curate report: {html.escape(run['recipe'])}"
            f"</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")
    atomic_write_bytes(rdir / "report.html", page.encode())
    return rdir / "report.html"
