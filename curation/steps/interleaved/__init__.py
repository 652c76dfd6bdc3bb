"""Interleaved image-text documents (`modality: interleaved`): see `curation.steps.interleaved.modality`."""
