"""``pargraph.utils``: data loading."""

from pargraph.utils import data

__all__ = ["data"]
