"""Peak memory of a run that keeps one large record (issue 22.7): 1, 10 and 30 MB JSON lines (under the
32 MiB `max_record_bytes`) through `curate run` with the local executor, every process of the run's
tree sampled (`tests/proctree.py`). Each size runs in a fresh output folder; the baseline is the same
recipe over small records only, so the figure that matters is the growth over it.

    nice -n 5 .venv/bin/python tests/benchmarks/bench_memory.py [--sizes 1,10,30] [--code DIR] [--pipeline plain|filters]

`--code DIR` runs another checkout's code (its `curation` package) for a before/after comparison.
`plain` is read -> normalize -> tokenize (no filters); `filters` adds the demo's English filters
that see the whole text (length, datatrove's Gopher and C4 and FineWeb filters). The record's text is
real English (../shared/data/web_text's news articles repeated; the demo corpus when absent).
Writes reports/benchmarks/memory.json (and prints a Markdown table).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from tests.proctree import run_sampled  # noqa: E402

NEWS = REPO.parent / "shared" / "data" / "web_text" / "news_articles_en.jsonl.gz"
FILTERS = ("[{type: length, min_words: 50}, {type: gopher_repetition}, {type: gopher_quality}, "
           "{type: c4_quality, filter_no_terminal_punct: false}, {type: fineweb_quality}]")


def source_text() -> tuple[str, str]:
    if NEWS.is_file():
        path = NEWS
    else:
        path = REPO / "recipes" / "demo" / "corpus" / "web_en" / "part-00000.jsonl.gz"
    texts = [json.loads(line)["text"] for line in gzip.open(path, "rt", encoding="utf-8")]
    return "\n\n".join(texts), str(path.relative_to(REPO.parent) if NEWS.is_file() else path.relative_to(REPO))


def record_of(text: str, size: int) -> str:
    """A JSON line whose text is `size` bytes of UTF-8 (whole characters)."""
    out, n = [], 0
    while n < size:
        out.append(text)
        n += len(text.encode())
    return (("\n\n".join(out)).encode()[:size]).decode("utf-8", "ignore")


def run(tmp: Path, size_mb: float, text: str, pipeline: str, code: Path) -> dict:
    folder = tmp / f"r{size_mb}"
    folder.mkdir()
    small = [json.dumps({"id": f"s{i}", "text": text[i * 4000:(i + 1) * 4000]}) for i in range(20)]
    lines = small[:10] + ([json.dumps({"id": "big", "text": record_of(text, int(size_mb * 2**20))})] if size_mb else [])
    (folder / "in.jsonl").write_text("\n".join(lines + small[10:]) + "\n")
    del lines
    (folder / "r.yaml").write_text(
        f"name: mem\nvocabulary: {REPO / 'tokenizers' / 'curate-demo-v1.yaml'}\nsources:\n  - name: big\n"
        f"    license: CC0-1.0\n    input: {{paths: [{folder / 'in.jsonl'}], id_field: id}}\n"
        f"    filters: {FILTERS if pipeline == 'filters' else '[]'}\n")
    env = {**os.environ, "PYTHONPATH": str(code)}
    rc, peaks = run_sampled([sys.executable, "-m", "curation.commands.cli", "run", str(folder / "r.yaml"),
                             "--out", str(folder / "out"), "--executor", "local", "--quiet"], env=env, cwd=code)
    if rc != 0:
        raise SystemExit(f"run of {size_mb} MB failed ({rc}):\n{run_sampled.output[-3000:]}")
    worst = max(peaks.values())
    return {"record_mb": size_mb, "processes": len(peaks), "peak_mib": round(worst / 2**20, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,30")
    ap.add_argument("--code", type=Path, default=REPO)
    ap.add_argument("--pipeline", choices=["plain", "filters"], default="plain")
    ap.add_argument("--output", type=Path, default=REPO / "reports" / "benchmarks" / "memory.json")
    args = ap.parse_args()
    text, corpus = source_text()
    sizes = [float(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        base = run(Path(tmp), 0, text, args.pipeline, args.code)
        rows = []
        for size in sizes:
            r = run(Path(tmp), size, text, args.pipeline, args.code)
            r["growth_mib"] = round(r["peak_mib"] - base["peak_mib"], 1)
            r["growth_per_record"] = round(r["growth_mib"] / size, 2)
            rows.append(r)
            print(f"{size:g} MB: peak {r['peak_mib']} MiB, growth {r['growth_mib']} MiB "
                  f"({r['growth_per_record']}x the record)", flush=True)
    result = {"command": " ".join(sys.argv), "code": str(args.code), "pipeline": args.pipeline, "corpus": corpus,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
              "baseline_peak_mib": base["peak_mib"], "rows": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(args.output.read_text()) if args.output.is_file() else []
    runs = [r for r in runs if (r["code"], r["pipeline"]) != (result["code"], result["pipeline"])] + [result]
    args.output.write_text(json.dumps(runs, indent=1) + "\n")
    print("| record | peak (largest process) | growth over small records | growth / record |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['record_mb']:g} MB | {r['peak_mib']} MiB | {r['growth_mib']} MiB | {r['growth_per_record']}x |")


if __name__ == "__main__":
    main()
