"""Megatron indexed shards: writer, reader of the index, merge."""
from curation.shards.indexed import (
    IndexedWriter,
    ResumableWriter,
    merge,
    read_index,
    read_tokens,
)

__all__ = ["IndexedWriter", "ResumableWriter", "merge", "read_index", "read_tokens"]
