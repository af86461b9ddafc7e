"""``pargraph.cuda``: pargraph is a CPU library; programs that ask get a clear "no"."""


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
