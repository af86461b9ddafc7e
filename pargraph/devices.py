"""Devices and memory formats: pargraph runs on the CPU. ``device("cpu")`` objects are
accepted wherever PyTorch takes a device; any other device is a clear error where it is used.
The memory formats (``channels_last``...) are accepted and change nothing: a tensor's values
are one row-major array."""

from __future__ import annotations

from typing import Any


class device:  # noqa: N801  (PyTorch's name)
    """A device: ``device("cpu")``, ``device("cpu", 0)`` or ``device("cuda:0")``.

    Examples
    --------
    >>> import pargraph
    >>> d = pargraph.device("cpu"); d.type, str(d)
    ('cpu', 'cpu')
    """

    def __init__(self, kind: Any, index: int | None = None) -> None:
        if isinstance(kind, device):
            kind, index = kind.type, kind.index
        name = str(kind)
        if ":" in name:
            name, number = name.split(":", 1)
            index = int(number)
        self.type, self.index = name, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='{self.type}'" + (
            "" if self.index is None else f", index={self.index}") + ")"

    def __eq__(self, other: object) -> bool:
        return str(self) == str(device(other)) if isinstance(other, (device, str)) else False

    def __hash__(self) -> int:
        return hash(str(self))


def set_default_device(where: Any) -> None:
    """Only the CPU exists here: ``"cpu"`` is accepted, anything else refused.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.set_default_device("cpu")
    """
    check_device(where, "set_default_device")


def check_device(device: Any, where: str) -> None:
    """Accept the CPU (``"cpu"``, ``device("cpu")``, ``None``); refuse any other device."""
    if device is None:
        return
    name = str(getattr(device, "type", device))
    if name != "cpu" and not name.startswith("cpu:"):
        raise RuntimeError(f"{where}: pargraph runs on the CPU; device {str(device)!r} is not "
                           "available (use 'cpu')")


class _Named:
    """A named token PyTorch programs pass around, printed as ``pargraph.<name>``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"pargraph.{self.name}"


class memory_format(_Named):  # noqa: N801  (PyTorch's name)
    """A memory layout PyTorch programs ask for (``x.to(memory_format=channels_last)``):
    accepted, and the values stay one row-major array.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.channels_last
    pargraph.channels_last
    """


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


class layout(_Named):  # noqa: N801  (PyTorch's name)
    """How a tensor's values are stored: dense arrays, ``strided``, or ``sparse_coo``
    (``pargraph.sparse``).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.ones(2).layout
    pargraph.strided
    """


strided = layout("strided")
sparse_coo = layout("sparse_coo")
