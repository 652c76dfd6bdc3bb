"""The mixture flow diagram (Soofi S Figure 3, traced per source): from the source pools on the left
(tokens in the shards) into every stage, left to right.

Each column is normalised to its total, so a segment's height is its share: of the pools' tokens in
the first column, of the stage's effective tokens (epochs applied) in the others. Sources are stacked
grouped by category (categories in recipe order, a gap between them); a source's segment has its
colour and its share when the label fits. Between columns each source flows as a ribbon from its
segment to its segment in the next column, filled with its category's colour, so a category reads as
one band whose sources are separated by thin lines; a source a stage excludes (zero epochs, not
selected) narrows to nothing there. Colours: `colours.report_colours`, the same as in every plot.
"""
from __future__ import annotations

from pathlib import Path

from curation.ledger.pools import main_pool
from curation.report.colours import ink, report_colours
from curation.report.plots import fits, pyplot, save, short_tokens, stack_order

WIDTH, GAP, BAND_ALPHA = 0.26, 0.025, 0.55


def _columns(rows: dict, sources: list[str]) -> list[tuple[str, dict[str, float], int]]:
    """(label, source -> tokens, total) for the pools, then each stage."""
    pools = {s: t["total_tokens"] for s, t in main_pool(rows).items()}
    cols = [("pools", {s: pools.get(s, 0) for s in sources})]
    for st in rows["stages"]:
        eff = {m["source"]: m["effective_tokens"] for m in rows["mixture"] if m["stage"] == st["stage"]}
        cols.append((st["stage"], {s: eff.get(s, 0) for s in sources}))
    return [(label, vals, sum(vals.values())) for label, vals in cols]


def _spans(vals: dict[str, float], total: int, sources: list[str], category: dict[str, str]):
    """source -> (top, bottom) in a column running from 0 at the top, a gap between categories."""
    spans, y, prev = {}, 0.0, None
    for s in sources:
        if prev is not None and category[s] != prev:
            y += GAP
        h = vals[s] / total if total else 0.0
        spans[s] = (y, y + h)
        y += h
        prev = category[s]
    return spans


def _smooth(a: float, b: float, n: int = 40):
    """n points easing from a to b (smoothstep), the curve of a ribbon's edge."""
    return [a + (b - a) * (3 * t * t - 2 * t * t * t) for t in (i / (n - 1) for i in range(n))]


def flow_plot(rows: dict, path: Path) -> Path:
    plt = pyplot()
    from matplotlib.patches import Patch

    src_colour, cat_colour = report_colours(rows)
    sources = stack_order(rows)
    category = {s["source"]: s["category"] for s in rows["sources"]}
    categories = list(dict.fromkeys(category[s] for s in sources))
    cols = _columns(rows, sources)
    spans = [_spans(vals, total, sources, category) for _, vals, total in cols]
    height = 1 + GAP * (len(categories) - 1)
    legend_rows = -(-len(sources) // 6) + -(-len(categories) // 6)
    legend_h = 0.8 + 0.22 * legend_rows
    fig_h = 4.8
    fig, ax = plt.subplots(figsize=(max(8.0, 2.0 + 2.5 * len(cols)), fig_h + legend_h))
    for k in range(len(cols) - 1):   # ribbons first, so the columns are drawn over their ends
        x0, x1 = k + WIDTH / 2, k + 1 - WIDTH / 2
        xs = [x0 + (x1 - x0) * i / 39 for i in range(40)]
        for s in sources:
            (a0, a1), (b0, b1) = spans[k][s], spans[k + 1][s]
            if a1 - a0 <= 0 and b1 - b0 <= 0:
                continue
            ax.fill_between(xs, _smooth(a0, b0), _smooth(a1, b1), color=cat_colour[category[s]], alpha=BAND_ALPHA,
                            linewidth=0)
            for edge in (_smooth(a0, b0), _smooth(a1, b1)):
                ax.plot(xs, edge, color="white", linewidth=0.7)
    for k in range(len(cols)):
        for s in sources:
            top, bottom = spans[k][s]
            if bottom > top:
                ax.bar(k, bottom - top, WIDTH, bottom=top, color=src_colour[s], edgecolor="white", linewidth=0.6)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(height + 0.01, -0.01)   # first category on top
    ax.set_xticks(range(len(cols)), [f"{label}\n{short_tokens(total)} tokens" if k else
                                     f"source pools\n{short_tokens(total)} tokens in shards"
                                     for k, (label, _, total) in enumerate(cols)], fontsize=8)
    ax.set_yticks([0, height / 2, height], ["0%", "50%", "100%"], fontsize=8)
    ax.set_ylabel("share of the column's tokens")
    ax.set_title("Mixture flow: each source from its pool into every stage (bands: categories)")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="x", length=0)
    fig.tight_layout(rect=(0, legend_h / (fig_h + legend_h), 1, 1))
    for k, (_, vals, total) in enumerate(cols):
        for s in sources:
            top, bottom = spans[k][s]
            if bottom <= top:
                continue
            share = 100 * vals[s] / total
            for form in (f"{s}\n{share:.1f}%", f"{share:.1f}%"):
                t = ax.text(k, (top + bottom) / 2, form, ha="center", va="center", fontsize=7, color=ink(src_colour[s]))
                if fits(ax, t, k - WIDTH / 2, k + WIDTH / 2, top, bottom):
                    break
                t.remove()
    for c in categories:   # the name on its band, in the gap where the band is thickest
        members = [s for s in sources if category[s] == c]
        best = None
        for k in range(len(cols) - 1):
            a0, a1 = spans[k][members[0]][0], spans[k][members[-1]][1]
            b0, b1 = spans[k + 1][members[0]][0], spans[k + 1][members[-1]][1]
            if best is None or min(a1 - a0, b1 - b0) > best[0]:
                best = (min(a1 - a0, b1 - b0), k, max(a0, b0), min(a1, b1))
        if best is None or best[0] <= 0:
            continue
        _, k, y0, y1 = best
        t = ax.text(k + 0.5, (y0 + y1) / 2, c, ha="center", va="center", fontsize=8, fontweight="bold",
                    color="#333333")
        if not fits(ax, t, k + WIDTH / 2, k + 1 - WIDTH / 2, y0, y1):
            t.remove()
    inch = 1 / (fig_h + legend_h)   # legends below the axes, in figure fractions
    cat_rows = -(-len(categories) // 6)
    leg = fig.legend(handles=[Patch(color=src_colour[s], label=s) for s in sources], loc="lower center",
                     bbox_to_anchor=(0.5, (0.1 + 0.22 * cat_rows + 0.1) * inch), ncol=min(len(sources), 6),
                     fontsize=8, frameon=False, title="sources", title_fontsize=8)
    fig.add_artist(leg)
    fig.legend(handles=[Patch(color=cat_colour[c], alpha=BAND_ALPHA, label=c) for c in categories],
               loc="lower center", bbox_to_anchor=(0.5, 0.05 * inch), ncol=min(len(categories), 6), fontsize=8,
               frameon=False, title="categories (bands)", title_fontsize=8)
    return save(fig, path)
