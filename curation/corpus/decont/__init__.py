"""Benchmark decontamination: the benchmark registry, the n-gram index, image matching, review, and the phase."""
