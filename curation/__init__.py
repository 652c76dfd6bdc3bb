"""curate: data curation and mixture accounting for multimodal LLM pretraining."""
__version__ = "0.1.0"
