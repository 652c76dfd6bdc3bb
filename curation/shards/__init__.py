"""Megatron indexed shards: writer, reader of the index, merge."""
from curation.shards.indexed import IndexedWriter, read_index, read_tokens
from curation.shards.merging import merge

__all__ = ["IndexedWriter", "merge", "read_index", "read_tokens"]
