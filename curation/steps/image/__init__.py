"""Images: readers and checks, decoding, perceptual hashes, caption checks, the batch plan, the IBQ codec, tokenization."""
