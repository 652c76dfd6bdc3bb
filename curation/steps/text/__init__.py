"""Text: the modality (`modality.py`), readers (`readers/`), filters (`filters/`), normalisation, PII,
tokenization and MinHash shingling. Conversations (SFT data) are `curation.steps.conversation`."""
