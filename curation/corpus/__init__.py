"""Corpus-wide phases: exact, MinHash, image and audio near-duplicates, decontamination."""
