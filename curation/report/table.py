"""Tables of the report, rendered twice from the same cells: Markdown and HTML.

A cell is a plain value (ints get thousands separators and, like floats, align right) or a `Cell`
carrying a style: `Cell(text, "warn")` is red in HTML and bold in Markdown (a licence decision that
admits unknown licences); `Cell(text, "fold")` marks its row as a folded long tail (grey, italic),
`Cell(text, "total")` as a totals row (bold).
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

ROW_STYLES = ("fold", "total")   # styles that apply to the cell's whole row in HTML
LONG = 40        # an HTML table of more rows starts collapsed (<details>); the Markdown shows them all
NOWRAP = 32      # a cell of one word up to this long is not broken (CC-BY-4.0 stays on one line)


@dataclass(frozen=True)
class Cell:
    value: object
    style: str = ""       # "warn", "fold", "total" or ""
    title: str = ""       # HTML tooltip: the full value where the cell shows an abbreviation


@dataclass(frozen=True)
class Section:
    """One part of the report: its group (the table of contents' first level), title, note and table."""
    group: str
    title: str
    note: str
    table: tuple[str, str]      # (Markdown, HTML)


def slug(text: str, taken: set[str]) -> str:
    """The anchor GitHub gives a Markdown heading (lower case, punctuation dropped, spaces as `-`,
    `-1`, `-2`, ... on repeats), so the table of contents works in both versions; adds it to `taken`."""
    base = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-") or "section"
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def fmt(v) -> str:
    if isinstance(v, Cell):
        return fmt(v.value)
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return "" if v is None else str(v)


def inline(text: str) -> str:
    """Escape for HTML and render `code` spans as in the Markdown version."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _md_cell(v) -> str:
    text = fmt(v).replace("|", "\\|")
    if isinstance(v, Cell) and v.style == "warn" and text:
        return f"**{text}**"
    if isinstance(v, Cell) and v.style == "fold" and text:
        return f"*{text}*"
    if isinstance(v, Cell) and v.style == "total" and text:
        return f"**{text}**"
    return text


def _breakable(escaped: str) -> str:
    """HTML text that may wrap after each `_` of a snake_case name (`gopher_below_alpha_threshold`): a
    browser breaks only at spaces, so such a name was one unbreakable run as wide as the whole name, and
    a table of a few of them ran past the page."""
    return escaped.replace("_", "_<wbr>")


def _html_cell(v) -> str:
    raw = v.value if isinstance(v, Cell) else v
    classes = ["num"] if isinstance(raw, (int, float)) and not isinstance(raw, bool) else []
    text = fmt(v)
    if " " not in text and "_" not in text and 0 < len(text) <= NOWRAP:
        classes.append("nw")
    if isinstance(v, Cell) and v.style and v.style not in ROW_STYLES:
        classes.append(v.style)
    attrs = f" class='{' '.join(classes)}'" if classes else ""
    if isinstance(v, Cell) and v.title:
        attrs += f" title='{html.escape(v.title, quote=True)}'"
    return f"<td{attrs}>{_breakable(inline(text))}</td>"


def table(header: list[str], body: list[list]) -> tuple[str, str]:
    """(Markdown, HTML) of one table; text in cells may hold `code` spans."""
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
    h = ["<table><thead><tr>" + "".join(f"<th>{_breakable(html.escape(c))}</th>" for c in header) + "</tr></thead><tbody>"]
    for row in body:
        style = next((c.style for c in row if isinstance(c, Cell) and c.style in ROW_STYLES), "")
        h.append(f"<tr class='{style}'>" if style else "<tr>")
        h.append("".join(_html_cell(c) for c in row) + "</tr>")
    h.append("</tbody></table>")
    if len(body) > LONG:
        h = [f"<details><summary>{len(body):,} rows (show)</summary>", *h, "</details>"]
    return "\n".join(md), "\n".join(h)
