"""The run report: Markdown and HTML with the same tables, plus a funnel plot.

Sections: run summary, per-source summary, step-by-step counts, drop and quarantine
reasons, tokens by modality. Everything comes from the ledger rows of this run.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from curation.core.atomic import atomic_write_bytes
from curation.report.plots import composition_plot, flow_plot, funnel_plot


def _table(header: list[str], body: list[list]) -> tuple[str, str]:
    def fmt(v):
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in body]
    h = ["<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr></thead><tbody>"]
    for row in body:
        cells = "".join(f"<td class='{'num' if isinstance(c, (int, float)) else ''}'>{html.escape(fmt(c))}</td>"
                        for c in row)
        h.append(f"<tr>{cells}</tr>")
    h.append("</tbody></table>")
    return "\n".join(md), "\n".join(h)


def _inline(text: str) -> str:
    """Escape for HTML and render `code` spans as in the Markdown version."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    tokens = {t["source"]: t for t in rows["tokens"]}
    first = {r["source"]: r["records_in"] for r in rows["steps"] if r["position"] == 0}
    total_tokens = sum(t["total_tokens"] for t in rows["tokens"]) or 1
    summary = []
    for s in rows["sources"]:
        t = tokens[s["source"]]
        summary.append([s["source"], s["category"], s["input_files"], first[s["source"]], t["documents"],
                        f"{100 * t['documents'] / max(first[s['source']], 1):.1f}%", t["total_tokens"],
                        f"{100 * t['total_tokens'] / total_tokens:.1f}%", s["weight"]])
    steps = [[r["source"], r["step"], r["records_in"], r["records_out"], r["dropped"], r["quarantined"]]
             for r in rows["steps"]]
    reasons = [[d["source"], d["step"], d["reason"], "dropped", d["records"]] for d in rows.get("drops", [])]
    reasons += [[q["source"], q["step"], q["reason"], "quarantined", q["records"]]
                for q in rows.get("quarantine", [])]
    order = {s["source"]: i for i, s in enumerate(rows["sources"])}
    reasons.sort(key=lambda r: (order[r[0]], -r[4], r[1], r[2]))
    toks = [[t["source"], t["documents"], t["text_tokens"], t["image_tokens"], t["audio_tokens"],
             t["total_tokens"]] for t in rows["tokens"]]
    mixture = _mixture_sections(rows)
    return [
        *mixture,
        *_compliance_sections(rows),
        *_decont_sections(rows),
        *_cluster_sections(rows),
        *_image_cluster_sections(rows),
        *_modality_sections(rows),
        *_consumed_sections(rows),
        ("Sources", "Records read, documents kept and their tokens (counted from the shards).",
         _table(["source", "category", "files", "records read", "documents kept", "kept", "tokens",
                 "token share", "weight"], summary)),
        ("Steps", "Per step: in = out + dropped + quarantined (checked for every shard).",
         _table(["source", "step", "in", "out", "dropped", "quarantined"], steps)),
        ("Why records were removed", "Drop and quarantine reasons; quarantined records are in `quarantine/`.",
         _table(["source", "step", "reason", "kind", "records"], reasons)),
        ("Tokens by modality", f"In the vocabulary `{rows['runs'][0]['vocabulary']}`.",
         _table(["source", "documents", "text", "image", "audio", "total"], toks)),
    ]


def _fmt_tokens(n: int) -> str:
    return f"{n:,}"


def _decont_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    """Apertus 1.5 Table H.2: per source and benchmark, original, removed, final, % removed."""
    if not rows.get("benchmarks"):
        return []
    bench = [[b["benchmark"], b["items"], b["unindexable"], b["fields"], b["sha256"][:16]] for b in rows["benchmarks"]]
    table = [[d["source"], d["benchmark"], d["original"], d["flagged"], d["readmitted"], d["removed"], d["final"],
              f"{d['pct_removed']:.2f}%"] for d in rows.get("decontamination", [])]
    return [
        ("Benchmarks", "Evaluation sets decontaminated against (local files, fingerprinted). Unindexable: items "
         "shorter than the n-gram size, which cannot be matched.",
         _table(["benchmark", "items", "unindexable", "fields", "sha256"], bench)),
        ("Decontamination", "Per source and benchmark, as Apertus 1.5 Table H.2. Original: documents reaching "
         "the step; flagged/re-admitted: the review (`review/decontamination.html`, flagged samples next to the "
         "matched item); removed: by sample id only.",
         _table(["source", "benchmark", "original", "flagged", "re-admitted", "removed", "final", "% removed"],
                table or [["—", "no sample flagged", "", "", "", "", "", ""]])),
    ]


def _compliance_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    """The legal table an auditor asks for first, then what the opt-out and PII steps did."""
    tokens = {t["source"]: t["total_tokens"] for t in rows["tokens"]}
    drops = {}
    for d in rows.get("drops", []):
        if d["step"] in ("licence", "robots_optout"):
            drops[(d["source"], d["step"])] = drops.get((d["source"], d["step"]), 0) + d["records"]
    legal = [[s["source"], s["revision"] or "—", s["license"], s["license_class"], s["licence_decision"],
              drops.get((s["source"], "licence"), 0), s["pii"], s["optout_mode"], tokens[s["source"]]]
             for s in rows["sources"]]
    out = [("Licences and provenance", "Per source: the declared licence, its class, the policy's decision "
            "(records removed by it), PII handling, the opt-out mode, and the tokens that went in.",
            _table(["source", "revision", "licence", "class", "decision", "removed", "PII", "opt-out", "tokens"],
                   legal))]
    if rows.get("acquisition"):
        per: dict[str, dict] = {}
        for a in rows["acquisition"]:
            p = per.setdefault(a["source"], {"kind": a["kind"], "ok": 0, "refused": 0, "failed": 0, "reasons": []})
            p[a["outcome"]] = p.get(a["outcome"], 0) + a["items"]
            if a["reason"]:
                p["reasons"].append(f"{a['reason']} {a['items']}")
        out.append(("Acquisition", "What the `acquire:` sources fetched or unpacked into `raw/`. Refused: the "
                    "network guard denied the destination (threat feeds, scheme, resolution) before any "
                    "connection; failed: errors left after bounded retries. sha256 of what was fetched: "
                    "ledger `sources.fetched_sha256`.",
                    _table(["source", "kind", "items", "ok", "refused", "failed", "rejected share", "reasons"],
                           [[s, p["kind"], (n := p["ok"] + p["refused"] + p["failed"] + p.get("skipped", 0)),
                             p["ok"], p["refused"], p["failed"], f"{100 * p['refused'] / max(n, 1):.1f}%",
                             ", ".join(p["reasons"]) or "—"] for s, p in per.items()])))
    if rows.get("optout"):
        out.append(("robots.txt opt-out", "Records removed because their domain opts out of an AI crawler in any "
                    "snapshot (the exclusion rule), next to what a strict allow-list (only domains whose every "
                    "robots.txt allows every listed crawler) would remove.",
                    _table(["source", "records", "with a URL", "removed", "removed share", "allow-list would remove",
                            "allow-list share"],
                           [[o["source"], o["records"], o["with_url"], o["removed"],
                             f"{100 * o['removed'] / max(o['records'], 1):.1f}%", o["allowlist_would_remove"],
                             f"{100 * o['allowlist_would_remove'] / max(o['records'], 1):.1f}%"]
                            for o in rows["optout"]])))
    if rows.get("pii"):
        out.append(("PII replaced", "Occurrences replaced per source and kind (the text keeps a placeholder).",
                    _table(["source", "kind", "replaced"], [[p["source"], p["kind"], p["replaced"]]
                                                             for p in rows["pii"]])))
    return out


def _image_cluster_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    clusters = rows.get("image_clusters", [])
    if not clusters:
        return []
    shown = clusters[:50]
    return [("Image near-duplicates", f"{len(clusters)} groups of images within their domain's pHash radius "
             f"(`image_dedup`); each keeps its earliest member. All groups: ledger table `image_clusters`"
             f"{'; the first 50 shown' if len(clusters) > 50 else ''}.",
             _table(["domain", "kept", "size", "members"],
                    [[c["domain"], c["cluster"], c["size"], ", ".join(c["members"])] for c in shown]))]


def _modality_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    out = []
    if rows.get("images"):
        out.append(("Images", "Image samples per source and domain after checks and dedup; image codes and paired "
                    "caption tokens in the shards (end-of-document included); encoder batches. Ledger table `images`.",
                    _table(["source", "category", "domain", "samples", "image tokens", "paired text tokens", "caption",
                            "area (pixels)", "batches"],
                           [[i["source"], i["category"], i["domain"], i["samples"], i["image_tokens"],
                             i["paired_text_tokens"], i["caption"], i["area"], i["batches"]] for i in rows["images"]])))
    if any(c["checked"] or c["regenerated"] for c in rows.get("captions", [])):
        out.append(("Captions", "Captions checked per source (`token_loop`, `repetitive_caption`, `prompt_fragment`, "
                    "...), quarantined by a check (exported to `review/captions_to_regenerate.parquet`), and "
                    "replaced by regenerated captions from `images.recaptions`, then kept or flagged again. "
                    "Ledger table `captions`.",
                    _table(["source", "checked", "flagged", "regenerated", "regenerated, kept", "regenerated, flagged"],
                           [[c["source"], c["checked"], c["flagged"], c["regenerated"], c["regenerated_kept"],
                             c["regenerated_flagged"]] for c in rows["captions"]])))
    if rows.get("audio"):
        out.append(("Audio", "Clips and hours after checks and dedup; codes (40 per second) and the text tokens of "
                    "transcripts and translations in the shards; sequences by kind (interleaved speech-text, "
                    "transcription pairs, translation pairs, audio only) and pool (stage 2 up to 8,192 tokens, long context above); padding of the "
                    "bucketed encoder batches. Ledger table `audio`.",
                    _table(["source", "category", "clips", "hours", "audio tokens", "paired text tokens",
                            "interleaved", "transcription", "translation", "audio only", "stage-2 pool",
                            "long-context pool",
                            "batches", "padding %"],
                           [[a["source"], a["category"], a["clips"], f"{a['hours']:.4f}", a["audio_tokens"],
                             a["paired_text_tokens"], a["interleaved"], a["transcription"], a.get("translation", 0),
                             a["audio_only"],
                             a["stage2_pool"], a["long_context_pool"], a["batches"], a["padding_pct"]]
                            for a in rows["audio"]])))
    if rows.get("audio_clusters"):
        c = rows["audio_clusters"]
        out.append(("Audio duplicates", f"{len(c)} groups of clips with equal 16-bit PCM at 24 kHz (exact) or matching "
                    "spectral fingerprints (near: re-encoded, resampled, trimmed); each keeps its earliest "
                    "member. Ledger table `audio_clusters`.",
                    _table(["kind", "kept", "size", "members", "max bit error rate"],
                           [[x["kind"], x["cluster"], x["size"], ", ".join(x["members"]), f"{x['max_ber']:.3f}"]
                            for x in c[:50]])))
    return out


def _consumed_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    if not rows.get("consumed"):
        return []
    body = []
    for c in sorted(rows["consumed"], key=lambda c: (c["training"], c["stage"], c["source"])):
        pct = 100 * c["total_tokens"] / c["planned_tokens"] if c["planned_tokens"] else 0.0
        body.append([c["training"], c["stage"], c["source"], c["steps"], c["planned_tokens"], c["total_tokens"],
                     f"{pct:.1f}%", c["text_tokens"], c["image_tokens"], c["audio_tokens"], c["repeat_tokens"],
                     c["documents"]])
    return [("Planned vs consumed", "What each training run (`curate train`) actually fed the model, per source, "
             "beside the stage's plan: exact counts written back by the trainer. Ledger table `consumed`.",
             _table(["training", "stage", "source", "steps", "planned", "consumed", "of plan", "text", "image",
                     "audio", "repeated", "documents"], body))]


def _cluster_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    """Near-duplicate clusters: size distribution and which sources share clusters."""
    clusters = rows.get("clusters", [])
    if not clusters:
        return []
    sizes: dict[int, int] = {}
    for c in clusters:
        sizes[c["size"]] = sizes.get(c["size"], 0) + 1
    names = [s["source"] for s in rows["sources"]]
    names += sorted({src for c in clusters for src in c["sources"]} - set(names))  # earlier runs' index
    overlap = {(a, b): 0 for a in names for b in names}
    for c in clusters:
        for a in c["sources"]:
            for b in c["sources"]:
                overlap[(a, b)] += 1
    return [
        ("Near-duplicate clusters", f"{len(clusters)} clusters of MinHash near-duplicates; each keeps its "
         "earliest document (recipe source order, then shard, then position). Members: ledger table `clusters`.",
         _table(["cluster size", "clusters", "documents removed"],
                [[k, v, v * (k - 1)] for k, v in sorted(sizes.items())])),
        ("Cross-source overlap", "Clusters with members in both sources (diagonal: clusters touching the source).",
         _table(["source", *names], [[a, *[overlap[(a, b)] for b in names]] for a in names])),
    ]


def _mixture_sections(rows: dict) -> list[tuple[str, str, tuple[str, str]]]:
    """Per stage: the per-source table in Soofi S Appendix B form, then category shares and flags."""
    out = []
    flags = rows.get("mixture_flags", [])
    modality = {src["source"]: src["modality"] for src in rows["sources"]}
    modal = []
    for st in rows.get("stages", []):
        eff = {"text": 0, "image": 0, "audio": 0}
        for m in rows["mixture"]:
            if m["stage"] == st["stage"]:
                eff[modality[m["source"]]] += m["effective_tokens"]
        total = sum(eff.values()) or 1
        modal.append([st["stage"], *[f"{eff[k]:,} ({100 * eff[k] / total:.1f}%)" for k in eff],
                      f"{sum(eff.values()):,}"])
    if modal:
        out.append(("Token budget per modality and stage",
                    "Effective tokens (repetition included) by the sources' modality, with the within-stage share, "
                    "as in Apertus 1.5 Table 3: paired captions and transcripts count with their modality.",
                    _table(["stage", "text", "image", "audio", "total"], modal)))
    for st in rows.get("stages", []):
        name = st["stage"]
        mix = [m for m in rows["mixture"] if m["stage"] == name]
        body = []
        for m in mix:
            note = m["excluded"] or (f"runs out at token {m['exhausted_at_tokens']:,}"
                                     if m["exhausted_at_tokens"] is not None else "")
            body.append([m["source"], m["category"], m["raw_tokens"], f"{m['epochs']:.2f}", m["effective_tokens"],
                         f"{100 * m['share']:.2f}%", note])
        body.append(["total", "", sum(m["raw_tokens"] for m in mix), "", sum(m["effective_tokens"] for m in mix),
                     "100.00%" if any(m["effective_tokens"] for m in mix) else "0.00%", ""])
        out.append((f"Stage {name}: mixture",
                    f"Budget {st['budget_tokens']:,} tokens at sequence length {st['seq_length']:,}. Raw = tokens in "
                    f"the shards; Ep. = epochs; Eff. = Raw × Ep.; Share = of the stage's effective tokens. "
                    f"Zero-epoch rows are kept.",
                    _table(["source", "category", "raw", "ep.", "eff.", "share", "note"], body)))
        cats: dict[str, list] = {}
        for m in mix:
            c = cats.setdefault(m["category"], [m["category"], 0, 0.0, m["target_share"]])
            c[1] += m["effective_tokens"]
            c[2] += m["share"]
        cbody = [[c[0], c[1], f"{100 * c[2]:.2f}%", "" if c[3] is None else f"{100 * c[3]:.2f}%"]
                 for c in cats.values()]
        buckets = [b for b in rows.get("buckets", []) if b["stage"] == name]
        if buckets:
            bbody = [[f"({b['lower']:,}, {b['upper']:,}]", b["target_tokens"], b["filled_tokens"], b["topup_tokens"],
                      b["realised_tokens"], f"{100 * b['realised_tokens'] / max(b['target_tokens'], 1):.1f}%",
                      b["documents"], b["sources"] or "empty"] for b in buckets]
            out.append((f"Stage {name}: length buckets",
                        "Documents by token length; each bucket filled in source priority order, a shortfall "
                        "topped up with shorter documents; sequences packed best-fit decreasing.",
                        _table(["bucket", "target", "filled", "top-up", "realised", "of target", "documents",
                                "sources"], bbody)))
        notes = [f"{f['kind']}: {f['message']}" for f in flags if f["stage"] == name]
        out.append((f"Stage {name}: categories",
                    "Flags: " + ("; ".join(notes) if notes else "none") + ".",
                    _table(["category", "effective tokens", "share", "target"], cbody)))
    return out


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}code{background:#f4f4f4}
img{max-width:100%}.meta{color:#555}"""


def write_report(rows: dict, out: Path) -> Path:
    """Write `<out>/reports/index.html`, its Markdown twin `report.md` and the plots, from the ledger rows."""
    rdir = out / "reports"
    png = funnel_plot(rows, rdir / "funnel.png")
    staged = bool(rows.get("stages"))
    comp = composition_plot(rows, rdir / "composition.png") if staged else None
    flow = flow_plot(rows, rdir / "flow.png") if staged else None
    run = rows["runs"][0]
    head = (f"Recipe `{run['recipe']}`, fingerprint `{run['run']}`, vocabulary `{run['vocabulary']}`, "
            f"stages: {run['stages']}. Manifests in `manifests/`, ledger in `ledger/` "
            f"(query with `curate ledger <out>`).")
    sections = _sections(rows)
    md = [f"# Curation report: {run['recipe']}", "", head, "", f"![records and tokens]({png.name})", ""]
    if comp:
        md += [f"![mixture flow across stages]({flow.name})", "", f"![composition by stage]({comp.name})", ""]
    body = [f"<h1>Curation report: {html.escape(run['recipe'])}</h1>", f"<p class='meta'>{_inline(head)}</p>",
            f"<img src='{png.name}' alt='records through the pipeline and tokens per source'>"]
    if comp:
        body.append(f"<img src='{flow.name}' alt='mixture flow across stages by category'>")
        body.append(f"<img src='{comp.name}' alt='composition of each stage by category and source'>")
    for title, note, (tmd, thtml) in sections:
        md += [f"## {title}", "", note, "", tmd, ""]
        body += [f"<h2>{html.escape(title)}</h2>", f"<p>{_inline(note)}</p>", thtml]
    atomic_write_bytes(rdir / "report.md", "\n".join(md).encode())
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>curate report: {html.escape(run['recipe'])}"
            f"</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")
    atomic_write_bytes(rdir / "index.html", page.encode())
    return rdir / "index.html"
