"""Mixtures: stage planning, long context, sampling plans, manifests and their Merkle roots."""
