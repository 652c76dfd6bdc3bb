"""Sources acquired into raw/ by `curate run`: a URL list served from loopback behind the network
guard, an archive, and an fsspec folder of Parquet files (a dataset snapshot). No traffic leaves
loopback: every URL is a literal 127.0.0.x address or refused before any connection."""
from __future__ import annotations

import io
import json
import tarfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import VOCAB, english_doc
from tests.loopback import Server


def page(i: int) -> bytes:
    return (f"<!doctype html><html><head><title>Page {i}</title></head><body><article><h1>Story {i}</h1>"
            f"<p>{english_doc(i, 120)}</p><p>{english_doc(i + 100, 120)}</p></article></body></html>").encode()


@pytest.mark.slow
def test_run_acquires_urls_archives_and_snapshots(tmp_path):
    from curation.commands.run import run

    good = Server("127.0.0.2", {"/a": lambda s: (200, {"Content-Type": "text/html"}, page(1)),
                                "/b": lambda s: (200, {"Content-Type": "text/html"}, page(2)),
                                "/gone": lambda s: (404, {}, b"")})
    blocked = Server("127.0.0.3", {"/x": lambda s: (200, {}, b"SECRET")})
    good.routes["/hop"] = lambda s: (302, {"Location": f"{blocked.base}/x"}, b"")
    try:
        good.routes["/firehol.netset"] = lambda s: (200, {}, b"# served feed\n127.0.0.3/32\n")
        (tmp_path / "hosts").write_text("0.0.0.0 tracker.invalid\n")
        urls = [f"{good.base}/a", f"{good.base}/b", f"{good.base}/hop", f"{good.base}/gone", "ftp://127.0.0.2/f",
                "http://tracker.invalid/pixel"]
        (tmp_path / "urls.jsonl").write_text("".join(json.dumps({"url": u, "lang": "en"}) + "\n" for u in urls))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, docs in (("part-0.jsonl", range(3)), ("part-1.jsonl", range(10, 12))):
                data = "".join(json.dumps({"id": f"{name}-{i}", "text": english_doc(i)}) + "\n" for i in docs)
                info = tarfile.TarInfo(f"data/{name}")
                info.size = len(data.encode())
                tar.addfile(info, io.BytesIO(data.encode()))
        (tmp_path / "dump.tar.gz").write_bytes(buf.getvalue())
        snap = tmp_path / "hub" / "snapshots" / ("ab" * 20)
        snap.mkdir(parents=True)
        pq.write_table(pa.table({"id": ["s0", "s1"], "text": [english_doc(7), english_doc(8)]}),
                       snap / "train-00000.parquet")
        (tmp_path / "recipe.yaml").write_text(f"""name: t
vocabulary: {VOCAB}
network: {{feeds: [{{url: "{good.base}/firehol.netset", format: firehol}}, {{path: hosts, format: hosts}}]}}
sources:
  - name: crawl
    license: CC-BY-4.0
    acquire: {{kind: urls, path: urls.jsonl, max_retries: 1, timeout_s: 5}}
    input: {{paths: [documents.jsonl], id_field: id, metadata_fields: [url, lang]}}
  - name: dump
    license: MIT
    acquire: {{kind: archive, path: dump.tar.gz}}
    input: {{paths: [files/data/*.jsonl], id_field: id}}
  - name: hub
    license: CC-BY-4.0
    revision: {"ab" * 20}
    acquire: {{kind: fsspec, path: "file://{snap}/*.parquet"}}
    input: {{format: parquet, paths: [files/*.parquet], id_field: id}}
""")
        res = run(tmp_path / "recipe.yaml", tmp_path / "out", progress=False)
        acq = {(a["source"], a["outcome"], a["reason"]): a["items"] for a in res.rows["acquisition"]}
        assert acq == {("crawl", "ok", None): 2, ("crawl", "refused", "ip_blocked"): 1,
                       ("crawl", "refused", "scheme_refused"): 1, ("crawl", "failed", "http_404"): 1,
                       ("crawl", "refused", "domain_blocked"): 1,
                       ("dump", "ok", None): 2, ("hub", "ok", None): 1}
        assert blocked.log == []  # the redirect into the blocked network never connected
        tokens = {t["source"]: t["documents"] for t in res.rows["tokens"]}
        assert tokens == {"crawl": 2, "dump": 5, "hub": 2}
        sources = {s["source"]: s for s in res.rows["sources"]}
        assert all(sources[s]["fetched_sha256"] for s in ("crawl", "dump", "hub"))
        assert sources["dump"]["input_files"] == 2 and sources["hub"]["revision"] == "ab" * 20
        inputs = sorted(i["path"] for i in res.rows["inputs"] if i["source"] == "dump")
        assert inputs == ["raw/dump/files/data/part-0.jsonl", "raw/dump/files/data/part-1.jsonl"]
        report = (tmp_path / "out" / "reports" / "report.md").read_text()
        assert "## Acquisition" in report and "ip_blocked 1" in report

        before = len(good.log)
        again = run(tmp_path / "recipe.yaml", tmp_path / "out", progress=False)
        # resumed: only the failed URL is requested again (and the URL feed, fetched once per run)
        assert sorted(good.paths()[before:]) == ["/firehol.netset", "/gone"]
        assert again.rows["tokens"] == res.rows["tokens"]

        wrong = (tmp_path / "recipe.yaml").read_text().replace("ab" * 20, "cd" * 20, 1)
        (tmp_path / "wrong.yaml").write_text(wrong)
        from curation.errors import InputError
        with pytest.raises(InputError, match="snapshot of revision abab.*pins revision cdcd"):
            run(tmp_path / "wrong.yaml", tmp_path / "out-wrong", progress=False)
    finally:
        good.close()
        blocked.close()


@pytest.mark.slow
def test_acquisition_demo_recipe(tmp_path):
    """recipes/acquisition.yaml with its loopback site: every adapter, feeds in eight formats (three of
    them detected, one gzip-compressed). Every name resolves to the site, so a name a feed failed to
    block would reach it: the site's log proves that none did."""
    import importlib.util

    from curation.commands.run import run
    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("serve", REPO / "recipes" / "acquisition" / "serve.py")
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    try:
        site_log, blocked_log, stop = serve.start()
    except OSError as e:
        pytest.skip(f"the demo's loopback ports are taken ({e})")
    try:
        res = run(REPO / "recipes" / "acquisition.yaml", tmp_path / "out", progress=False,
                  resolver=lambda host: ["127.0.0.2"])
    finally:
        stop()
    outcomes = {(a["outcome"], a["reason"]): a["items"] for a in res.rows["acquisition"] if a["source"] == "site"}
    assert outcomes == {("ok", None): 8, ("failed", "http_404"): 1, ("refused", "domain_blocked"): 6,
                        ("refused", "url_blocked"): 3, ("refused", "ip_blocked"): 2, ("refused", "scheme_refused"): 2}
    from curation.acquire.feeds import FEEDS_SCHEMA, feed_rows
    from curation.acquire.sources import read_acquired
    feeds = {r["feed"].rsplit("/", 1)[1]: r for r in feed_rows("r", [read_acquired(tmp_path / "out" / "raw", "site")])}
    assert {n: (r["format"], r["declared_format"]) for n, r in feeds.items()} == {
        "adblock_demo.txt": ("adblock", "adblock"), "drop_demo.txt": ("netset", "spamhaus"),
        "firehol_demo.netset": ("netset", "firehol"), "hosts_demo": ("hosts", "hosts"),
        "rpz_demo.zone": ("rpz", "auto"), "unbound_demo.conf": ("unbound", "auto"),
        "urlhaus_demo.csv.gz": ("urlhaus_csv", "auto"), "urlhaus_demo.txt": ("urlhaus", "urlhaus")}
    assert feeds["urlhaus_demo.csv.gz"]["compression"] == "gzip"
    assert (feeds["rpz_demo.zone"]["hosts"], feeds["adblock_demo.txt"]["url_prefixes"]) == (3, 3)
    assert sorted(r["feed"] for r in res.rows["feeds"]) == sorted(r["feed"] for r in feeds.values())  # in the ledger
    assert pa.Table.from_pylist(list(feeds.values()), schema=FEEDS_SCHEMA).num_rows == 8
    assert blocked_log == []  # /moved redirects to the blocked host: refused before connecting
    assert sorted(site_log) == sorted([f"/page-{i:02d}.html" for i in range(8)] + ["/moved", "/missing.html"])
    docs = {t["source"]: t["documents"] for t in res.rows["tokens"]}
    assert docs["site"] == 8 and docs["dump"] == 8 and docs["hub"] > 0
    assert docs["cc_pages"] == 0  # share-alike under the default licence policy
    drops = {(d["source"], d["reason"]): d["records"] for d in res.rows["drops"]}
    assert drops[("cc_pages", "licence_share-alike")] > 0
    hub = next(s for s in res.rows["sources"] if s["source"] == "hub")
    assert hub["revision"] == "6195f7e9e1627d62b3c9072cb7836dafd7492305"
    from tests.outputs import token_balance
    ledger, shards, _ = token_balance(tmp_path / "out")   # the ledger balances with every shard
    assert ledger == shards > 0


def test_fsspec_keeps_sub_folders_and_parquet_metadata_of_any_type(tmp_path):
    """Same file names in two folders stay two files; a timestamp metadata column does not break a shard."""
    import datetime

    from curation.acquire.sources import acquire_all
    from curation.recipe import load_recipe

    for sub, ids in (("a", ["a0", "a1"]), ("b", ["b0"])):
        (tmp_path / "store" / sub).mkdir(parents=True)
        pq.write_table(pa.table({"id": ids, "text": [english_doc(len(i) + ord(i[0])) for i in ids],
                                 "crawled": [datetime.datetime(2024, 1, 2, 3, 4, 5)] * len(ids)}),
                       tmp_path / "store" / sub / "part.parquet")
    (tmp_path / "r.yaml").write_text(f"""name: t
vocabulary: {VOCAB}
sources:
  - name: store
    license: MIT
    acquire: {{kind: fsspec, path: "store/**/*.parquet"}}
    input: {{format: parquet, paths: [files/**/*.parquet], id_field: id, metadata_fields: [crawled]}}
""")
    record = acquire_all(load_recipe(tmp_path / "r.yaml", resolve_inputs=False), tmp_path / "out" / "raw")["store"]
    assert record["files"] == 2
    assert sorted(p.relative_to(tmp_path / "out" / "raw" / "store" / "files").as_posix()
                  for p in (tmp_path / "out" / "raw" / "store" / "files").rglob("*.parquet")) == \
        ["a/part.parquet", "b/part.parquet"]


@pytest.mark.slow
def test_parquet_metadata_of_any_type_is_kept(tmp_path):
    import datetime

    from curation.commands.run import run
    pq.write_table(pa.table({"id": ["x", "y"], "text": [english_doc(1), english_doc(2)],
                             "crawled": [datetime.datetime(2024, 1, 2, 3, 4, 5)] * 2}), tmp_path / "d.parquet")
    (tmp_path / "r.yaml").write_text(f"""name: t
vocabulary: {VOCAB}
sources:
  - name: d
    license: MIT
    input: {{format: parquet, paths: [d.parquet], id_field: id, metadata_fields: [crawled]}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    assert res.rows["tokens"][0]["documents"] == 2
    meta = pq.read_table(tmp_path / "out" / "processed" / "d" / "00000.parquet").column("meta").to_pylist()
    assert json.loads(meta[0])["crawled"] == "2024-01-02 03:04:05"
