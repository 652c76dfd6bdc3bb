"""Text: readers, normalisation, filters, PII, MinHash signatures, conversation turns, tokenization."""
