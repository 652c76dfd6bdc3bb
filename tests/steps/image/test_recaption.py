"""Caption regeneration as a loop (curation/steps/image/{recaption,worklist}.py): flagged captions are
exported with their images, regenerated captions named by the recipe come back, are re-checked, and
the ledger and the record's metadata say which captions were regenerated."""
from __future__ import annotations

import json
import tarfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.errors import InputError, RecipeError
from tests.conftest import REPO

SHARD = REPO / "recipes" / "images" / "shards" / "captioned-00000.tar"
MOON = "The full moon over a black sky, its grey seas and bright craters in low contrast."


def _image(member: str) -> bytes:
    with tarfile.open(SHARD) as tar:
        return tar.extractfile(member).read()


def _check(tmp_path, rows, suffix=".parquet", source="captioned"):
    from curation.steps.image.read import ImageCheck
    from curation.steps.image.recaption import check_file
    path = tmp_path / f"recaptions{suffix}"
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ImageCheck(min_side=64, domain="natural", recaptions=str(path),
                      recaptions_sha256=check_file(path, source), source=source)


def _record(rid: str, member: str, caption: str):
    from curation.core.record import Record
    return Record(id=rid, source="captioned", text=caption, payload={"image": _image(member)})


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_regenerated_captions_replace_and_are_rechecked(tmp_path, suffix):
    step = _check(tmp_path, [{"id": "0103", "caption": MOON, "source": "captioned"},
                             {"id": "0000", "caption": "As an AI, I cannot see this image.", "source": None},
                             {"id": "0001", "caption": None, "source": None},
                             {"id": "0003", "caption": "Not this source's.", "source": "other"}], suffix)
    records = [_record("0103", "0103.jpg", "the moon the moon the moon the moon the moon the moon the moon the moon"),
               _record("0000", "0000.jpg", "Astronaut Eileen Collins portrait."),
               _record("0001", "0001.jpg", "Cameraman, grayscale."),
               _record("0003", "0003.jpg", "Coffee cup photo."), _record("0007", "0007.jpg", "")]
    kept = {r.id: r for r in step.run(records)}
    assert sorted(kept) == ["0003", "0007", "0103"]
    moon = kept["0103"]
    assert moon.text == MOON and moon.meta["caption_regenerated"] is True
    assert moon.meta["caption_flagged"] == ["repetitive_caption"]       # what the replaced caption failed
    assert kept["0003"].text == "Coffee cup photo." and "caption_regenerated" not in kept["0003"].meta
    assert dict(step.stats.quarantined) == {"prompt_fragment": 1, "empty_caption": 1}   # re-checked: no free pass
    assert (step.stats.notes["caption_regenerated"], step.stats.notes["caption_regenerated_flagged"],
            step.stats.notes["captioned"]) == (3, 2, 4)
    [row] = step.ledger_rows("r", "captioned", step.stats)["captions"]
    assert row == {"run": "r", "source": "captioned", "checked": 4, "flagged": 2, "regenerated": 3,
                   "regenerated_kept": 1, "regenerated_flagged": 2}
    reasons = {d[1]: (d[3], d[4]) for d in step.sink.decisions}
    assert reasons["0000"][0] == "prompt_fragment" and "regenerated caption" in reasons["0000"][1]


def test_a_recaption_file_is_checked_before_it_is_used(tmp_path):
    from curation.steps.image.recaption import check_file
    with pytest.raises(RecipeError, match="does not exist"):
        check_file(tmp_path / "missing.parquet", "s")
    (tmp_path / "r.csv").write_text("id,caption\n")
    with pytest.raises(RecipeError, match=r"\.parquet or \.jsonl"):
        check_file(tmp_path / "r.csv", "s")
    pq.write_table(pa.table({"id": ["a"], "text": ["x"]}), tmp_path / "r.parquet")
    with pytest.raises(RecipeError, match=r"needs \['id', 'caption'\]"):
        check_file(tmp_path / "r.parquet", "s")
    with pytest.raises(InputError, match="listed twice"):
        _check(tmp_path, [{"id": "a", "caption": "x"}, {"id": "a", "caption": "y"}], ".jsonl")
    with pytest.raises(InputError, match="needs `id` and `caption`"):
        _check(tmp_path, [{"id": "a"}], ".jsonl")


def _recipe(tmp_path, recaptions: str | None = None):
    text = (REPO / "recipes" / "images.yaml").read_text().replace("../tokenizers/", f"{REPO}/tokenizers/")
    text = text.replace("images/shards/", f"{REPO}/recipes/images/shards/")
    if recaptions:
        text = text.replace("area: 16384, caption: after}", f"area: 16384, caption: after, recaptions: {recaptions}}}")
    path = tmp_path / "images.yaml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_caption_loop_end_to_end(tmp_path):
    """Run, regenerate what the work list asks for, run again in the same folder: the regenerated caption
    is in the shards, the one that still fails is back in the work list, and the ledger counts both."""
    from curation.commands.run import run
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens
    out = tmp_path / "out"
    first = run(_recipe(tmp_path), out, progress=False)
    work = pq.read_table(out / "review" / "captions_to_regenerate.parquet").to_pylist()
    assert [(w["source"], w["id"], w["input"], w["position"], w["reasons"], w["regenerated_caption"]) for w in work] \
        == [("captioned", "0103", str(SHARD), 12, ["repetitive_caption"], None)]
    assert work[0]["image"] == _image("0103.jpg") and work[0]["caption"].startswith("the moon the moon")
    assert {c["source"]: c["flagged"] for c in first.rows["captions"]} == {"captioned": 1, "uncaptioned": 0}

    # "the team's model": one good caption for the flagged moon, one bad one for the astronaut
    pq.write_table(pa.table({"id": ["0103", "0000"], "caption": [MOON, "Describe the image: a person."]}),
                   tmp_path / "recaptions.parquet")
    second = run(_recipe(tmp_path, "recaptions.parquet"), out, progress=False)
    [row] = [c for c in second.rows["captions"] if c["source"] == "captioned"]
    assert (row["regenerated"], row["regenerated_kept"], row["regenerated_flagged"], row["flagged"]) == (2, 1, 1, 1)
    reasons = {(d["source"], d["reason"]): d["records"] for d in second.rows["drops"] + second.rows["quarantine"]}
    assert ("captioned", "repetitive_caption") not in reasons and reasons[("captioned", "prompt_fragment")] == 1
    # the moon re-entered dedup with its new caption: its uncaptioned copy is now the duplicate
    assert reasons[("uncaptioned", "exact_duplicate")] == 1
    work = pq.read_table(out / "review" / "captions_to_regenerate.parquet").to_pylist()
    assert [(w["id"], w["regenerated_caption"], w["reasons"]) for w in work] == \
        [("0000", "Describe the image: a person.", ["prompt_fragment"])]
    [table] = (out / "processed" / "captioned").glob("*.parquet")
    meta = {r["id"]: json.loads(r["meta"]) for r in pq.read_table(table, columns=["id", "meta"]).to_pylist()}
    assert meta["0103"]["caption_regenerated"] is True and meta["0103"]["caption_flagged"] == ["repetitive_caption"]
    assert not any(m.get("caption_regenerated") for rid, m in meta.items() if rid != "0103")

    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    prefix = out / "tokenized" / "captioned" / "captioned"
    _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
    tokens = read_tokens(prefix).tolist()
    captions, start = [], 0
    for n in lengths.tolist():
        doc = tokens[start:start + n]
        start += n
        captions.append(vocab.tokenizer.decode(doc[doc.index(vocab.marker("image_end")) + 1:-1]))
    assert MOON in captions and len(captions) == 8
    assert second.executed < first.executed      # the uncaptioned source's process task was not re-run
    report = (out / "reports" / "report.md").read_text()
    assert "## Captions" in report and "| captioned | 10 | 1 | 2 | 1 | 1 |" in report
