"""Recurrent layers: RNN, LSTM and GRU, whole sequences and single cells."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pargraph import ops
from pargraph._tensor import Tensor, apply
from pargraph.factories import as_tensor, tensor, zeros
from pargraph.functions import cat, stack, where
from pargraph.nn import functional as F
from pargraph.nn import init
from pargraph.nn.module import Module, Parameter
from pargraph.nn.utils.rnn import PackedSequence, pad_packed_sequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _cell(mode: str, gates_x: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor,
          b_hh: Tensor | None, w_hr: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """One time step: the new hidden state (and cell state) from the input's part of the gates
    (``x W_ih^T + b_ih``) and the last state, with PyTorch's gate order and formulas."""
    if mode == "LSTM":  # one node per step (and one for its gradient): ops.lstm_cell
        both = apply(ops.lstm_cell, gates_x, h, c, w_hh, b_hh)
        h, c = both[0], both[1]
        if w_hr is not None:
            h = F.linear(h, w_hr)
        return h, c
    hidden = F.linear(h, w_hh, b_hh)
    if mode == "GRU":
        x_r, x_z, x_n = gates_x.chunk(3, -1)
        h_r, h_z, h_n = hidden.chunk(3, -1)
        r = (x_r + h_r).sigmoid()
        z = (x_z + h_z).sigmoid()
        n = (x_n + r * h_n).tanh()
        return n + z * (h - n), None  # (1 - z) * n + z * h, as PyTorch computes it
    total = gates_x + hidden
    return (total.tanh() if mode == "RNN_TANH" else total.relu()), None


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: parameters per layer and direction named as
    PyTorch names them (``weight_ih_l0``, ``bias_hh_l1_reverse``, ``weight_hr_l0`` for an
    LSTM's projection), so a PyTorch ``state_dict`` loads as it is."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        if not 0 <= float(dropout) <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self._label = name
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        dtype = np.dtype(np.float32) if dtype is None else np.dtype(getattr(dtype, "np", dtype))
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                layer_input = input_size if layer == 0 else real_hidden * directions
                shapes = {"weight_ih": (gate_size, layer_input),
                          "weight_hh": (gate_size, real_hidden)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(np.zeros(shape, dtype)))
                    self._flat_weights_names.append(kind + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in ±1/sqrt(hidden_size), as PyTorch initializes."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for name in self._flat_weights_names:
            init.uniform_(getattr(self, name), -bound, bound)

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters per layer and direction, in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (1 + self.bidirectional))
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[k:k + per]] for k in range(0, len(names), per)]

    def _weights(self, layer: int, direction: int) -> dict[str, Parameter | None]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return {kind: getattr(self, kind + suffix, None)
                for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")}

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        packed = isinstance(input, PackedSequence)
        lengths = None
        if packed:
            sorted_indices, unsorted_indices = input.sorted_indices, input.unsorted_indices
            padded, lengths = pad_packed_sequence(input)  # (L, N, H), in the packed order
            if sorted_indices is not None:
                padded = padded.index_select(1, sorted_indices)
                lengths = lengths.index_select(0, sorted_indices)
            x, batched = padded, True
        else:
            x = as_tensor(input)
            batched = x.dim() == 3
            if x.dim() not in (2, 3):
                raise ValueError(f"{self._label}: Expected input to be 2D or 3D, got "
                                 f"{x.dim()}D instead")
            if not batched:
                x = x.unsqueeze(1)
            elif self.batch_first:
                x = x.transpose(0, 1)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        steps, batch = x.shape[0], x.shape[1]
        directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size or self.hidden_size
        h0, c0 = self._initial_states(hx, batch, batched, real_hidden, x.dtype, packed, input)
        mask = None
        if lengths is not None:
            steps_index = np.arange(steps)[:, None]
            mask = tensor(steps_index < np.asarray(lengths.tolist())[None, :]).unsqueeze(-1)
        last_h, last_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, h, c = self._run_direction(layer_input, layer, direction, h0[k],
                                                None if c0 is None else c0[k], mask)
                outputs.append(out)
                last_h.append(h)
                last_c.append(c)
            # The whole sequence at once: the next layer projects it in one matrix product
            # per direction; the directions stay parallel branches.
            layer_input = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output, h_n = layer_input, stack(last_h)
        c_n = stack(last_c) if self.mode == "LSTM" else None
        if packed:
            if sorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = None if c_n is None else c_n.index_select(1, unsorted_indices)
            output = PackedSequence(*_pack_rows(output, input.batch_sizes),
                                    sorted_indices, unsorted_indices)
        elif not batched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def _initial_states(self, hx: Any, batch: int, batched: bool, real_hidden: int,
                        dtype: Any, packed: bool, input: Any) -> tuple[Tensor, Tensor | None]:
        directions = 2 if self.bidirectional else 1
        layers = self.num_layers * directions
        lstm = self.mode == "LSTM"
        if hx is None:
            h0 = zeros(layers, batch, real_hidden, dtype=dtype)
            return h0, (zeros(layers, batch, self.hidden_size, dtype=dtype) if lstm else None)
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise RuntimeError("LSTM: hx must be a tuple of two tensors (h_0, c_0)")
            h0, c0 = as_tensor(hx[0]), as_tensor(hx[1])
        else:
            h0, c0 = as_tensor(hx), None
        expected_dim = 3 if batched else 2
        for name, state in (("hx", h0), ("cx", c0)):
            if state is None:
                continue
            if state.dim() != expected_dim:
                raise RuntimeError(f"For {'batched' if batched else 'unbatched'} "
                                   f"{expected_dim - 1}-D input, {name} should also be "
                                   f"{expected_dim}-D but got {state.dim()}-D tensor")
        if not batched:
            h0 = h0.unsqueeze(1)
            c0 = None if c0 is None else c0.unsqueeze(1)
        if packed and input.sorted_indices is not None:
            h0 = h0.index_select(1, input.sorted_indices)
            c0 = None if c0 is None else c0.index_select(1, input.sorted_indices)
        for name, state, size in (("hidden", h0, real_hidden), ("cell", c0, self.hidden_size)):
            if state is not None and tuple(state.shape) != (layers, batch, size):
                raise RuntimeError(f"Expected {name} size {(layers, batch, size)}, got "
                                   f"{tuple(state.shape)}")
        return h0, c0

    def _run_direction(self, x: Tensor, layer: int, direction: int, h: Tensor,
                       c: Tensor | None, mask: Tensor | None) -> tuple[Tensor, Tensor, Any]:
        """One direction of one layer over the sequence ``x`` (the input, or the last layer's
        outputs): its outputs (steps, batch, hidden), and its last states. The input's part
        of the gates is one matrix product for the whole sequence; the recurrence over whole
        sequences without a projection is one node (``ops.lstm_sequence``,
        ``ops.rnn_sequence``), over packed ones a few nodes per step."""
        w = self._weights(layer, direction)
        length = x.shape[0]
        gates_x = F.linear(x, w["weight_ih"], w["bias_ih"])
        if mask is None and w["weight_hr"] is None and length:
            last = 0 if direction else length - 1
            if self.mode == "LSTM":
                states = apply(ops.lstm_sequence, gates_x, h, c, w["weight_hh"], w["bias_hh"],
                               reverse=bool(direction))
                return states[:, 0], states[last, 0], states[last, 1]
            states = apply(ops.rnn_sequence, gates_x, h, w["weight_hh"], w["bias_hh"],
                           mode=self.mode, reverse=bool(direction))
            return states[:, 0], states[last, 0], None
        steps = range(length - 1, -1, -1) if direction else range(length)
        outputs: list[Tensor | None] = [None] * length
        for t in steps:
            new_h, new_c = _cell(self.mode, gates_x[t], h, c, w["weight_hh"], w["bias_hh"],
                                 w["weight_hr"])
            if mask is not None:  # a finished sequence keeps its state; its output is 0
                new_h = where(mask[t], new_h, h)
                new_c = None if c is None else where(mask[t], new_c, c)
                outputs[t] = where(mask[t], new_h, zeros(1, dtype=new_h.dtype))
            else:
                outputs[t] = new_h
            h, c = new_h, new_c
        return stack(outputs), h, c

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


def _pack_rows(padded: Tensor, batch_sizes: Tensor) -> tuple[Tensor, Tensor]:
    """A padded (L, N, H) output's rows in a PackedSequence's order: step by step, the
    sequences still running at that step."""
    sizes = [int(n) for n in batch_sizes.tolist()]
    return cat([padded[t, :n] for t, n in enumerate(sizes)], 0), batch_sizes


class RNN(RNNBase):
    """Elman recurrent layers: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``
    (``nonlinearity="relu"``: ReLU), stacked ``num_layers`` deep, optionally bidirectional.

    Examples
    --------
    >>> import pargraph
    >>> _ = pargraph.manual_seed(0)
    >>> rnn = pargraph.nn.RNN(4, 8, num_layers=2, bidirectional=True)
    >>> output, h_n = rnn(pargraph.randn(5, 3, 4))  # (seq, batch, features)
    >>> tuple(output.shape), tuple(h_n.shape)
    ((5, 3, 16), (4, 3, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None, proj_size: int = 0) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory layers, PyTorch's gates (input, forget, cell, output), with an
    optional projection of the hidden state (``proj_size``).

    Examples
    --------
    >>> import pargraph
    >>> _ = pargraph.manual_seed(0)
    >>> lstm = pargraph.nn.LSTM(4, 8, batch_first=True)
    >>> output, (h_n, c_n) = lstm(pargraph.randn(3, 5, 4))  # (batch, seq, features)
    >>> tuple(output.shape), tuple(h_n.shape), tuple(c_n.shape)
    ((3, 5, 8), (1, 3, 8), (1, 3, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit layers, PyTorch's gates (reset, update, new).

    Examples
    --------
    >>> import pargraph
    >>> _ = pargraph.manual_seed(0)
    >>> gru = pargraph.nn.GRU(4, 8)
    >>> output, h_n = gru(pargraph.randn(5, 4))  # unbatched: (seq, features)
    >>> tuple(output.shape), tuple(h_n.shape)
    ((5, 8), (1, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None,
                 proj_size: int = 0) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class RNNCellBase(Module):
    """What the cells share: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = (mode, input_size,
                                                                   hidden_size, bias)
        gate_size = _GATES[mode] * hidden_size
        dtype = np.dtype(np.float32) if dtype is None else np.dtype(getattr(dtype, "np", dtype))
        self.weight_ih = Parameter(np.zeros((gate_size, input_size), dtype))
        self.weight_hh = Parameter(np.zeros((gate_size, hidden_size), dtype))
        if bias:
            self.bias_ih = Parameter(np.zeros(gate_size, dtype))
            self.bias_hh = Parameter(np.zeros(gate_size, dtype))
        else:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ±1/sqrt(hidden_size), as PyTorch initializes."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def forward(self, input: Tensor, hx: Any = None) -> Any:
        x = as_tensor(input)
        name = type(self).__name__
        if x.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.dim()}D instead")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[-1]} "
                               f"expected {self.input_size}")
        batched = x.dim() == 2
        if not batched:
            x = x.unsqueeze(0)
        lstm = self.mode == "LSTM"
        if hx is None:
            h = zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
            c = zeros(x.shape[0], self.hidden_size, dtype=x.dtype) if lstm else None
        elif lstm:
            h, c = (as_tensor(v) if batched else as_tensor(v).unsqueeze(0) for v in hx)
        else:
            h = as_tensor(hx) if batched else as_tensor(hx).unsqueeze(0)
            c = None
        h, c = _cell(self.mode, F.linear(x, self.weight_ih, self.bias_ih), h, c,
                     self.weight_hh, self.bias_hh)
        if not batched:
            h = h.squeeze(0)
            c = None if c is None else c.squeeze(0)
        return (h, c) if lstm else h

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU).

    Examples
    --------
    >>> import pargraph
    >>> cell = pargraph.nn.RNNCell(4, 8)
    >>> tuple(cell(pargraph.randn(3, 4)).shape)
    (3, 8)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    """One LSTM step: returns ``(h', c')``.

    Examples
    --------
    >>> import pargraph
    >>> h, c = pargraph.nn.LSTMCell(4, 8)(pargraph.randn(3, 4))
    >>> tuple(h.shape), tuple(c.shape)
    ((3, 8), (3, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(RNNCellBase):
    """One GRU step.

    Examples
    --------
    >>> import pargraph
    >>> tuple(pargraph.nn.GRUCell(4, 8)(pargraph.randn(4)).shape)
    (8,)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
