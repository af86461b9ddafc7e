"""``pargraph.utils``: data loading, activation checkpointing."""

from pargraph.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
