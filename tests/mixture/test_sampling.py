"""Sampling plans and the Merkle root: deterministic, close to the plan, and checked by verify."""
import numpy as np
import pytest

from curation.mixture.merkle import merkle_root
from curation.mixture.sampling import plan_seed, sample_counts


def test_counts_match_planned_epochs_within_half_a_document():
    rng = np.random.default_rng(0)
    for trial in range(300):
        lengths = rng.integers(1, 5000, rng.integers(1, 80))
        epochs = float(rng.uniform(0, 7))
        counts = sample_counts(lengths, epochs, seed=trial)
        assert abs(int((counts * lengths).sum()) - epochs * lengths.sum()) <= lengths.max() / 2 + 1e-6
        assert counts.min() >= int(np.floor(epochs)) and counts.max() <= int(np.floor(epochs)) + 1


def test_plan_is_a_function_of_the_stage_fingerprint():
    lengths = np.arange(1, 101)
    a = sample_counts(lengths, 1.5, plan_seed("stagefp1", "web"))
    assert (a == sample_counts(lengths, 1.5, plan_seed("stagefp1", "web"))).all()
    assert not (a == sample_counts(lengths, 1.5, plan_seed("stagefp2", "web"))).all()
    assert plan_seed("stagefp1", "web") != plan_seed("stagefp1", "news")
    assert sample_counts(lengths, 0.0, 1).sum() == 0 and (sample_counts(lengths, 2.0, 1) == 2).all()


def test_merkle_root_is_order_free_and_sensitive():
    leaves = [f"f{i}:{i:064x}" for i in range(5)]
    root = merkle_root(leaves)
    assert merkle_root(list(reversed(leaves))) == root
    assert merkle_root(leaves[:4]) != root
    assert merkle_root(leaves[:4] + ["f4:" + "1" * 64]) != root
    assert len(root) == 64


@pytest.mark.slow
def test_verify_checks_plans_ledger_and_root(text_run, tmp_path):
    import json
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.errors import VerifyError
    from curation.mixture.manifests import verify_manifest

    out = tmp_path / "o"
    shutil.copytree(text_run.out, out)
    manifest = out / "manifests" / "stage1.json"
    m = json.loads(manifest.read_text())
    assert all(s["plan"]["tokens"] > 0 for s in m["sources"])
    for s in m["sources"]:
        assert abs(s["plan"]["tokens"] - s["effective_tokens"]) < 50_000
    plan = out / "manifests" / m["sources"][0]["plan"]["path"]
    counts = np.load(plan)
    counts[0] += 1
    np.save(plan, counts)
    with pytest.raises(VerifyError, match="web_en: sampling plan .* is missing or changed"):
        verify_manifest(manifest)
    shutil.copy(text_run.out / "manifests" / m["sources"][0]["plan"]["path"], plan)
    table = pq.read_table(out / "ledger" / "drops.parquet")
    pq.write_table(table.set_column(4, "records", pa.array([r + 1 for r in table.column("records").to_pylist()])),
                   out / "ledger" / "drops.parquet")
    with pytest.raises(VerifyError, match="ledger table 'drops' changed"):
        verify_manifest(manifest)
