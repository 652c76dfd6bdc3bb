"""The OLMo-core hand-off of a stage: token-id arrays and the `NumpyFSLDatasetConfig` that reads them.

OLMo-core's `NumpyFSLDataset` concatenates its token arrays (raw little-endian memmaps, no `.npy`
header, named `.npy` by convention) and cuts instances of exactly `sequence_length` tokens, instance k of
a file being its tokens [k·L, (k+1)·L); its data loader shuffles instances and draws each once per
epoch. So the stage's sequences (`curation.mixture.sequences`: the plan's occurrences in its seeded
order, or a long-context stage's bins, each `seq_length` tokens) are written back to back: instance k
*is* sequence k, and one epoch draws every planned token exactly once. No label token follows a
sequence (OLMo-core shifts labels inside an instance, so a document cut by a sequence boundary loses
that one target, as in any fixed-length trainer). Its loader leaves out the last `instances % B` instances
of an epoch for a global batch of B instances: a B that divides the section's `instances` draws the plan.

- `part-NNN.npy`: the ids in the dtype OLMo-core infers from the vocabulary size
  (`shards.formats.smallest_uint`: uint32 for 266,752 ids), at most `MAX_PART_TOKENS` per file.
- `part-NNN.mask.npy`: its `label_mask_paths` file, one byte (bool) per token: False on padding (the
  tail of the last sequence, of each long-context bin), so padding is never a target.
- `dataset.json`: the `NumpyFSLDatasetConfig` (OLMo-core's own `_CLASS_` form, absolute paths):
  `NumpyFSLDatasetConfig.from_file(".../dataset.json").build()`. Documents end with our eod (id 0,
  `vocabulary.eod`), the config's `eos_token_id`, so `generate_doc_lengths` gives OLMo-core the document
  boundaries for intra-document masking. Padding is id `padded_size - 1`, an id no tokenizer emits.

What stock OLMo-core does not apply, as with Megatron-LM: the stage's `training.targets: text`, Goldfish
and conversation loss masks (manifest fields `curate train` applies).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import ClassVar

import numpy as np

from curation.core.atomic import atomic_write_bytes
from curation.core.hashing import sha256_file
from curation.core.layout import handoff_dir
from curation.mixture.sequences import planned
from curation.shards.formats import StageInput, check_texts, smallest_uint, text_digest

NAME = "olmo_core"
CONFIG = "dataset.json"
CONFIG_CLASS = "olmo_core.data.numpy_dataset.NumpyFSLDatasetConfig"
TOKENIZER_CLASS = "olmo_core.data.tokenizer.TokenizerConfig"
MAX_PART_TOKENS = 1 << 30          # 4 GiB of uint32 ids per file: object stores and copies stay manageable


def tokenizer(vocab: dict) -> dict:
    """OLMo-core's `TokenizerConfig` over our ids: every padded row, eos = our document end, pad = the last
    padding row (one past the vocabulary when it has no padding row)."""
    pad = max(int(vocab["size"]), int(vocab["padded_size"]) - 1)
    return {"vocab_size": pad + 1, "eos_token_id": int(vocab["eod"]), "pad_token_id": pad, "bos_token_id": None}


def part_sizes(sequences: int, seq_length: int, max_tokens: int | None = None) -> list[int]:
    """Sequences per file: as few files as hold `max_tokens` (default `MAX_PART_TOKENS`) each, nearly equal."""
    if sequences <= 0:
        return []
    most = max((max_tokens or MAX_PART_TOKENS) // seq_length, 1)
    n = -(-sequences // most)
    return [sequences // n + (1 if j < sequences % n else 0) for j in range(n)]


class _Sink:
    """One part's tokens and label mask, to files (`.tmp`, renamed on close) or to hashes only (verify)."""

    def __init__(self, hdir: Path | None, j: int):
        self.names = (f"part-{j:03d}.npy", f"part-{j:03d}.mask.npy")
        self.hashes = [hashlib.sha256(), hashlib.sha256()]
        self.files = [open(hdir / f"{n}.tmp", "wb") for n in self.names] if hdir is not None else None
        self.hdir = hdir

    def write(self, tokens: bytes, mask: bytes) -> None:
        for k, b in enumerate((tokens, mask)):
            self.hashes[k].update(b)
            if self.files is not None:
                self.files[k].write(b)

    def close(self, abort: bool = False) -> None:
        for f, n in zip(self.files or [], self.names):
            f.close()
            tmp = self.hdir / f"{n}.tmp"
            if abort:
                tmp.unlink()
            else:
                os.replace(tmp, self.hdir / n)


def lay_out(sequences, sizes: list[int], dtype: np.dtype, seq_length: int,
            hdir: Path | None) -> tuple[list[tuple[str, str]], dict[int, int]]:
    """Write (`hdir`) or only hash (None) the parts: `sizes[j]` sequences in part j. Returns the sha256 of
    each part's (tokens, mask) and the planned tokens per source index the sequences hold. The one code
    path for writing and checking."""
    sinks = [_Sink(hdir, j) for j in range(len(sizes))]
    held: dict[int, int] = {}
    j, in_part = 0, 0
    try:
        for seq, counts in sequences:
            if j < len(sizes) and in_part == sizes[j]:
                j, in_part = j + 1, 0
            if j >= len(sizes):
                raise ValueError(f"the stage has more sequences than the {sum(sizes)} its plan gives; re-run `curate run`")
            real = sum(counts.values())     # a sequence's padding is its tail (`curation.mixture.sequences`)
            mask = np.arange(seq_length) < real
            sinks[j].write(np.ascontiguousarray(seq, dtype=dtype).tobytes(), mask.astype(np.bool_).tobytes())
            in_part += 1
            for i, n in counts.items():
                held[i] = held.get(i, 0) + n
        if sum(sizes) and (j, in_part) != (len(sizes) - 1, sizes[-1]):
            raise ValueError(f"the stage has fewer sequences than the {sum(sizes)} its plan gives; re-run `curate run`")
    except BaseException:
        for s in sinks:
            s.close(abort=True)
        raise
    for s in sinks:
        s.close()
    return [(s.hashes[0].hexdigest(), s.hashes[1].hexdigest()) for s in sinks], held


def sequence_count(stage_sources: list[dict], packing: np.ndarray | None, seq_length: int) -> int:
    """The stage's sequences: the long-context bins, or its planned tokens in sequences of `seq_length`."""
    if packing is not None:
        return int(packing[:, 2].max()) + 1 if len(packing) else 0
    return -(-sum(stage_sources[i]["plan"]["tokens"] for i in planned(stage_sources)) // seq_length)


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start).replace(os.sep, "/")


def _draws(sources: list[dict], held: dict[int, int]) -> list[dict]:
    """Per planned source: every instance is drawn once an epoch, so it draws what the sequences hold of it."""
    return [{"name": sources[i]["name"], "planned_tokens": int(sources[i]["plan"]["tokens"]),
             "drawn_tokens": int(held.get(i, 0))} for i in planned(sources)]


class OlmoCore:
    """`TrainerFormat` for OLMo-core's numpy fixed-sequence-length dataset."""
    name = NAME
    fields: ClassVar[dict] = {"dir": str, "dataset": str, "tokenizer": dict, "dtype": str, "sequence_length": int,
                              "instances": int, "parts": list, "draws": list, "files": dict}

    def write(self, st: StageInput) -> dict:
        hdir = handoff_dir(st.out, NAME, st.stage)
        hdir.mkdir(parents=True, exist_ok=True)
        tok = tokenizer(st.vocab)
        dtype = smallest_uint(tok["vocab_size"])
        sizes = part_sizes(sequence_count(st.sources, st.packing, st.seq_length), st.seq_length)
        shas, held = lay_out(st.sequences(tok["pad_token_id"]), sizes, dtype, st.seq_length, hdir)
        parts = []
        for j, (k, sha) in enumerate(zip(sizes, shas)):   # the digests of what was written, not read back
            tokens, mask = hdir / f"part-{j:03d}.npy", hdir / f"part-{j:03d}.mask.npy"
            parts.append({"instances": k, **{key: {"path": _rel(p, st.mdir), "bytes": p.stat().st_size, "sha256": h}
                                             for key, p, h in (("tokens", tokens, sha[0]), ("label_mask", mask, sha[1]))}})
        section = {"dir": _rel(hdir, st.out), "dataset": CONFIG_CLASS.rpartition(".")[2], "tokenizer": tok,
                   "dtype": dtype.name, "sequence_length": st.seq_length, "instances": sum(sizes), "parts": parts,
                   "draws": _draws(st.sources, held)}
        texts = self.texts(section, st.root, st.mdir, st.seq_length)
        for name, text in texts.items():
            atomic_write_bytes(hdir / name, text.encode())
        section["files"] = {name: {"path": _rel(hdir / name, st.mdir), "sha256": text_digest(text, st.root)}
                            for name, text in texts.items()}
        keep = {*texts, *(Path(p[key]["path"]).name for p in parts for key in ("tokens", "label_mask"))}
        for old in hdir.iterdir():          # parts of an earlier plan of this stage
            if old.name not in keep and old.is_file():
                old.unlink()
        return section

    def texts(self, section: dict, root: Path | str, base: Path, seq_length: int) -> dict[str, str]:
        def where(f):
            return f"{root}/{os.path.relpath(os.path.normpath(base / f['path']), base.parent)}".replace(os.sep, "/")
        config = {"_CLASS_": CONFIG_CLASS, "tokenizer": {"_CLASS_": TOKENIZER_CLASS, **section["tokenizer"],
                                                         "identifier": None},
                  "paths": [where(p["tokens"]) for p in section["parts"]],
                  "label_mask_paths": [where(p["label_mask"]) for p in section["parts"]],
                  "dtype": section["dtype"], "sequence_length": seq_length, "generate_doc_lengths": True,
                  "include_instance_metadata": False}
        return {CONFIG: json.dumps(config, indent=1, sort_keys=True) + "\n"}   # as the manifest holds its keys

    def leaves(self, section: dict) -> list[str]:
        files = [p[key] for p in section["parts"] for key in ("tokens", "label_mask")]
        return [f"{f['path']}:{f['sha256']}" for f in [*files, *section["files"].values()]]

    def summary(self, section: dict, seq_length: int) -> str:
        planned_ = sum(d["planned_tokens"] for d in section["draws"])
        drawn = sum(d["drawn_tokens"] for d in section["draws"])
        return (f"olmo_core hand-off: {len(section['parts'])} part(s), {section['instances']} instances of "
                f"{seq_length} ({section['dtype']}); draws {drawn:,} of {planned_:,} planned tokens")

    def check(self, m: dict, base: Path, check_location: bool) -> list[str]:
        from curation.mixture.sequences import stage_sequences

        sec, seq, problems = m[NAME], m["seq_length"], []
        tok = tokenizer(m["vocabulary"])
        if sec["tokenizer"] != tok or sec["dtype"] != smallest_uint(tok["vocab_size"]).name:
            problems.append("olmo_core: tokenizer or dtype does not follow from the manifest's vocabulary")
        if sec["sequence_length"] != seq:
            problems.append(f"olmo_core: sequence_length {sec['sequence_length']}, the stage's is {seq}")
        try:
            packing = (np.load(base / m["long_context"]["packing"]["path"], allow_pickle=False)
                       if m.get("long_context") else None)
            sizes = part_sizes(sequence_count(m["sources"], packing, seq), seq)
            want, held = lay_out(stage_sequences(base, m["sources"], m["stage_fingerprint"], seq,
                                                 tok["pad_token_id"], packing), sizes, np.dtype(sec["dtype"]), seq, None)
        except (OSError, ValueError, IndexError, KeyError, TypeError) as e:
            return [*problems, f"olmo_core: cannot rebuild the stage's sequences ({e})"]
        if [p["instances"] for p in sec["parts"]] != sizes or sec["instances"] != sum(sizes):
            problems.append(f"olmo_core: parts of {[p['instances'] for p in sec['parts']]} instances, the plan "
                            f"gives {sizes}")
        for p, shas in zip(sec["parts"], want):
            for key, sha in zip(("tokens", "label_mask"), shas):
                f = p[key]
                fp = Path(os.path.normpath(base / f["path"]))
                if not fp.is_file():
                    problems.append(f"olmo_core: {fp} is missing; re-run `curate run` to write the hand-off")
                elif fp.stat().st_size != f["bytes"] or sha256_file(fp) != f["sha256"] or f["sha256"] != sha:
                    problems.append(f"olmo_core: {fp} does not hold the {key.replace('_', ' ')} of the stage's "
                                    f"sequences (changed, or not the plan's)")
        if sec.get("draws") != _draws(m["sources"], held):
            problems.append(f"olmo_core.draws {sec.get('draws')} is not what the hand-off gives OLMo-core: "
                            f"{_draws(m['sources'], held)}")
        problems += check_texts(NAME, sec, self.texts(sec, "{out}", base, seq), base, check_location)
        return problems
