"""The report's compliance part: licences and provenance per source (what an auditor asks for first),
then what acquisition, the robots.txt opt-out and PII replacement did.

A source's revision is what is known of the exact data it read, labelled by where it comes from:
the recipe's `revision` (or the Hugging Face snapshot it was acquired from), else the sha256 of what
acquisition fetched, else the digest of its input files: the sha256 of their `sha256sum` lines
(`<sha256>  <path>`, sorted by path), which `cd <recipe folder> && sha256sum <files> | sha256sum`
reproduces (paths as in the ledger table `inputs`, files in C-locale order).
"""
from __future__ import annotations

import hashlib

from curation.ledger.pools import main_pool
from curation.report.table import Cell, Section, table
from curation.steps.compliance.licences import UNKNOWN_ADMITTED

GROUP = "Compliance"
SHORT = 12   # hex digits shown of a digest or commit; the full value is the cell's tooltip and in the ledger


def inputs_digest(inputs: list[dict]) -> str:
    """sha256 over the `sha256sum` lines of a source's input files, sorted by path."""
    lines = "".join(f"{r['sha256']}  {r['path']}\n" for r in sorted(inputs, key=lambda r: r["path"].encode()))
    return hashlib.sha256(lines.encode()).hexdigest()


def revision_cell(src: dict, inputs: list[dict]) -> Cell:
    """What is known of the exact data a source read, labelled by where it comes from."""
    if src.get("revision"):
        rev = src["revision"]
        return Cell(f"`{rev[:SHORT]}`" if len(rev) > SHORT + 4 else f"`{rev}`", title=rev)
    if src.get("fetched_sha256"):
        return Cell(f"fetched sha256 `{src['fetched_sha256'][:SHORT]}`", title=src["fetched_sha256"])
    if inputs:
        digest = inputs_digest(inputs)
        n = len(inputs)
        return Cell(f"no revision; {n} input file{'s' if n != 1 else ''} sha256 `{digest[:SHORT]}`", title=digest)
    return Cell("no revision; no input files")


def _decision(text: str) -> Cell:
    return Cell(text, "warn") if UNKNOWN_ADMITTED in text else Cell(text)


def _licences(rows: dict) -> Section:
    tokens = {s: t["total_tokens"] for s, t in main_pool(rows).items()}
    removed: dict[str, int] = {}
    for d in rows.get("drops", []):
        if d["step"] == "licence":
            removed[d["source"]] = removed.get(d["source"], 0) + d["records"]
    inputs: dict[str, list[dict]] = {}
    for r in rows.get("inputs", []):
        inputs.setdefault(r["source"], []).append(r)
    body = [[s["source"], revision_cell(s, inputs.get(s["source"], [])), s["licence"], s["licence_class"],
             _decision(s["licence_decision"]), removed.get(s["source"], 0), s["pii"], s["optout_mode"],
             tokens.get(s["source"], 0)] for s in rows["sources"]]
    admitted = any(UNKNOWN_ADMITTED in s["licence_decision"] for s in rows["sources"])
    note = ("Per source: what is known of the exact data read (the declared revision; else the sha256 of what "
            "was fetched; else the digest of the input files, `sha256sum` of the files listed in the ledger "
            "table `inputs`, sorted by path, piped into `sha256sum`), the declared licence, its class, the "
            "policy's decision (records removed by it), PII handling, the opt-out mode, and the tokens that "
            "went in. Full digests: ledger tables `sources` and `inputs`.")
    if admitted:
        note += " Decisions in red admit records of unknown licence (`licence_policy.admit_unknown`)."
    return Section(GROUP, "Licences and provenance", note,
                   table(["source", "revision", "licence", "class", "decision", "removed", "PII", "opt-out",
                          "tokens"], body))


def _acquisition(rows: dict) -> list[Section]:
    if not rows.get("acquisition"):
        return []
    per: dict[str, dict] = {}
    for a in rows["acquisition"]:
        p = per.setdefault(a["source"], {"kind": a["kind"], "ok": 0, "refused": 0, "failed": 0, "reasons": []})
        p[a["outcome"]] = p.get(a["outcome"], 0) + a["items"]
        if a["reason"]:
            p["reasons"].append(f"{a['reason']} {a['items']}")
    body = []
    for s, p in per.items():
        n = p["ok"] + p["refused"] + p["failed"] + p.get("skipped", 0)
        body.append([s, p["kind"], n, p["ok"], p["refused"], p["failed"], f"{100 * p['refused'] / max(n, 1):.1f}%",
                     ", ".join(p["reasons"]) or "—"])
    return [Section(GROUP, "Acquisition", "What the `acquire:` sources fetched or unpacked into `raw/`. Refused: "
                    "the network guard denied the destination (threat feeds, scheme, resolution) before any "
                    "connection; failed: errors left after bounded retries. sha256 of what was fetched: ledger "
                    "`sources.fetched_sha256`.",
                    table(["source", "kind", "items", "ok", "refused", "failed", "rejected share", "reasons"], body))]


def _optout(rows: dict) -> list[Section]:
    if not rows.get("optout"):
        return []
    body = [[o["source"], o["records"], o["with_url"], o["removed"], f"{100 * o['removed'] / max(o['records'], 1):.1f}%",
             o["allowlist_would_remove"], f"{100 * o['allowlist_would_remove'] / max(o['records'], 1):.1f}%"]
            for o in rows["optout"]]
    return [Section(GROUP, "robots.txt opt-out", "Records removed because their domain opts out of an AI crawler in "
                    "any snapshot (the exclusion rule), next to what a strict allow-list (only domains whose every "
                    "robots.txt allows every listed crawler) would remove.",
                    table(["source", "records", "with a URL", "removed", "removed share", "allow-list would remove",
                           "allow-list share"], body))]


def _pii(rows: dict) -> list[Section]:
    if not rows.get("pii"):
        return []
    return [Section(GROUP, "PII replaced", "Occurrences replaced per source and kind (the text keeps a placeholder).",
                    table(["source", "kind", "replaced"], [[p["source"], p["kind"], p["replaced"]] for p in rows["pii"]]))]


def compliance_sections(rows: dict) -> list[Section]:
    return [_licences(rows), *_acquisition(rows), *_optout(rows), *_pii(rows)]
