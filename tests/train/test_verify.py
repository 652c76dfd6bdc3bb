"""Verification covers what a trainer reads: every tampered field, hand-off file, plan and ledger row is named
by `curate verify`, and `curate train` refuses it; a malformed manifest is a clear error, not a traceback."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from curation.commands.cli import main
from curation.errors import VerifyError
from curation.mixture.handoffs import relocate_handoff
from curation.mixture.manifests import verify_manifest

pytestmark = pytest.mark.slow   # every test here starts from the demo run


@pytest.fixture()
def out(text_run, tmp_path):
    """A private copy of the demo output, its hand-off rewritten for the copy's location."""
    copy = tmp_path / "demo"
    shutil.copytree(text_run.out, copy, symlinks=True, ignore=shutil.ignore_patterns("raw", "work", "processed"))
    for manifest in (copy / "manifests").glob("*.json"):
        relocate_handoff(manifest)
    return copy


def _edit(path, change) -> None:
    m = json.loads(path.read_text())
    change(m)
    path.write_text(json.dumps(m, indent=1))


def _refused(manifest, tmp_path, capsys, *patterns: str) -> None:
    """`verify_manifest`, `curate verify` and `curate train` all fail, naming every pattern."""
    with pytest.raises(VerifyError) as err:
        verify_manifest(manifest)
    for p in patterns:
        assert re.search(p, str(err.value)), (p, str(err.value))
    capsys.readouterr()
    assert main(["verify", str(manifest)]) != 0
    assert main(["train", str(manifest), "--out", str(tmp_path / "train"), "--max-steps", "1"]) != 0
    stderr = capsys.readouterr().err
    assert all(re.search(p, stderr) for p in patterns) and "Traceback" not in stderr
    assert not (tmp_path / "train" / "checkpoint.pt").exists()


FIELDS = {
    "training.goldfish": lambda m: m["training"].update(goldfish={"k": 2, "h": 1}),
    "training.targets": lambda m: m["training"].update(targets="text" if m["training"]["targets"] == "all" else "all"),
    "training.thinking": lambda m: m["training"].update(thinking="mask"),
    "vocabulary.padded_size": lambda m: m["vocabulary"].update(padded_size=m["vocabulary"]["padded_size"] + 128),
    "vocabulary.eod": lambda m: m["vocabulary"].update(eod=1),
    "seq_length": lambda m: m.update(seq_length=2 * m["seq_length"]),
    "budget_tokens": lambda m: m.update(budget_tokens=m["budget_tokens"] + 1),
    "samples": lambda m: m.update(samples=m["samples"] + 1),
    "megatron.prefixes": lambda m: m["megatron"]["prefixes"][0].update(sequences=m["megatron"]["prefixes"][0]["sequences"] + 1),
    "sources[web_en]": lambda m: m["sources"][0].update(max_epochs=99.0),
}


def test_the_untouched_copy_verifies(out):
    for manifest in sorted((out / "manifests").glob("*.json")):
        assert verify_manifest(manifest)[-1].startswith("megatron hand-off (packed):")


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_changed_field_is_named_and_refused(out, tmp_path, capsys, field):
    manifest = out / "manifests" / "stage1.json"
    _edit(manifest, FIELDS[field])
    patterns = [rf"manifest field `{re.escape(field)}` was changed"]
    if field in ("seq_length", "budget_tokens"):          # also against the ledger's stages table
        patterns.append(rf"{field} = \d+ in the manifest, the ledger's stages table says \d+")
    _refused(manifest, tmp_path, capsys, *patterns)


def test_changed_handoff_files_are_named(out, tmp_path, capsys):
    manifest = out / "manifests" / "stage1.json"
    hand = out / "megatron" / "stage1"
    data_args = (hand / "data_args.txt").read_text()       # the packed prefix alone
    (hand / "data_args.txt").write_text(f"2 {data_args}")
    spec = json.loads((hand / "per_split_data_args.json").read_text())
    spec["train"] = ["1", *spec["train"]]
    (hand / "per_split_data_args.json").write_text(json.dumps(spec))
    idx = bytearray((hand / "packed.idx").read_bytes())
    idx[34] ^= 1                                           # the packed document's length, same file size
    (hand / "packed.idx").write_bytes(bytes(idx))
    _refused(manifest, tmp_path, capsys, r"data_args.txt differs from the stage's blend",
             r"per_split_data_args.json differs from the stage's blend",
             r"megatron prefix packed: .*packed.idx does not hold the packed sequences of the plan")


def test_a_changed_packed_sequence_and_plan_are_named(out, tmp_path, capsys):
    manifest = out / "manifests" / "long-context-4k.json"
    packed = out / "megatron" / "long-context-4k" / "packed.bin"
    data = bytearray(packed.read_bytes())
    data[4 * 100] ^= 1
    packed.write_bytes(bytes(data))
    _refused(manifest, tmp_path, capsys, r"packed.bin does not hold the packed sequences of the plan")
    stage1 = out / "manifests" / "stage1.json"
    plan = out / "manifests" / json.loads(stage1.read_text())["sources"][2]["plan"]["path"]
    counts = np.load(plan)
    counts[0] += 1
    np.save(plan, counts)
    _refused(stage1, tmp_path, capsys, r"web_de: sampling plan .* is missing or changed",
             r"megatron: cannot rebuild the stage's packed sequences \(the stage has more sequences than the \d+ "
             r"its plan gives")


def test_a_row_updated_in_the_duckdb_file_alone_is_caught(out, tmp_path, capsys):
    import duckdb

    con = duckdb.connect(str(out / "ledger" / "ledger.duckdb"))
    con.execute("UPDATE tokens SET total_tokens = total_tokens + 1000 WHERE source = 'web_en'")
    con.execute("CREATE OR REPLACE VIEW funnel AS SELECT 'forged' AS source")
    con.close()
    assert main(["ledger", str(out), "--table", "tokens"]) == 0   # `curate ledger` still opens it
    _refused(out / "manifests" / "stage1.json", tmp_path, capsys,
             r"ledger.duckdb: table 'tokens' differs from tokens.parquet",
             r"ledger.duckdb: view 'funnel' is not curate's definition")


@pytest.mark.parametrize("change, pattern", [
    (lambda m: m.pop("sources"), r"(?s)malformed manifest.*`sources` is missing"),
    (lambda m: m["sources"][1].update(files="x.bin"), r"`sources\[1\].files` is not a list"),
    (lambda m: m["vocabulary"].pop("eod"), r"`vocabulary.eod` is missing"),
    (lambda m: m["training"].update(stage_index="0"), r"`training.stage_index` is not int"),
], ids=["no-sources", "files-not-a-list", "no-eod", "stage-index-a-string"])
def test_a_malformed_manifest_is_a_clear_error(out, tmp_path, capsys, change, pattern):
    manifest = out / "manifests" / "cooldown.json"
    _edit(manifest, change)
    _refused(manifest, tmp_path, capsys, pattern)
    manifest.write_text("{not json")
    _refused(manifest, tmp_path, capsys, r"not valid JSON")


def test_a_moved_output_folder_names_the_old_location_until_relocated(out, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(out, moved, symlinks=True)
    manifest = moved / "manifests" / "cooldown.json"
    with pytest.raises(VerifyError, match=rf"names the files of {re.escape(str(out))}, not of this output folder"):
        verify_manifest(manifest)
    verify_manifest(manifest, check_location=False)        # what `curate train` checks: content, not location
    relocate_handoff(manifest)
    verify_manifest(manifest)
    assert str(moved) in (moved / "megatron" / "cooldown" / "data_args.txt").read_text()


def test_curate_verify_relocate_rewrites_a_copied_folder(out, tmp_path):
    from curation.commands.cli import main
    copied = tmp_path / "copied"
    shutil.copytree(out, copied, symlinks=True)
    manifest = copied / "manifests" / "stage1.json"
    assert main(["verify", str(manifest)]) == 4      # names the old location
    assert main(["verify", "--relocate", str(manifest)]) == 0
    from curation.ledger import query
    _, rows = query(copied / "ledger", "SELECT count(*) FROM decisions")
    assert rows[0][0] > 0                           # read from the copy's decisions/
