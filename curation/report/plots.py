"""Plots of the run report (matplotlib, Agg backend, no timestamps in the PNG metadata, so the same
ledger gives the same bytes): records through the pipeline, tokens per source, composition of each
stage. The mixture flow is in `flow.py`. Colours come from `colours.report_colours`; a label is drawn
only where it fits (`fits`), else a shorter form or none, the legend naming every source.
"""
from __future__ import annotations

from pathlib import Path

from curation.ledger.pools import main_pool
from curation.report.colours import ink, report_colours

DPI = 110


def pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    pyplot().close(fig)
    return path


def short_tokens(n: float) -> str:
    """1,234,567 -> 1.2M; 45,600 -> 45.6k; below 1,000 as is."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}".replace(".0" + unit, unit)
    return f"{n:,.0f}"


def token_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter
    axis.set_major_formatter(FuncFormatter(lambda x, _: short_tokens(x)))


def fits(ax, text, x0: float, x1: float, y0: float, y1: float, pad: float = 2.0) -> bool:
    """Whether the drawn `text` lies inside the data box (x0, x1) × (y0, y1), `pad` pixels spare."""
    renderer = ax.figure.canvas.get_renderer()
    box = text.get_window_extent(renderer)
    (ax0, ay0), (ax1, ay1) = ax.transData.transform([(x0, y0), (x1, y1)])
    lo_x, hi_x, lo_y, hi_y = min(ax0, ax1), max(ax0, ax1), min(ay0, ay1), max(ay0, ay1)
    return box.x0 >= lo_x + pad and box.x1 <= hi_x - pad and box.y0 >= lo_y + pad / 2 and box.y1 <= hi_y - pad / 2


def label_in_box(ax, x0, x1, y0, y1, forms: list[str], colour: str, fontsize: float = 7) -> None:
    """The first of `forms` that fits the box, centred in it, in black or white for the fill `colour`."""
    for form in forms:
        t = ax.text((x0 + x1) / 2, (y0 + y1) / 2, form, ha="center", va="center", fontsize=fontsize, color=ink(colour))
        if fits(ax, t, x0, x1, y0, y1):
            return
        t.remove()


def stack_order(rows: dict) -> list[str]:
    """Sources grouped by category (categories in order of first appearance in the recipe), recipe order within."""
    cats = list(dict.fromkeys(s["category"] for s in rows["sources"]))
    return [s["source"] for c in cats for s in rows["sources"] if s["category"] == c]


def source_legend(fig, sources: list[str], colours: dict[str, str], y: float = 0.0) -> None:
    from matplotlib.patches import Patch
    handles = [Patch(color=colours[s], label=s) for s in sources]
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, y), ncol=min(len(sources), 6), fontsize=8,
               frameon=False, title="sources", title_fontsize=8)


def _legend_rows(n: int) -> int:
    return -(-n // 6)


def funnel_plot(rows: dict, path: Path) -> Path:
    """Per source: records left after each step (a line per source), and kept tokens per source."""
    plt = pyplot()
    src_colour, _ = report_colours(rows)
    sources = [s["source"] for s in rows["sources"]]
    legend_h = 0.35 + 0.22 * _legend_rows(len(sources))
    plot_h = max(4.6, 1.6 + 0.2 * len(sources))   # room for one readable bar label per source
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, plot_h + legend_h), gridspec_kw={"width_ratios": [2, 1]})
    chains = {src: sorted((r for r in rows["steps"] if r["source"] == src), key=lambda r: r["position"])
              for src in sources}
    order = ["input"]  # all sources' steps on one axis: a step only some sources run goes after its predecessor
    for steps in chains.values():
        prev = "input"
        for r in steps:
            if r["step"] not in order:
                order.insert(order.index(prev) + 1, r["step"])
            prev = r["step"]
    for src, steps in chains.items():
        if not steps:
            continue
        xs = [0] + [order.index(r["step"]) for r in steps]
        ys = [steps[0]["records_in"]] + [r["records_out"] for r in steps]
        ax1.plot(xs, ys, marker="o", markersize=4, label=src, color=src_colour[src])
    ax1.set_xticks(range(len(order)), order, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("records remaining")
    ax1.set_title("Records through the pipeline")
    ax1.grid(alpha=0.3)
    toks = {s: t["total_tokens"] for s, t in main_pool(rows).items()}
    ax2.barh(sources, [toks.get(s, 0) for s in sources], color=[src_colour[s] for s in sources])
    ax2.invert_yaxis()
    ax2.set_xlim(0, max([*toks.values(), 1]) * 1.02)
    token_axis(ax2.xaxis)
    ax2.set_xlabel("tokens in the shards")
    ax2.set_title("Tokens per source")
    fig.tight_layout(rect=(0, legend_h / (plot_h + legend_h), 1, 1))
    source_legend(fig, stack_order(rows), src_colour)   # the legend in the same order in every plot
    right = ax2.get_xlim()[1]
    for i, s in enumerate(sources):   # value beside the bar when there is room, else inside its end
        n = toks.get(s, 0)
        t = ax2.text(n, i, f" {n:,}", va="center", ha="left", fontsize=8)
        if not fits(ax2, t, 0, right, i - 0.5, i + 0.5, pad=0):
            t.remove()
            t = ax2.text(n, i, f"{n:,} ", va="center", ha="right", fontsize=8, color=ink(src_colour[s]))
            if not fits(ax2, t, 0, n, i - 0.5, i + 0.5, pad=0):
                t.remove()
    return save(fig, path)


def composition_plot(rows: dict, path: Path) -> Path:
    """Effective tokens of each stage, stacked by source (grouped by category), on one token axis."""
    plt = pyplot()
    src_colour, _ = report_colours(rows)
    stages = [s["stage"] for s in rows["stages"]]
    sources = stack_order(rows)
    eff = {(m["stage"], m["source"]): m["effective_tokens"] for m in rows["mixture"]}
    legend_h = 0.35 + 0.22 * _legend_rows(len(sources))
    height = 1.0 + 0.6 * len(stages)
    fig, ax = plt.subplots(figsize=(10, height + legend_h))
    left = [0] * len(stages)
    spans = []
    for src in sources:
        vals = [eff.get((st, src), 0) for st in stages]
        ax.barh(stages, vals, left=left, color=src_colour[src], edgecolor="white", linewidth=0.6, height=0.7)
        spans += [(src, j, left[j], v) for j, v in enumerate(vals) if v]
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlim(0, max([*left, 1]) * 1.02)
    token_axis(ax.xaxis)
    ax.set_xlabel("effective tokens (epochs applied)")
    ax.set_title("Composition of each stage")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout(rect=(0, legend_h / (height + legend_h), 1, 1))
    source_legend(fig, sources, src_colour)
    for src, j, x, v in spans:
        label_in_box(ax, x, x + v, j - 0.35, j + 0.35, [f"{src}\n{v:,}", f"{src}\n{short_tokens(v)}",
                                                         short_tokens(v)], src_colour[src])
    return save(fig, path)


def quality_plot(rows: dict, path: Path, most: int = 12) -> Path:
    """Score histogram per pool and language (kept stacked under dropped), the threshold as a vertical
    line; the `most` largest groups, one panel each."""
    plt = pyplot()
    kept_colour, dropped_colour, line_colour = "#1f77b4", "#c2c2c2", "#d62728"   # blue/grey: no red-green pair
    groups = sorted(rows["quality_thresholds"], key=lambda t: (-t["documents"], t["pool"], t["language"]))[:most]
    cols = min(len(groups), 3)
    lines = -(-len(groups) // cols)
    fig, axes = plt.subplots(lines, cols, figsize=(4.2 * cols, 2.9 * lines), squeeze=False, layout="constrained")
    for ax, t in zip(axes.flat, groups):
        bins = [h for h in rows["quality_histogram"] if h["pool"] == t["pool"] and h["language"] == t["language"]]
        left, width = [h["lower"] for h in bins], [h["upper"] - h["lower"] for h in bins]
        kept = [h["kept"] for h in bins]
        ax.bar(left, kept, width, align="edge", color=kept_colour, label="kept")
        ax.bar(left, [h["documents"] - h["kept"] for h in bins], width, bottom=kept, align="edge",
               color=dropped_colour, label="dropped")
        ax.axvline(t["threshold"], color=line_colour, linewidth=1.2, label=f"threshold {t['threshold']:.4g}")
        pool = "" if t["pool"] == "default" else f"{t['pool']}: "
        ax.set_title(f"{pool}{t['language']}: kept {t['kept']:,} of {t['documents']:,}", fontsize=9)
        ax.set_xlim(0, 1.01)   # fastText probabilities reach 1.00001
        ax.set_xlabel(f"meta.{t['field']}", fontsize=8)
        ax.set_ylabel("documents", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    return save(fig, path)
