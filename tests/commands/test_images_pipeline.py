"""recipes/images.yaml end to end: checks with reasons, pHash dedup, tokenized shards, determinism."""
from __future__ import annotations

import pytest

from tests.conftest import REPO

RECIPE = REPO / "recipes" / "images.yaml"


@pytest.mark.slow
def test_image_recipe_end_to_end(images_run, tmp_path, ray_local):
    from curation.commands.run import run
    from curation.core.vocab import Vocabulary
    from curation.shards import read_index, read_tokens

    a = images_run   # the local executor
    reasons = {(d["source"], d["reason"]): d["records"] for d in a.rows["drops"] + a.rows["quarantine"]}
    assert reasons == {("captioned", "image_too_small"): 1, ("captioned", "image_near_duplicate"): 1,
                       ("captioned", "repetitive_caption"): 1, ("captioned", "truncated_image"): 1}
    [cluster] = a.rows["image_clusters"]
    assert cluster["members"] == ["captioned/0002", "captioned/0100"]  # the cat and its re-encoded copy
    tokens = {t["source"]: t for t in a.rows["tokens"]}
    assert tokens["captioned"]["documents"] == 8 and tokens["uncaptioned"]["documents"] == 5
    assert tokens["captioned"]["image_tokens"] > 8 * 64 and tokens["uncaptioned"]["image_tokens"] > 5 * 64
    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    prefix = a.out / "tokenized" / "captioned" / "captioned"
    _, lengths, _, _ = read_index(prefix.with_suffix(".idx"))
    doc = read_tokens(prefix)[:int(lengths[0])].tolist()
    assert doc[0] == vocab.marker("image_start") and doc[-1] == vocab.eod_id
    end = doc.index(vocab.marker("image_end"))
    assert all(t in vocab.block("text") for t in doc[end + 1:])  # the caption follows the image
    b = run(RECIPE, tmp_path / "w2", workers=2, progress=False, executor="ray")  # Ray = the local executor
    for source in ("captioned", "uncaptioned"):
        for ext in ("bin", "idx"):
            assert (a.out / "tokenized" / source / f"{source}.{ext}").read_bytes() == \
                (tmp_path / "w2" / "tokenized" / source / f"{source}.{ext}").read_bytes()
    assert b.rows["image_clusters"] == [dict(c, run=b.rows["image_clusters"][0]["run"]) for c in a.rows["image_clusters"]]


def test_image_sources_need_a_codec_and_no_text_filters(tmp_path):
    from curation.errors import RecipeError
    from curation.plan.graph import load_plan
    text = RECIPE.read_text()
    (tmp_path / "images").symlink_to(REPO / "recipes" / "images")
    (tmp_path / "r.yaml").write_text(text.replace("image_tokenizer: ../tokenizers/curate-demo-ibq.yaml\n", "")
                                     .replace("../tokenizers/", f"{REPO}/tokenizers/"))
    with pytest.raises(RecipeError, match="no `image_tokenizer`"):
        load_plan(tmp_path / "r.yaml")
    (tmp_path / "r.yaml").write_text(text.replace("../tokenizers/", f"{REPO}/tokenizers/").replace(
        "    images: {min_side: 64, domain: natural, area: 16384, caption: none}",
        "    filters: [{type: length, min_words: 3}]"))
    with pytest.raises(RecipeError, match="not text `filters`"):
        load_plan(tmp_path / "r.yaml")


@pytest.mark.slow
def test_image_decontamination_removes_the_benchmark_image(tmp_path):
    """A benchmark image (here: a re-encoded copy of one demo photo) removes its training twin by id."""
    import io
    import tarfile

    from PIL import Image

    from curation.commands.run import run

    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        camera = Image.open(io.BytesIO(tar.extractfile("0001.jpg").read()))
    (tmp_path / "bench").mkdir()
    camera.resize((150, 150)).save(tmp_path / "bench" / "q17.png")
    (tmp_path / "bench" / "README.txt").write_text("not an image")
    text = RECIPE.read_text().replace("../tokenizers/", f"{REPO}/tokenizers/").replace(
        "images/shards/", f"{REPO}/recipes/images/shards/")
    text = text.replace("sources:", f"decontamination:\n  image_benchmarks: [{{name: vqa, path: {tmp_path / 'bench'}}}]\n"
                                    "sources:", 1)
    (tmp_path / "r.yaml").write_text(text)
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    rows = {(d["source"], d["benchmark"]): d for d in res.rows["decontamination"]}
    assert rows[("captioned", "vqa")]["removed"] == 1 and rows[("uncaptioned", "(all)")]["removed"] == 0
    assert {b["benchmark"]: (b["items"], b["unindexable"]) for b in res.rows["benchmarks"]} == {"vqa": (1, 1)}
    page = (tmp_path / "out" / "review" / "decontamination.html").read_text()
    assert "captioned/0001" in page and "pHash distance" in page


@pytest.mark.slow
def test_parquet_image_source_as_in_a_dataset_snapshot(tmp_path):
    """Hugging Face's image feature: a {bytes, path} struct column next to the caption."""
    import tarfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.commands.run import run

    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        jpgs = [tar.extractfile(f"{i:04d}.jpg").read() for i in range(3)]
    rows = [{"id": f"r{i}", "image": {"bytes": b, "path": f"{i}.jpg"}, "caption": f"Photo number {i} of a set."}
            for i, b in enumerate(jpgs)] + [{"id": "r9", "image": {"bytes": None, "path": "x.jpg"}, "caption": "x"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train-00000.parquet")
    (tmp_path / "r.yaml").write_text(f"""name: t
vocabulary: {REPO}/tokenizers/curate-demo-v1.yaml
image_tokenizer: {REPO}/tokenizers/curate-demo-ibq.yaml
sources:
  - name: hub_images
    license: CC0-1.0
    modality: image
    input: {{format: parquet, paths: [train-00000.parquet], image_field: image, text_field: caption, id_field: id}}
    images: {{min_side: 32, area: 4096}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    assert res.rows["tokens"][0]["documents"] == 3 and res.rows["tokens"][0]["image_tokens"] >= 3 * 16
    assert {(q["reason"], q["records"]) for q in res.rows["quarantine"]} == {("no_image", 1)}
