"""``pargraph.version``: what PyTorch programs read from ``torch.version`` and
``torch.__version__`` (no CUDA here).

Programs compare ``torch.__version__`` to pick code paths (``>= (2, 0)``, ``>= "1.9"``,
``version.parse(torch.__version__)``), so it names the PyTorch release whose API pargraph
follows, with pargraph's own release as its local label: ``2.13.0+pargraph.0.1.0``, as
PyTorch's own is ``2.13.0+cpu``. pip's metadata and :data:`release` give pargraph's release.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from packaging.version import InvalidVersion, Version

#: pargraph's own release (pip's metadata, the images' tags).
release = "0.1.0"
#: The PyTorch release whose API pargraph follows: the one its tests compare against.
torch_api = "2.13.0"


class TorchVersion(str):
    """A version string that compares as PyTorch's ``torch.__version__`` does: by release,
    with another string, a tuple of numbers or a ``packaging`` version.

    Examples
    --------
    >>> v = TorchVersion("2.13.0+pargraph.0.1.0")
    >>> v >= (2, 0), v >= "2.1", v < "3", v == "2.13.0+pargraph.0.1.0"
    (True, True, True, True)
    """

    def _compare(self, other: Any, method: str) -> bool:
        # As PyTorch's: a string, tuple or ``packaging`` version compares by release; what is
        # no version at all ("parrot") compares as a plain string.
        try:
            if isinstance(other, str):
                theirs = Version(other)
            elif isinstance(other, Version):
                theirs = other
            elif isinstance(other, Iterable):
                theirs = Version(".".join(str(part) for part in other))
            else:
                raise InvalidVersion(other)
            return getattr(Version(self), method)(theirs)
        except InvalidVersion:
            return getattr(super(), method)(other)

    def __gt__(self, other: Any) -> bool:
        return self._compare(other, "__gt__")

    def __ge__(self, other: Any) -> bool:
        return self._compare(other, "__ge__")

    def __lt__(self, other: Any) -> bool:
        return self._compare(other, "__lt__")

    def __le__(self, other: Any) -> bool:
        return self._compare(other, "__le__")

    def __eq__(self, other: Any) -> bool:
        return self._compare(other, "__eq__")

    __hash__ = str.__hash__


__version__ = TorchVersion(f"{torch_api}+pargraph.{release}")
#: The CUDA version pargraph was built with: none, it runs on the CPU.
cuda = None
hip = None
debug = False
