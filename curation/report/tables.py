"""The report's tables and inline text, in Markdown and HTML from the same rows."""
from __future__ import annotations

import html
import re


def table(header: list[str], body: list[list]) -> tuple[str, str]:
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


def inline(text: str) -> str:
    """Escape for HTML and render `code` spans as in the Markdown version."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
