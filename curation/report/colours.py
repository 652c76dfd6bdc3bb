"""One colour per source and one per category, the same in every plot of a report.

A colour map is a function of the sorted, distinct names alone: the i-th name in sorted order takes
the i-th colour of its palette, so a source keeps its colour from plot to plot and from run to run
of the same recipe, whatever order the ledger lists it in. Sources and categories draw from two
disjoint palettes, so a colour never means a source in one place and a category in another: sources
are saturated (tab10 without its grey, then tab20's light tones), categories muted and lighter, as
they fill the wide bands behind the sources, and in an order whose hues do not follow the sources'
(the first category is not a pale copy of the first source). Beyond a palette's length, colours are
spread hues (lightness and saturation set per kind), still a function of the sorted names.

    >>> source_colour_map(["web_de", "c4_en", "web_en"])["c4_en"]
    '#1f77b4'
"""
from __future__ import annotations

import colorsys

SOURCE_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                  "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
                  "#dbdb8d", "#9edae5")
CATEGORY_PALETTE = ("#d9cfa7", "#a9c5bd", "#c7b3d3", "#e3b3a8", "#b5c99a", "#a7bcd6", "#e0c18f", "#c2c2c2",
                    "#d3a9c0", "#9fcfd0")


def _spread(n: int, lightness: float, saturation: float) -> list[str]:
    """n colours whose neighbours in name order differ most: hues a golden-ratio step apart, lightness
    alternating in three steps around `lightness`."""
    out = []
    for i in range(n):
        r, g, b = colorsys.hls_to_rgb((i * 0.618034) % 1.0, lightness + (i % 3 - 1) * 0.12, saturation)
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


def colour_map(names, palette: tuple[str, ...], lightness: float, saturation: float) -> dict[str, str]:
    ordered = sorted(set(names))
    colours = list(palette) if len(ordered) <= len(palette) else _spread(len(ordered), lightness, saturation)
    return {name: colours[i] for i, name in enumerate(ordered)}


def source_colour_map(names) -> dict[str, str]:
    return colour_map(names, SOURCE_PALETTE, 0.45, 0.75)


def category_colour_map(names) -> dict[str, str]:
    return colour_map(names, CATEGORY_PALETTE, 0.75, 0.35)


def report_colours(rows: dict) -> tuple[dict[str, str], dict[str, str]]:
    """(source colours, category colours) of a run: every source and category its ledger names."""
    sources = [s["source"] for s in rows["sources"]]
    categories = [s["category"] for s in rows["sources"]] + [m["category"] for m in rows.get("mixture", [])]
    return source_colour_map(sources), category_colour_map(categories)


def ink(colour: str) -> str:
    """Black or white, whichever reads better on `colour` (relative luminance, WCAG)."""
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    luminance = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return "#000000" if luminance > 0.179 else "#ffffff"
