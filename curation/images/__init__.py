"""Images: decoding and validation, perceptual hashes (shared by image dedup and decontamination)."""
