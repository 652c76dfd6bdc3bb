"""Tokenizer training (text); tokenization steps live in `curation.steps`."""
