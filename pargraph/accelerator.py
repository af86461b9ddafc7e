"""``pargraph.accelerator``: there is none; pargraph computes on the CPU."""

from pargraph.cuda import is_available

__all__ = ["current_accelerator", "is_available"]


def current_accelerator() -> None:
    """Always ``None``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.accelerator.current_accelerator() is None
    True
    """
    return None
