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


def manual_seed(seed: int) -> None:
    """Nothing: there is no GPU, and PyTorch ignores the call silently then too.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cuda.manual_seed(0)
    """


def manual_seed_all(seed: int) -> None:
    """Nothing, as :func:`manual_seed` (a seeding helper's usual line).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.cuda.manual_seed_all(0)
    """
