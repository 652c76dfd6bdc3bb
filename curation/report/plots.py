"""Plots for the run report (matplotlib, Agg backend, no timestamps in the PNG metadata)."""
from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    _pyplot().close(fig)
    return path


def funnel_plot(rows: dict, path: Path) -> Path:
    """Per source: records left after each step (a line per source), and kept tokens per source."""
    plt = _pyplot()

    sources = [s["source"] for s in rows["sources"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    colors = {src: f"C{i}" for i, src in enumerate(sources)}
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
        xs = [0] + [order.index(r["step"]) for r in steps]
        ys = [steps[0]["records_in"]] + [r["records_out"] for r in steps]
        ax1.plot(xs, ys, marker="o", label=src, color=colors[src])
    ax1.set_xticks(range(len(order)), order, rotation=35, ha="right", fontsize=8)
    ax1.set_ylabel("records remaining")
    ax1.set_title("Records through the pipeline")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    toks = {t["source"]: t["total_tokens"] for t in rows["tokens"]}
    ax2.barh(sources, [toks[s] for s in sources], color=[colors[s] for s in sources])
    ax2.invert_yaxis()
    for i, s in enumerate(sources):
        ax2.text(toks[s], i, f" {toks[s]:,}", va="center", fontsize=8)
    ax2.set_xlabel("tokens in shards")
    ax2.set_title("Tokens per source")
    ax2.margins(x=0.35)
    return _save(fig, path)


def composition_plot(rows: dict, path: Path) -> Path:
    """Effective tokens of each stage, stacked by source and coloured by category."""
    plt = _pyplot()

    stages = [s["stage"] for s in rows["stages"]]
    sources = [s["source"] for s in rows["sources"]]
    eff = {(m["stage"], m["source"]): m["effective_tokens"] for m in rows["mixture"]}
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.7 * len(stages)))
    left = [0] * len(stages)
    for i, src in enumerate(sources):
        vals = [eff.get((st, src), 0) for st in stages]
        ax.barh(stages, vals, left=left, color=f"C{i}", label=src)
        for j, v in enumerate(vals):
            if v:
                ax.text(left[j] + v / 2, j, f"{src}\n{v:,}", ha="center", va="center", fontsize=7, color="white")
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("effective tokens")
    ax.set_title("Composition by stage")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def flow_plot(rows: dict, path: Path) -> Path:
    """A mixture flow diagram: each stage a column of category shares, bands joining a category across stages."""
    plt = _pyplot()

    stages = [s["stage"] for s in rows["stages"]]
    categories = list(dict.fromkeys(s["category"] for s in rows["sources"]))
    share = {(st, c): 0.0 for st in stages for c in categories}
    for m in rows["mixture"]:
        share[(m["stage"], m["category"])] += m["share"]
    fig, ax = plt.subplots(figsize=(2.2 + 2.4 * len(stages), 4.2))
    width, gap = 0.35, 0.01
    palette = plt.get_cmap("Set2")  # categories get their own colours, distinct from the per-source ones
    spans: dict[tuple[str, str], tuple[float, float]] = {}
    for x, st in enumerate(stages):
        bottom = 0.0
        for i, c in enumerate(categories):
            h = share[(st, c)]
            ax.bar(x, h, width, bottom=bottom, color=palette(i % 8), edgecolor="white")
            if h > 0.04:
                ax.text(x, bottom + h / 2, f"{c}\n{100 * h:.1f}%", ha="center", va="center", fontsize=7)
            spans[(st, c)] = (bottom, bottom + h)
            bottom += h + gap
    for x in range(len(stages) - 1):
        for i, c in enumerate(categories):
            (a0, a1), (b0, b1) = spans[(stages[x], c)], spans[(stages[x + 1], c)]
            if a1 - a0 <= 0 and b1 - b0 <= 0:
                continue
            xs = [x + width / 2, x + 1 - width / 2]
            ax.fill_between(xs, [a0, b0], [a1, b1], color=palette(i % 8), alpha=0.35, linewidth=0)
    ax.set_xticks(range(len(stages)), [f"{st}\n{s['budget_tokens']:,} tokens" for st, s in
                                       zip(stages, rows["stages"])], fontsize=8)
    ax.set_ylabel("share of the stage's effective tokens")
    ax.set_title("Mixture flow across stages (by category)")
    ax.set_ylim(0, 1 + gap * len(categories))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _save(fig, path)


def quality_plot(rows: dict, path: Path, most: int = 12) -> Path:
    """Score histogram per pool and language (kept stacked on dropped), the threshold as a vertical line;
    the `most` largest groups, one panel each."""
    plt = _pyplot()

    groups = sorted(rows["quality_thresholds"], key=lambda t: (-t["documents"], t["pool"], t["language"]))[:most]
    cols = min(len(groups), 3)
    lines = -(-len(groups) // cols)
    fig, axes = plt.subplots(lines, cols, figsize=(4.2 * cols, 2.9 * lines), squeeze=False)
    for ax, t in zip(axes.flat, groups):
        bins = [h for h in rows["quality_histogram"] if h["pool"] == t["pool"] and h["language"] == t["language"]]
        left = [h["lower"] for h in bins]
        width = [h["upper"] - h["lower"] for h in bins]
        kept = [h["kept"] for h in bins]
        ax.bar(left, kept, width, align="edge", color="C2", label="kept")
        ax.bar(left, [h["documents"] - h["kept"] for h in bins], width, bottom=kept, align="edge", color="0.75",
               label="dropped")
        ax.axvline(t["threshold"], color="C3", linewidth=1.2, label=f"threshold {t['threshold']:.4g}")
        pool = "" if t["pool"] == "default" else f"{t['pool']}: "
        ax.set_title(f"{pool}{t['language']}: kept {t['kept']:,} of {t['documents']:,}", fontsize=9)
        ax.set_xlim(0, 1.01)   # fastText probabilities reach 1.00001
        ax.set_xlabel(f"meta.{t['field']}", fontsize=8)
        ax.set_ylabel("documents", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    fig.suptitle("Quality scores per language, selection threshold marked", fontsize=10)
    return _save(fig, path)
