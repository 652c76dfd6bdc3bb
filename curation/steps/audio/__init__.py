"""Audio: clip manifests and checks, spectral fingerprints, the WavTokenizer codec, interleaving, tokenization."""
