"""The ablation report of `curate ablate` in the shape of Soofi S Table 13: candidates as rows, per signal
the terminal value and its rank, the terminal average rank (last checkpoint only) and R_all (mean over
the learning curve); the best value of each column in bold, the second-best underlined (Markdown and
HTML) or marked `*` / `+` in the terminal. Plots: average rank against training tokens per candidate
(the learning curve of the criterion) and the training loss."""
from __future__ import annotations

import html
from pathlib import Path

from curation.mixture.ranks import best_two
from curation.report.plots import pyplot, save, token_axis


def _label(sig: dict) -> str:
    return f"{sig['language'].upper()} {'bpb' if sig['kind'] == 'bpb' else 'acc. (%)'}"


def _value(sig: dict, v: float) -> str:
    return f"{v:.4f}" if sig["kind"] == "bpb" else f"{100 * v:.2f}"


def table(summary: dict) -> tuple[list[str], list[list[tuple[str, str]]]]:
    """Header and rows; each cell is (text, mark) with mark `best`, `second` or ``."""
    sigs, rows = summary["signals"], summary["candidates"]
    marks = {}
    for sig in sigs:
        marks[sig["name"]] = best_two({r["candidate"]: r["signals"][sig["name"]] for r in rows}, sig["higher_is_better"])
    marks["R_T"] = best_two({r["candidate"]: r["average_rank"] for r in rows}, False)
    marks["R_all"] = best_two({r["candidate"]: r["average_rank_all"] for r in rows}, False)

    def mark(col, cand):
        first, second = marks[col]
        return "best" if cand in first else "second" if cand in second else ""

    head = ["candidate", *[f"{_label(s)} (rank)" for s in sigs], "R_T", "R_all"]
    out = []
    for r in rows:
        c = r["candidate"]
        out.append([(c, "")]
                   + [(f"{_value(s, r['signals'][s['name']])} ({r['ranks'][s['name']]:g})", mark(s["name"], c))
                      for s in sigs]
                   + [(f"{r['average_rank']:.2f}", mark("R_T", c)), (f"{r['average_rank_all']:.2f}", mark("R_all", c))])
    return head, out


def terminal_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    head, rows = table(summary)
    sign = {"best": " *", "second": " +", "": ""}
    return head, [[t + sign[m] for t, m in row] for row in rows]


def caption(summary: dict) -> str:
    return (f"Proxy mixture ablation of stage {summary['stage']} at the terminal checkpoint "
            f"({summary['terminal_tokens']:,} training tokens, step {summary['steps']}). bpb: suite-level bits "
            f"per byte (lower is better); acc.: normalized rank-choice accuracy in percent (higher is better). "
            f"(rank) per signal, ties share the mean of their places. R_T: average rank over these terminal "
            f"signals, which orders the rows; R_all: mean of the average ranks over all "
            f"{len(summary['checkpoints'])} checkpoints. Best values in bold, second-best underlined.")


def markdown(summary: dict) -> str:
    head, rows = table(summary)
    fmt = {"best": "**{}**", "second": "<u>{}</u>", "": "{}"}
    lines = [f"# Mixture ablation: stage {summary['stage']}", "", caption(summary), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(fmt[m].format(t) for t, m in row) + " |" for row in rows]
    lines += ["", "Average rank per checkpoint (the learning curve, `rank_curve.png`):", "",
              "| tokens | " + " | ".join(r["candidate"] for r in summary["candidates"]) + " |",
              "|" + "---|" * (1 + len(summary["candidates"]))]
    lines += [f"| {cp['tokens']:,} | " + " | ".join(f"{cp['average_rank'][r['candidate']]:.2f}"
                                                     for r in summary["candidates"]) + " |"
              for cp in summary["checkpoints"]]
    return "\n".join(lines) + "\n"


def _html(summary: dict) -> str:
    head, rows = table(summary)
    fmt = {"best": "<b>{}</b>", "second": "<u>{}</u>", "": "{}"}
    cells = "".join("<tr>" + "".join(f"<td>{fmt[m].format(html.escape(t))}</td>" for t, m in row) + "</tr>"
                    for row in rows)
    sets = ", ".join(f"{s['name']} = {' + '.join(s['sets'])}" for s in summary["signals"])
    return ("<!doctype html><meta charset=utf-8><title>Mixture ablation</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}"
            "table{border-collapse:collapse}</style>"
            f"<h1>Mixture ablation: stage {html.escape(summary['stage'])}</h1>"
            f"<p>{html.escape(caption(summary))} Every candidate trained the same proxy model from seed "
            f"{summary['seed']}; held-out documents were withheld from every candidate. Signals: {html.escape(sets)}.</p>"
            f"<table><tr>{''.join(f'<th>{html.escape(h)}</th>' for h in head)}</tr>{cells}</table>"
            "<h2>Average rank over training</h2><img src=rank_curve.png alt='average rank against training tokens'>"
            "<h2>Training loss</h2><img src=curves.png alt='training loss curves'>")


def rank_curve_plot(summary: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in summary["candidates"]:
        tokens, ranks = zip(*r["rank_curve"])
        ax.plot(tokens, ranks, marker="o", label=r["candidate"])
    ax.set_xlabel("training tokens")
    ax.set_ylabel("average rank (1 = best)")
    ax.invert_yaxis()
    token_axis(ax.xaxis)
    ax.set_title(f"Stage {summary['stage']}: average rank over {len(summary['signals'])} signals")
    ax.legend()
    fig.tight_layout()
    return save(fig, path)


def loss_plot(summary: dict, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in summary["candidates"]:
        steps, loss = zip(*r["curve"])
        ax.plot(steps, loss, label=r["candidate"])
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats, stage targets)")
    ax.set_title(f"Proxy training on stage {summary['stage']}: learning curves")
    ax.legend()
    fig.tight_layout()
    return save(fig, path)


def write_report(summary: dict, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rank_curve_plot(summary, folder / "rank_curve.png")
    loss_plot(summary, folder / "curves.png")
    (folder / "ablation.md").write_text(markdown(summary))
    path = folder / "ablation.html"
    path.write_text(_html(summary))
    return path
