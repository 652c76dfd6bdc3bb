"""Megatron indexed shards: writer, reader of the index, merge."""
from curation.shards.indexed import (
    IndexedWriter,
    merge,
    read_index,
    read_tokens,
)

__all__ = ["IndexedWriter", "merge", "read_index", "read_tokens"]
