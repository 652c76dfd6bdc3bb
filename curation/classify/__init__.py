"""Train text classifiers (quality, toxicity) reproducibly: `curate classifier train SPEC --out DIR`.

A layer beside `train/` and `report/`: it imports `core`, `recipe`, `steps` (the readers, the
language ID and the scorer the record steps use), and nothing above. The record steps that apply its
models live in `curation.steps.text.filters.quality`; the card format they check is defined there too.
"""
from curation.classify.spec import ClassifierSpec, load_spec  # noqa: F401
from curation.classify.train import Trained, train_classifier  # noqa: F401
