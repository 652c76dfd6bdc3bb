"""The ledger's `encoders` table: which codec encoded each part (one tokenize task's shard), on which device
and at which precision, as the task found it (`curation.steps.device.Placement`).

    run, source, shard      the part
    codec, codec_sha256     the codec kind (image, audio) and the content hash of its configuration/weights
    requested               the recipe's device: cpu, cuda or auto
    device, precision       where it ran and how: cpu/float32, cuda/tf32, cuda/float32, cuda/bfloat16
    device_name, gpus       the GPU's name (or cpu) and the task's CUDA_VISIBLE_DEVICES: volatile columns
                            (which GPU of which node a task got is the scheduler's choice, not an output)

A part encoded before this table existed (its completion marker names no placement) has no row. The
table describes how the work was executed, like the run's host: the codes themselves are frozen by the
shards' sha256 in the manifests, so it is not among the manifests' ledger digests
(`curation.mixture.manifests.DEVICE_TABLES`); `curate verify` reads it to report a manifest whose parts
mix precisions.
"""
from __future__ import annotations

import pyarrow as pa

ENCODERS = pa.schema([("run", pa.string()), ("source", pa.string()), ("shard", pa.string()), ("codec", pa.string()),
                      ("codec_sha256", pa.string()), ("requested", pa.string()), ("device", pa.string()),
                      ("precision", pa.string()), ("device_name", pa.string()), ("gpus", pa.string())])
VOLATILE = ("device_name", "gpus")


def encoder_rows(run: str, tokenize_nodes, markers: dict) -> list[dict]:
    rows = []
    for node in tokenize_nodes:
        for p in (markers.get(node.key) or {}).get("encoders", []):
            rows.append({"run": run, "source": node.source, "shard": node.shard, "codec": p["kind"],
                         "codec_sha256": node.spec["run"].get(f"{p['kind']}_codec_sha256"),
                         "requested": p["requested"], "device": p["device"], "precision": p["precision"],
                         "device_name": p["device_name"], "gpus": p["gpus"]})
    return sorted(rows, key=lambda r: (r["source"], r["shard"], r["codec"]))
