"""``pargraph.cuda``: pargraph is a CPU library; programs that ask get a clear "no"
(``pargraph.cuda.amp`` is :mod:`pargraph.amp`'s other path)."""

from pargraph.cuda import amp  # noqa: F401


def is_available() -> bool:
    """Always ``False``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cuda.is_available()
    False
    """
    return False


def device_count() -> int:
    """Always 0.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cuda.device_count()
    0
    """
    return 0
