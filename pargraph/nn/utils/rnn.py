"""``pargraph.nn.utils.rnn``: batches of sequences of different lengths, padded or packed, as
PyTorch's recurrent layers take them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from pargraph._tensor import Tensor
from pargraph.factories import as_tensor, full, tensor
from pargraph.functions import cat, stack


class PackedSequence(NamedTuple):
    """A batch of sequences of different lengths, step by step: ``data`` holds, for each time
    step, the rows of the sequences still running then (``batch_sizes[t]`` of them, the
    longest sequences first); ``sorted_indices`` maps that order to the batch's.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pack_sequence
    >>> packed = pack_sequence([pargraph.tensor([1.0, 2.0, 3.0]), pargraph.tensor([4.0])])
    >>> packed.data.tolist(), packed.batch_sizes.tolist()
    ([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """The data converted (``.to(dtype)``), the rest as it is."""
        return self._replace(data=self.data.to(*args, **kwargs))

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def _lengths(lengths: Any) -> list[int]:
    values = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    values = [int(v) for v in np.asarray(values).reshape(-1)]
    if any(v <= 0 for v in values):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    return values


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (``(L, N, *)``, or ``(N, L, *)`` with ``batch_first``) of
    sequences of ``lengths``. With ``enforce_sorted`` the lengths must be decreasing;
    otherwise the batch is sorted here and the order kept in the result.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pack_padded_sequence
    >>> padded = pargraph.tensor([[1.0, 4.0], [2.0, 0.0]])  # (L=2, N=2)
    >>> pack_padded_sequence(padded, [2, 1]).data.tolist()
    [1.0, 4.0, 2.0]
    """
    x = as_tensor(input)
    if batch_first:
        x = x.transpose(0, 1)
    sizes = _lengths(lengths)
    if len(sizes) != x.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(sizes)} (batch_size={x.shape[1]})")
    sorted_indices = unsorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(sizes, sizes[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
    else:
        order = sorted(range(len(sizes)), key=lambda i: -sizes[i])  # stable, as PyTorch's
        sorted_indices = tensor(order)
        unsorted_indices = tensor(np.argsort(order))
        x = x.index_select(1, sorted_indices)
        sizes = [sizes[i] for i in order]
    if sizes[0] > x.shape[0]:
        raise RuntimeError(f"Expected the longest length ({sizes[0]}) to be at most the "
                           f"padded length ({x.shape[0]})")
    batch_sizes = [sum(1 for n in sizes if n > t) for t in range(sizes[0])]
    data = cat([x[t, :n] for t, n in enumerate(batch_sizes)], 0)
    return PackedSequence(data, tensor(batch_sizes), sorted_indices, unsorted_indices)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None
                        ) -> tuple[Tensor, Tensor]:
    """The padded batch a :class:`PackedSequence` holds, in the batch's own order, and each
    sequence's length.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pack_sequence, pad_packed_sequence
    >>> packed = pack_sequence([pargraph.tensor([1.0]), pargraph.tensor([2.0, 3.0])],
    ...                        enforce_sorted=False)
    >>> padded, lengths = pad_packed_sequence(packed, batch_first=True)
    >>> padded.tolist(), lengths.tolist()
    ([[1.0, 0.0], [2.0, 3.0]], [1, 2])
    """
    data, batch_sizes = sequence.data, [int(n) for n in sequence.batch_sizes.tolist()]
    steps, batch = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the "
                             f"longest sequence in input, but got total_length={total_length} "
                             f"and max sequence length being {steps}")
    rows, start = [], 0
    tail = tuple(data.shape[1:])
    for n in batch_sizes:
        part = data[start:start + n]
        if n < batch:
            filler = full((batch - n,) + tail, padding_value, dtype=data.dtype)
            part = cat([part, filler], 0)
        rows.append(part)
        start += n
    for _ in range((total_length or steps) - steps):
        rows.append(full((batch,) + tail, padding_value, dtype=data.dtype))
    padded = stack(rows)
    lengths = tensor([sum(1 for n in batch_sizes if n > i) for i in range(batch)])
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences of different lengths (``(L_i, *)`` each) into one padded tensor,
    ``(L, N, *)`` (``(N, L, *)`` with ``batch_first``).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pad_sequence
    >>> pad_sequence([pargraph.tensor([1.0, 2.0]), pargraph.tensor([3.0])],
    ...              batch_first=True).tolist()
    [[1.0, 2.0], [3.0, 0.0]]
    """
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    tensors = [as_tensor(s) for s in sequences]
    if not tensors:
        raise RuntimeError("received an empty list of sequences")
    longest = max(t.shape[0] for t in tensors)
    padded = []
    for t in tensors:
        missing = longest - t.shape[0]
        if missing:
            filler = full((missing,) + tuple(t.shape[1:]), padding_value, dtype=t.dtype)
            t = cat([t, filler] if padding_side == "right" else [filler, t], 0)
        padded.append(t)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack sequences of different lengths (see :func:`pack_padded_sequence`).

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pack_sequence
    >>> pack_sequence([pargraph.ones(3), pargraph.ones(2)]).batch_sizes.tolist()
    [2, 2, 1]
    """
    lengths = [as_tensor(s).shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths,
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Any,
                   batch_first: bool = False) -> list[Tensor]:
    """The sequences of a padded batch, each cut to its length.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import unpad_sequence
    >>> [s.tolist() for s in unpad_sequence(pargraph.tensor([[1.0, 2.0], [3.0, 0.0]]),
    ...                                     [2, 1], batch_first=True)]
    [[1.0, 2.0], [3.0]]
    """
    x = as_tensor(padded_sequences)
    if not batch_first:
        x = x.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_lengths(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The sequences a :class:`PackedSequence` holds, in the batch's order.

    Examples
    --------
    >>> import pargraph
    >>> from pargraph.nn.utils.rnn import pack_sequence, unpack_sequence
    >>> [s.tolist() for s in unpack_sequence(pack_sequence([pargraph.ones(2), pargraph.ones(1)]))]
    [[1.0, 1.0], [1.0]]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
