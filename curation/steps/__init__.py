"""Pipeline steps: the step contract (`base`), readers, normalisation, filters, tokenization."""
from curation.steps.base import Drop, Filter, QuarantineSink, Record, Step, StepStats

__all__ = ["Drop", "Filter", "QuarantineSink", "Record", "Step", "StepStats"]
