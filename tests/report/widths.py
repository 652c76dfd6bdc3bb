"""How wide the report's HTML tables are at least, estimated without a browser (there is no headless
Chromium or Playwright on these machines): a table cannot be narrower than the sum of its columns'
min-content widths, a column's being its widest cell's, where a cell's is its longest unbreakable run (the
whole text for `nw` cells, which do not wrap; spaces and `<wbr>` break) plus padding and border. Text width from Helvetica/Arial
advance widths (what `system-ui` is close to, or narrower than) at the report's 14 px, bold headers 8%
wider, `code` as monospace 0.6 em, all times a 10% margin; the browser lays out in the same way, so a
table whose estimate fits the page fits in a browser too, up to that margin."""
from __future__ import annotations

import re
from html.parser import HTMLParser

FONT_PX = 14
PAD_BORDER_PX = 2 * 8 + 1          # td/th padding 3px 8px, 1px border (collapsed)
MARGIN = 1.10
PAGE_1280_PX = 1180                # body max-width at a 1280 px window (1280 - 2 em padding - scrollbar > 1180)

# Helvetica advance widths in em for what the report prints; anything else counts as a wide 0.75 em
_EM = {**{c: 0.556 for c in "0123456789"}, " ": 0.278, ",": 0.278, ".": 0.278, ":": 0.278, ";": 0.278,
       "(": 0.333, ")": 0.333, "-": 0.333, "_": 0.556, "/": 0.278, "%": 0.889, "→": 1.0, "−": 0.584,
       "…": 1.0, "×": 0.584, "'": 0.191, "=": 0.584, "+": 0.584, "#": 0.556, "*": 0.389, "|": 0.26,
       **dict(zip("abcdefghijklmnopqrstuvwxyz", [0.556, 0.556, 0.5, 0.556, 0.556, 0.278, 0.556, 0.556, 0.222,
                                                 0.222, 0.5, 0.222, 0.833, 0.556, 0.556, 0.556, 0.556, 0.333,
                                                 0.5, 0.278, 0.556, 0.5, 0.722, 0.5, 0.5, 0.5])),
       **dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", [0.667, 0.667, 0.722, 0.722, 0.667, 0.611, 0.778, 0.722, 0.278,
                                                 0.5, 0.667, 0.556, 0.833, 0.722, 0.778, 0.667, 0.778, 0.722,
                                                 0.667, 0.611, 0.722, 0.667, 0.944, 0.667, 0.667, 0.611]))}


def text_px(text: str, bold: bool = False, mono: bool = False) -> float:
    em = 0.6 * len(text) if mono else sum(_EM.get(c, 0.75) for c in text)
    return em * FONT_PX * (1.08 if bold else 1.0) * MARGIN


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables: list[list[list[tuple[list[tuple[str, bool]], bool, bool]]]] = []
        self.cell = None      # runs of (text, in code) of the open cell
        self.code = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []
            self.nowrap = "nw" in (attrs.get("class") or "").split()
            self.bold = tag == "th"
        elif tag == "code":
            self.code = True
        elif tag == "wbr" and self.cell is not None:
            self.cell.append(("\n", False))      # a break opportunity, no width

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append((self.cell, self.nowrap, self.bold))
            self.cell = None
        elif tag == "code":
            self.code = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append((data, self.code))


def _cell_px(runs, nowrap: bool, bold: bool) -> float:
    if nowrap:
        return sum(text_px(t, bold, mono) for t, mono in runs)
    widest, word = 0.0, 0.0       # the longest run between break opportunities (spaces)
    for t, mono in runs:
        for _i, piece in enumerate(re.split(r"(\s+)", t)):
            if piece.isspace():
                widest, word = max(widest, word), 0.0
            elif piece:
                word += text_px(piece, bold, mono)
    return max(widest, word)


def table_min_widths(html_text: str) -> list[tuple[float, str]]:
    """(estimated min-content width in px, the header row's text) of every table in the page."""
    parser = _Tables()
    parser.feed(html_text)
    out = []
    for rows in parser.tables:
        columns: dict[int, float] = {}
        for row in rows:
            for i, cell in enumerate(row):
                columns[i] = max(columns.get(i, 0.0), _cell_px(*cell) + PAD_BORDER_PX)
        header = " | ".join("".join(t for t, _ in c[0]) for c in rows[0]) if rows else ""
        out.append((sum(columns.values()) + 1, header))
    return out
