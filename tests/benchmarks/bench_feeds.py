"""Threat feeds: what each real feed in ../shared/data/blocklists reads as (format detected, entries,
skipped lines, time), and the RPZ reader beside dnspython's zone parser (the field's reference) on
the real URLhaus RPZ zone: same triggers?, time, and what each does with one damaged line.

Usage: .venv/bin/python tests/benchmarks/bench_feeds.py [--blocklists DIR] → reports/benchmarks/feeds.md
(dnspython is optional: `pip install dnspython` for the side-by-side rows.)
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
RPZ = "urlhaus/urlhaus-filter-rpz.conf"


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocklists", type=Path, default=REPO.parent / "shared" / "data" / "blocklists")
    args = ap.parse_args()
    if not args.blocklists.is_dir():
        print(f"skipped: {args.blocklists} is absent (the benchmark needs ../shared/data)")
        return
    from curation.acquire.feeds import read_feed
    from curation.errors import InputError

    lines = ["# Threat feeds", "", (f"Machine: {platform.machine()}, Python {platform.python_version()}. "
                                    f"Command: `python tests/benchmarks/bench_feeds.py`."), "",
             "| file | bytes | format (detected) | networks | hosts | URL prefixes | rule lines | skipped | read s |",
             "|---|---:|---|---:|---:|---:|---:|---|---:|"]
    for path in sorted(p for p in args.blocklists.rglob("*") if p.is_file() and p.suffix != ".md"):
        name = str(path.relative_to(args.blocklists))
        feed, seconds = _timed(lambda name=name, path=path: read_feed(name, path.read_bytes()))
        e = feed.entries
        fmt = feed.format + (f" ({feed.compression})" if feed.compression else "")
        skipped = ", ".join(f"{r} {n}" for r, n in sorted(e.skipped.items())) or "-"
        lines.append(f"| {name} | {feed.bytes} | {fmt} | {len(e.networks)} | {len(e.hosts)} | {len(e.prefixes)} | "
                     f"{e.rule_lines} | {skipped} | {seconds:.2f} |")

    text = (args.blocklists / RPZ).read_text()
    damaged = text.replace(" CNAME .\n", " CNAME\n", 1)
    ours, ours_s = _timed(lambda: read_feed("rpz", text.encode()).entries.hosts)
    try:
        hurt = read_feed("rpz", damaged.encode()).entries
        ours_damaged = f"reads {len(hurt.hosts)} triggers (skipped: {dict(hurt.skipped) or 'none'})"
    except InputError as err:
        ours_damaged = f"refused: {err}"
    lines += ["", f"## RPZ: `{RPZ}` beside dnspython", "",
              "| reader | triggers | same as the other | seconds | one damaged line |", "|---|---:|---|---:|---|"]
    try:
        import dns.zone
    except ImportError:
        lines.append(f"| curate | {len(ours)} | (dnspython not installed) | {ours_s:.2f} | {ours_damaged} |")
    else:
        def dnspython(t):
            zone = dns.zone.from_text(t, origin="rpz.invalid.", relativize=True, check_origin=False)
            return {str(n).lower().removeprefix("*.") for n in zone.nodes if str(n) != "@"}
        ref, ref_s = _timed(lambda: dnspython(text))
        try:
            ref_damaged = f"reads {len(dnspython(damaged))} triggers"
        except dns.exception.DNSException as err:
            ref_damaged = f"whole zone refused ({type(err).__name__}: {err})"
        lines.append(f"| curate (`feed_rules.parse_rpz`) | {len(ours)} | {ours == ref} | {ours_s:.2f} | {ours_damaged} |")
        lines.append(f"| dnspython {dns.version.version} `zone.from_text` | {len(ref)} | {ours == ref} | {ref_s:.2f} | "
                     f"{ref_damaged} |")
    lines += ["", ("A trigger is the owner name minus the zone origin; `*.name` counts as `name` for both (the guard "
              "blocks a host with its subdomains). dnspython needs the origin given (the file has no `$ORIGIN`) and "
              "refuses the whole zone on one bad line; curate reads line by line (a CNAME without target still "
              "blocks its trigger: fail closed), counts lines it cannot read and judges the feed by the share it "
              "can read (`curation/acquire/feeds.py`).")]
    out = REPO / "reports" / "benchmarks" / "feeds.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
