"""Training: a small hybrid Mamba-2 / attention / MoE language model and the loop that trains it."""
