"""``pargraph.onnx``: importable, so that programs that also export run; exporting is not
something pargraph does."""

from __future__ import annotations

from typing import Any


def export(*args: Any, **kwargs: Any) -> None:
    """Raises ``NotImplementedError``: save the weights with ``pargraph.save`` instead.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.onnx.export(None, None, "model.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    NotImplementedError: pargraph cannot export ONNX graphs; save the model's weights with ...
    """
    raise NotImplementedError("pargraph cannot export ONNX graphs; save the model's weights "
                              "with pargraph.save(model.state_dict(), path) and load them into "
                              "the exporting framework")


def is_in_onnx_export() -> bool:
    return False
