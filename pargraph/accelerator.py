"""``pargraph.accelerator``: there is none; pargraph computes on the CPU."""


def is_available() -> bool:
    """Always ``False``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.accelerator.is_available()
    False
    """
    return False


def current_accelerator() -> None:
    """Always ``None``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.accelerator.current_accelerator() is None
    True
    """
    return None
