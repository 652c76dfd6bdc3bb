"""Benchmark decontamination: a benchmark registry, an n-gram index, matching, review and the guard."""
