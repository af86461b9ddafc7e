"""The op database: pargraph's ops checked against PyTorch by machine.

One :class:`OpInfo` per op, made by families (unary and binary elementwise, reductions, scans
and sorts, shapes, activations and other ``nn.functional`` ops, indexing, factories). Each entry
calls the op in the forms PyTorch has (``torch.exp(x)``, ``x.exp()``, ``x.exp_()``, ``out=``)
on samples its family generates: dtypes from bool to float64, shapes from 0-d and empty to
broadcast, non-contiguous inputs (transposed, sliced, flipped, expanded), edge values (±0, ±inf,
NaN, the largest and smallest finite, integer bounds) and every keyword spelling PyTorch takes
(``dim``/``axis``, ``keepdim``/``keepdims``, negative and tuple dims). :func:`check` runs a
sample on both frameworks and compares the values (with dtype-aware tolerances), the result's
dtype and shape, the gradients of float64 inputs, and the class of an error.

``tests/test_op_db.py`` runs every entry on a sample of its cases;
``python -m tests.op_db`` runs all of them and prints each failure.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")

#: Tolerances by result dtype: (rtol, atol).
TOLERANCE = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-6, 1e-5),
             "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5),
             "complex128": (1e-7, 1e-7)}


# --- inputs -----------------------------------------------------------------------------------


@dataclass
class Input:
    """A tensor argument: its values (float64 or int64 numpy, or bool), dtype, and how it is
    laid out (``contiguous``, ``transposed``, ``sliced``, ``flipped``, ``expanded``)."""

    values: np.ndarray
    dtype: str
    layout: str = "contiguous"
    requires_grad: bool = False

    def make(self, t: Any) -> Any:
        """The tensor in framework ``t`` (torch or pargraph), laid out as asked."""
        dtype = getattr(t, self.dtype)
        v = self.values
        if self.layout == "transposed" and v.ndim >= 2:
            base = t.tensor(np.ascontiguousarray(np.swapaxes(v, -1, -2)), dtype=dtype)
            x = base.transpose(-1, -2)
        elif self.layout == "sliced" and v.ndim >= 1:
            wide = np.repeat(v, 2, axis=-1)
            x = t.tensor(wide, dtype=dtype)[..., ::2]
        elif self.layout == "flipped" and v.ndim >= 1:
            x = t.tensor(np.ascontiguousarray(np.flip(v, -1)), dtype=dtype).flip(-1)
        elif self.layout == "expanded" and v.ndim >= 1 and v.shape[0] > 0 and (
                v == v[:1]).all():
            x = t.tensor(v[:1], dtype=dtype).expand(*v.shape)
        else:
            x = t.tensor(v, dtype=dtype)
        if self.requires_grad:
            x = x.detach().requires_grad_(True)
        return x


def edge_values(dtype: str) -> list:
    """The values where ops go wrong: zeros, infinities, NaN, the extremes of ``dtype``."""
    if dtype == "bool":
        return [True, False]
    if dtype in INTS:
        info = np.iinfo(dtype)
        return [0, 1, -1 if info.min < 0 else 2, int(info.max), int(info.min)]
    big = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028235e38,
           "float64": 1.7976931348623157e308}[dtype]
    tiny = {"float16": 6.104e-05, "bfloat16": 1.1755e-38, "float32": 1.1754944e-38,
            "float64": 2.2250738585072014e-308}[dtype]
    return [0.0, -0.0, math.inf, -math.inf, math.nan, big, -big, tiny, 1.0, -1.0, 0.5]


def values(rng: np.random.Generator, shape: tuple, dtype: str, edges: bool = False,
           low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """Random values of ``shape`` that fit ``dtype``, some replaced by edge values."""
    if dtype == "bool":
        out = rng.random(shape) < 0.5
    elif dtype in INTS:
        lo = 0 if dtype == "uint8" else -5
        out = rng.integers(lo, 6, shape).astype(np.int64)
    else:
        out = rng.uniform(low, high, shape)
        if dtype in ("float16", "bfloat16"):  # values the dtype holds exactly
            out = np.round(out * 8) / 8
    if edges and out.size:
        picks = edge_values(dtype)
        flat = out.reshape(-1)
        for k in rng.choice(flat.size, size=min(flat.size, 3), replace=False):
            flat[k] = picks[int(rng.integers(len(picks)))]
    return out


# --- entries ----------------------------------------------------------------------------------


@dataclass
class Sample:
    """One call: tensor and plain arguments, keyword arguments, and its description."""

    args: list
    kwargs: dict = field(default_factory=dict)
    note: str = ""

    def build(self, t: Any) -> tuple[list, dict, list]:
        """The arguments in framework ``t``, and the tensors that get gradients."""
        made = [a.make(t) if isinstance(a, Input) else a for a in self.args]
        kwargs = {k: v.make(t) if isinstance(v, Input) else v for k, v in self.kwargs.items()}
        grads = [m for a, m in zip(self.args, made) if isinstance(a, Input) and a.requires_grad]
        return made, kwargs, grads

    def __str__(self) -> str:
        def show(a: Any) -> str:
            if isinstance(a, Input):
                return f"{a.dtype}{list(a.values.shape)}" + (
                    f"/{a.layout}" if a.layout != "contiguous" else "")
            return repr(a)
        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})" + (f" [{self.note}]" if self.note else "")


@dataclass
class OpInfo:
    """One op: how to call it in each form, and its samples.

    ``call(t, form, *args, **kwargs)`` calls the op in framework ``t``; ``forms`` lists the
    forms it has (``function``, ``method``, ``inplace``, ``out``); ``samples(rng)`` yields
    :class:`Sample`; ``grad``: whether float64 samples are differentiated.
    """

    name: str
    call: Callable
    samples: Callable[[np.random.Generator], Iterator[Sample]]
    forms: tuple = ("function",)
    grad: bool = True
    family: str = ""

    def __str__(self) -> str:
        return self.name


def _function(name: str, module: str = "") -> Callable:
    def call(t: Any, form: str, *args: Any, **kwargs: Any) -> Any:
        where = t
        for part in module.split(".") if module else ():
            where = getattr(where, part)
        if form == "method":
            return getattr(args[0], name)(*args[1:], **kwargs)
        if form == "inplace":
            return getattr(args[0], name + "_")(*args[1:], **kwargs)
        if form == "out":
            result = getattr(where, name)(*args, **kwargs)
            out = t.empty_like(result)
            returned = getattr(where, name)(*args, **kwargs, out=out)
            return out if returned is out else ("out= returned another tensor", returned)
        return getattr(where, name)(*args, **kwargs)
    return call


# --- families ---------------------------------------------------------------------------------

SHAPES = [(), (0,), (4,), (2, 3), (3, 1, 2)]
LAYOUTS = ("transposed", "sliced", "flipped")

UNARY_FLOAT = ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh "
               "cosh tanh asinh acosh atanh sigmoid erf erfc erfinv reciprocal lgamma digamma "
               "trunc frac ceil floor round sinc logit i0 deg2rad rad2deg").split()
UNARY_ANY = "abs neg sign square".split()
UNARY_PREDICATE = "isnan isinf isfinite isposinf isneginf signbit logical_not".split()


def _unary_samples(dtypes: tuple) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for dtype in dtypes:
            for shape in SHAPES:
                yield Sample([Input(values(rng, shape, dtype, edges=True), dtype)])
        for layout in LAYOUTS:
            yield Sample([Input(values(rng, (3, 4), "float32"), "float32", layout)], note=layout)
        yield Sample([Input(values(rng, (2, 3), "float64", low=0.1, high=0.9), "float64",
                            requires_grad=True)], note="grad")
        yield Sample([Input(values(rng, (4,), "float64", low=-0.9, high=-0.1), "float64",
                            requires_grad=True)], note="grad")
    return samples


BINARY = ("add sub mul div true_divide floor_divide remainder fmod pow atan2 hypot maximum minimum "
          "fmax fmin eq ne lt le gt ge logical_and logical_or logical_xor copysign xlogy "
          "nextafter").split()
#: Binary ops PyTorch has no in-place method of.
IN_PLACE_LESS = {"maximum", "minimum", "fmax", "fmin"}
BINARY_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2,)), ((0, 2), (2,))]


#: Binary ops whose PyTorch kernel dies of SIGFPE at integer extremes (``lcm`` of int64's
#: smallest value): their samples keep away from them.
NO_EDGES = {"gcd", "lcm"}


def _binary_samples(name: str) -> Callable:
    edges = name not in NO_EDGES

    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for dtype in DTYPES:
            for left, right in BINARY_PAIRS:
                yield Sample([Input(values(rng, left, dtype, edges=edges), dtype),
                              Input(values(rng, right, dtype, edges=edges), dtype)])
        for a, b in [("int64", "float32"), ("bool", "int64"), ("uint8", "int8"),
                     ("float16", "float32"), ("int32", "float64"), ("bfloat16", "float16")]:
            yield Sample([Input(values(rng, (2, 3), a), a), Input(values(rng, (3,), b), b)],
                         note="promotion")
        for dtype in ("int64", "float32", "bool"):
            for scalar in (2, -1.5, True):
                yield Sample([Input(values(rng, (3,), dtype), dtype), scalar], note="scalar")
        yield Sample([Input(values(rng, (3, 4), "float32"), "float32", "transposed"),
                      Input(values(rng, (3, 4), "float32"), "float32", "flipped")])
        yield Sample([Input(values(rng, (2, 3), "float64", low=0.5, high=2), "float64",
                            requires_grad=True),
                      Input(values(rng, (2, 3), "float64", low=0.5, high=2), "float64",
                            requires_grad=True)], note="grad")
        yield Sample([Input(values(rng, (2, 3), "float64", low=0.5, high=2), "float64",
                            requires_grad=True),
                      Input(values(rng, (3,), "float64", low=0.5, high=2), "float64",
                            requires_grad=True)], note="grad, broadcast")
    return samples


REDUCTIONS = ("sum mean prod amax amin max min argmax argmin std var logsumexp all any nansum "
              "nanmean median nanmedian count_nonzero std_mean var_mean aminmax").split()
#: Reductions that take one dim only (an int), not a tuple.
ONE_DIM = {"max", "min", "argmax", "argmin", "median", "nanmedian", "logsumexp_one"}
#: Reductions that take no ``keepdim``.
NO_KEEPDIM = {"count_nonzero"}


def _reduction_samples(name: str) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        dtypes = DTYPES if name not in ("mean", "std", "var", "nanmean", "logsumexp",
                                        "std_mean", "var_mean") else FLOATS + ("int64",)
        for dtype in dtypes:
            for shape in [(), (4,), (2, 3), (0, 3), (2, 0)]:
                yield Sample([Input(values(rng, shape, dtype, edges=True), dtype)])
        shape = (2, 3, 4)
        dims: list = [0, -1, 1] + ([] if name in ONE_DIM else [(0, 2), (-1, 0), ()])
        for dim in dims:
            for keep in ((False, True) if name not in NO_KEEPDIM else (None,)):
                x = Input(values(rng, shape, "float32", edges=bool(rng.random() < 0.3)),
                          "float32")
                kwargs = {} if keep is None else {"keepdim": keep}
                yield Sample([x, dim], kwargs)
                spelled = {"axis": dim}
                if keep is not None:
                    spelled["keepdims"] = keep
                yield Sample([x], spelled, note="numpy spellings")
        for d in (0, -1):  # a 0-d tensor has one dimension for a dim-taking op
            yield Sample([Input(values(rng, (), "float32"), "float32"), d], note="0-d")
        yield Sample([Input(values(rng, (2, 3), "float32"), "float32"), 2], note="bad dim")
        if name not in ONE_DIM:
            yield Sample([Input(values(rng, (2, 3), "float32"), "float32"), (0, 0)],
                         note="repeated dim")
        yield Sample([Input(values(rng, (3, 4), "float32"), "float32", "transposed"), 1])
        yield Sample([Input(values(rng, (3, 4), "float64"), "float64", requires_grad=True)],
                     note="grad")
        yield Sample([Input(values(rng, (3, 4), "float64"), "float64", requires_grad=True), 1],
                     note="grad")
    return samples


SCANS = "cumsum cumprod cummax cummin logcumsumexp softmax log_softmax sort argsort".split()


def _scan_samples(name: str) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        dtypes = FLOATS if name in ("logcumsumexp", "softmax", "log_softmax") else DTYPES
        for dtype in dtypes:
            for shape in [(4,), (2, 3), (0, 3)]:
                yield Sample([Input(values(rng, shape, dtype, edges=True), dtype), -1])
        for d in (0, -1, 1):
            yield Sample([Input(values(rng, (), "float32"), "float32"), d], note="0-d")
        yield Sample([Input(values(rng, (2, 3, 4), "float32"), "float32"), 1])
        yield Sample([Input(values(rng, (2, 3), "float32"), "float32")], {"dim": 0})
        yield Sample([Input(values(rng, (2, 3), "float32"), "float32"), 2], note="bad dim")
        yield Sample([Input(values(rng, (3, 4), "float32"), "float32", "flipped"), 0])
        yield Sample([Input(values(rng, (3, 4), "float64"), "float64", requires_grad=True), 1],
                     note="grad")
    return samples


def _shape_entries() -> list[OpInfo]:
    """Shape ops, each with its own argument samples."""
    def entry(name: str, argsets: list, dtypes: tuple = DTYPES, forms=("function", "method"),
              shape: tuple = (2, 3, 4)) -> OpInfo:
        def samples(rng: np.random.Generator) -> Iterator[Sample]:
            for dtype in dtypes:
                for args in argsets:
                    yield Sample([Input(values(rng, shape, dtype, edges=True), dtype), *args])
            yield Sample([Input(values(rng, shape, "float32"), "float32", "transposed"),
                          *argsets[0]])
            yield Sample([Input(values(rng, shape, "float64"), "float64", requires_grad=True),
                          *argsets[0]], note="grad")
        return OpInfo(name, _function(name), samples, forms, family="shapes")

    return [
        entry("flip", [[(0,)], [(0, 2)], [(-1,)], [(0, 0)], [(3,)]]),
        entry("roll", [[1, 0], [-2, -1], [(1, 2), (0, 2)], [5]]),
        entry("transpose", [[0, 1], [-1, 0], [2, 2], [0, 3]]),
        entry("permute", [[(2, 0, 1)], [(0, 0, 1)], [(-1, 0, 1)]], forms=("function",)),
        entry("squeeze", [[], [0], [(0, 1)]], shape=(1, 3, 1)),
        entry("unsqueeze", [[0], [-1], [3], [4], [-5]]),
        entry("tril", [[], [1], [-1], [5]], shape=(3, 4)),
        entry("triu", [[], [1], [-1], [-5]], shape=(3, 4)),
        entry("movedim", [[0, 2], [(0, 1), (2, 0)], [-1, 0]]),
        entry("narrow", [[0, 0, 1], [2, 1, 2], [-1, 3, 1], [1, 2, 5]]),
        entry("diagonal", [[], [1], [0, 0, 2], [-1, 1, 2]], forms=("function",)),
        entry("repeat_interleave", [[2], [2, 0], [3, -1]]),
        entry("flatten", [[], [1], [0, -1], [2, 1]]),
        entry("chunk", [[2], [2, -1], [5, 1]]),
        entry("split", [[1], [2, -1], [[1, 2], 2]]),
    ]


ACTIVATIONS = {
    "relu": [{}], "relu6": [{}], "gelu": [{}, {"approximate": "tanh"}], "silu": [{}],
    "mish": [{}], "softplus": [{}, {"beta": 2.0, "threshold": 1.0}], "elu": [{}, {"alpha": 0.5}],
    "selu": [{}], "celu": [{"alpha": 2.0}], "leaky_relu": [{}, {"negative_slope": 0.2}],
    "hardtanh": [{}, {"min_val": -0.5, "max_val": 2.0}], "hardsigmoid": [{}],
    "hardswish": [{}], "logsigmoid": [{}], "softsign": [{}], "tanhshrink": [{}],
    "softshrink": [{}, {"lambd": 1.0}], "hardshrink": [{}], "sigmoid": [{}], "tanh": [{}],
    "softmax": [{"dim": -1}, {"dim": 0}], "log_softmax": [{"dim": 1}],
    "softmin": [{"dim": -1}], "normalize": [{}, {"p": 1.0, "dim": 0}],
    "glu": [{}, {"dim": 0}],
}


def _activation_samples(name: str, settings: list) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for kwargs in settings:
            for dtype in FLOATS:
                for shape in [(), (4,), (2, 6), (0, 2)]:
                    if name in ("softmax", "log_softmax", "softmin", "normalize", "glu") \
                            and not shape:
                        continue
                    yield Sample([Input(values(rng, shape, dtype, edges=True), dtype)], kwargs)
            yield Sample([Input(values(rng, (2, 6), "float64"), "float64",
                                requires_grad=True)], kwargs, note="grad")
        yield Sample([Input(values(rng, (4, 6), "float32"), "float32", "transposed")],
                     settings[0])
    return samples


def _pad_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for mode in ("constant", "reflect", "replicate", "circular"):
        for shape, pads in [((1, 2, 5), (1, 2)), ((1, 2, 5), (-1, 2)), ((2, 5), (2, -1)),
                            ((1, 2, 4, 5), (1, -2, 2, 1)), ((1, 2, 4, 5), (-1, -2)),
                            ((1, 1, 2, 3, 4), (1, 1, 0, 1, -1, 1)), ((1, 2, 5), (5, 0)),
                            ((1, 2, 5), (-2, -2)), ((1, 2, 5), (4, -1))]:
            yield Sample([Input(values(rng, shape, "float64"), "float64", requires_grad=True),
                          pads], {"mode": mode}, note=mode)


def _interpolate_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for mode in ("nearest", "nearest-exact", "bilinear", "bicubic"):
        for dtype in ("uint8", "float32", "float64"):
            for kwargs in [{"size": (5, 7)}, {"size": (2, 3)}, {"scale_factor": 1.7},
                           {"scale_factor": 0.5}]:
                if mode in ("bilinear", "bicubic"):
                    for corners in (False, True):
                        yield Sample([Input(values(rng, (1, 2, 4, 5), dtype) * (
                            40 if dtype == "uint8" else 1), dtype)],
                            {"mode": mode, "align_corners": corners, **kwargs})
                else:
                    yield Sample([Input(values(rng, (1, 2, 4, 5), dtype), dtype)],
                                 {"mode": mode, **kwargs})


def _sdpa_samples(rng: np.random.Generator) -> Iterator[Sample]:
    def qkv(heads_q: int = 2, heads_kv: int = 2, dtype: str = "float64", grad: bool = True):
        return [Input(values(rng, (2, h, 4, 8), dtype), dtype, requires_grad=grad)
                for h in (heads_q, heads_kv, heads_kv)]
    yield Sample(qkv())
    yield Sample(qkv(), {"is_causal": True})
    mask = rng.random((4, 4)) < 0.6
    mask[1] = False
    yield Sample(qkv(), {"attn_mask": Input(mask, "bool")}, note="a query with no key")
    float_mask = np.where(mask, 0.0, -math.inf)
    yield Sample(qkv(), {"attn_mask": Input(float_mask, "float64")}, note="-inf mask")
    yield Sample(qkv(4, 2), {"enable_gqa": True}, note="grouped-query")
    yield Sample(qkv(3, 2, grad=False), {"enable_gqa": True}, note="heads that do not divide")
    yield Sample(qkv(), {"attn_mask": Input(mask.astype(np.int64), "int64")}, note="int mask")
    yield Sample(qkv(dtype="float32", grad=False), {"scale": 0.3})


CONVOLUTIONS = {"conv1d": 1, "conv2d": 2, "conv3d": 3, "conv_transpose1d": 1,
                "conv_transpose2d": 2}


def _conv_samples(name: str) -> Callable:
    """Random geometries (stride, padding, dilation, groups, bias, kernel sizes, channels)
    in float32 and float64 with gradients, non-contiguous inputs, and channel counts that do
    not fit."""
    spatial, transposed = CONVOLUTIONS[name], name.startswith("conv_transpose")

    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for k in range(24):
            groups = int(rng.choice([1, 1, 2]))
            channels, outputs = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
            kernel = tuple(int(v) for v in rng.integers(1, 4, spatial))
            dilation = tuple(int(v) for v in rng.integers(1, 3, spatial))
            stride = tuple(int(v) for v in rng.integers(1, 3, spatial)) if k % 3 else \
                (1,) * spatial
            size = tuple(int(v) for v in rng.integers(3, 9 - spatial, spatial))
            dtype, layout = ("float64", "contiguous") if k % 2 else \
                ("float32", ("transposed", "sliced", "contiguous")[k % 3])
            x = Input(values(rng, (int(rng.integers(1, 3)), channels) + size, dtype), dtype,
                      layout, requires_grad=dtype == "float64")
            shape = (channels, outputs // groups) if transposed else (outputs, channels // groups)
            w = Input(values(rng, shape + kernel, dtype), dtype,
                      requires_grad=dtype == "float64")
            bias = None if k % 4 == 3 else Input(values(rng, (outputs,), dtype), dtype,
                                                 requires_grad=dtype == "float64")
            kwargs: dict = {"stride": stride, "dilation": dilation, "groups": groups}
            if transposed:
                kwargs["padding"] = tuple(int(v) for v in rng.integers(0, 2, spatial))
                kwargs["output_padding"] = tuple(int(rng.integers(0, max(s, d)))
                                                 for s, d in zip(stride, dilation))
            elif stride == (1,) * spatial and k % 5 == 0:
                kwargs["padding"] = "same"
            else:
                kwargs["padding"] = tuple(int(v) for v in rng.integers(0, 3, spatial))
            yield Sample([x, w, bias], kwargs)
        wrong = Input(values(rng, (1, 3) + (5,) * spatial, "float32"), "float32")
        yield Sample([wrong, Input(values(rng, (2, 2) + (3,) * spatial, "float32"), "float32")],
                     note="channels that do not fit")
    return samples


POOLS = {"max_pool1d": 1, "max_pool2d": 2, "max_pool3d": 3, "avg_pool1d": 1, "avg_pool2d": 2,
         "avg_pool3d": 3, "adaptive_avg_pool1d": 1, "adaptive_avg_pool2d": 2,
         "adaptive_avg_pool3d": 3, "adaptive_max_pool1d": 1, "adaptive_max_pool2d": 2}


def _pool_samples(name: str) -> Callable:
    """Random windows (kernel, stride, padding up to half the kernel, ceil_mode) or output
    sizes (whole axes among them: global pooling), float32 and float64 with gradients; ties,
    -inf, NaN and the dtype's extremes among the values."""
    spatial = POOLS[name]

    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for k in range(16):
            dtype = ("float32", "float64")[k % 2]
            size = tuple(int(v) for v in rng.integers(1 if "adaptive" in name else 3,
                                                        9 - spatial, spatial))
            layout = "sliced" if k % 3 == 0 else "contiguous"
            data = values(rng, (2, 3) + size, dtype, edges=k % 4 == 2)
            if k % 4 == 1:  # ties (the first wins) and windows of -inf (never the padding)
                data = np.round(data)
                data[rng.random(data.shape) < 0.3] = -math.inf
            # Gradients where the maximum is unique (finite differences need it).
            x = Input(data, dtype, layout, requires_grad=dtype == "float64" and k % 4 in (0, 3))
            if name.startswith("adaptive"):
                sizes = tuple(int(rng.integers(1, n + 2)) if k % 4 else 1 for n in size)
                yield Sample([x, sizes if k % 5 else sizes[0]])
                continue
            kernel = tuple(int(rng.integers(1, min(n, 3) + 1)) for n in size)
            kwargs = {"kernel_size": kernel,
                      "stride": tuple(int(v) for v in rng.integers(1, 3, spatial)),
                      "padding": tuple(int(rng.integers(0, q // 2 + 1)) for q in kernel),
                      "ceil_mode": bool(k % 3 == 1)}
            yield Sample([x], kwargs)
    return samples


def _mha_call(t: Any, form: str, x: Any, mask: Any = None, padding: Any = None) -> Any:
    """MultiheadAttention's output with fixed weights: the masks' conventions checked."""
    t.manual_seed(0)
    attention = t.nn.MultiheadAttention(8, 2, batch_first=True, dtype=t.float64)
    with t.no_grad():
        for k, (_, p) in enumerate(sorted(attention.named_parameters())):
            p.copy_(t.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape)) * 0.3))
    return attention(x, x, x, attn_mask=mask, key_padding_mask=padding)


def _mha_samples(rng: np.random.Generator) -> Iterator[Sample]:
    x = Input(values(rng, (2, 5, 8), "float64"), "float64", requires_grad=True)
    causal = np.triu(np.ones((5, 5), bool), 1)
    yield Sample([x])
    yield Sample([x, Input(causal, "bool")], note="bool mask: True is not attended")
    yield Sample([x, Input(np.where(causal, -math.inf, 0.0), "float64")], note="float mask")
    padding = np.zeros((2, 5), bool)
    padding[0, 3:] = True
    yield Sample([x, None, Input(padding, "bool")], note="key padding")
    yield Sample([x, Input(causal, "bool"), Input(padding, "bool")], note="both masks")
    yield Sample([x, Input(causal.astype(np.int64), "int64")], note="int mask")


def _recurrent_call(kind: str) -> Callable:
    """``nn.<kind>``'s output, last states and every parameter's gradient (of a fixed
    weighting of the output), with fixed weights; the input's and first state's gradients
    are the database's own."""
    def call(t: Any, form: str, x: Any, *state: Any, **options: Any) -> Any:
        t.manual_seed(0)
        layer = getattr(t.nn, kind)(x.shape[-1], 3, dtype=x.dtype, **options)
        with t.no_grad():
            for k, (_, p) in enumerate(sorted(layer.named_parameters())):
                p.copy_(t.tensor(np.random.default_rng(k).standard_normal(tuple(p.shape))
                                 * 0.5))
        if kind == "LSTM" and state:  # (h0, c0), each an input of its own here
            state = (tuple(state),)
        output, last = layer(x, *state)
        if x.dtype != t.float64:
            return output, last
        weights = [p for _, p in sorted(layer.named_parameters())]
        weighting = t.tensor(np.random.default_rng(99).standard_normal(tuple(output.shape)))
        found = t.autograd.grad((output * weighting).sum(), weights, retain_graph=True)
        return output, last, [g.detach() for g in found]
    return call


def _recurrent_samples(kind: str) -> Callable:
    """Generated layers: 1-2 layers, one or both directions, batch first or not, with and
    without biases and first states, 1-4 steps, an unbatched input, float32 and float64
    (and tanh and relu for ``RNN``)."""
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        for k in range(12):
            bidirectional, given, layers = k % 2 == 1, k // 2 % 2 == 1, 1 + k // 4 % 2
            batch_first, steps = k % 3 == 0, 1 if k == 8 else int(rng.integers(2, 5))
            dtype = "float32" if k == 10 else "float64"
            unbatched = k == 9
            shape = (steps, 4) if unbatched else (2, steps, 4) if batch_first else (steps, 2, 4)
            options = dict(num_layers=layers, bidirectional=bidirectional,
                           batch_first=batch_first, bias=k != 5)
            if kind == "RNN":
                options["nonlinearity"] = ("tanh", "relu")[k // 3 % 2]
            state = []
            if given:
                first = (layers * (2 if bidirectional else 1),) + (() if unbatched else (2,)) \
                    + (3,)
                state = [Input(values(rng, first, dtype), dtype, requires_grad=True)
                         for _ in range(2 if kind == "LSTM" else 1)]
            yield Sample([Input(values(rng, shape, dtype), dtype, requires_grad=True), *state],
                         options, note=f"{layers} layers, {options}")
    return samples


def _index_samples(rng: np.random.Generator) -> Iterator[Sample]:
    """Random keys of every kind: ints, slices, None, ..., lists, tuples, ranges, index and
    mask tensors, in every order."""
    shape = (2, 3, 4, 5)
    for _ in range(120):
        key: list = []
        dim, ellipsis = 0, False
        while dim < 4 and rng.random() < 0.8:
            kind = rng.choice(["int", "slice", "none", "list", "tuple", "tensor", "mask",
                               "range", "ellipsis"])
            n = shape[dim]
            if kind == "int":
                key.append(int(rng.integers(-n, n)))
            elif kind == "slice":
                key.append(slice(int(rng.integers(0, 2)), [None, n, -1][int(rng.integers(3))],
                                 [None, 1, 2][int(rng.integers(3))]))
            elif kind == "none":
                key.append(None)
                continue
            elif kind in ("list", "tuple"):
                items = [int(i) for i in rng.integers(-n, n, 2)]
                key.append(items if kind == "list" else tuple(items))
            elif kind == "tensor":
                key.append(Input(rng.integers(0, n, int(rng.integers(1, 3))), "int64"))
            elif kind == "mask":
                key.append(Input(rng.random(n) < 0.5, "bool"))
            elif kind == "range":
                key.append(range(0, n, 2))
            elif not ellipsis:
                ellipsis = True
                key.append(Ellipsis)
                continue
            else:
                continue
            dim += 1
        yield Sample([Input(values(rng, shape, "float64"), "float64", requires_grad=True),
                      key])


def _index_call(t: Any, form: str, x: Any, key: list) -> Any:
    built = tuple(k.make(t) if isinstance(k, Input) else k for k in key)
    if form == "setitem":
        y = x.detach().clone()
        target = y[built]
        y[built] = t.arange(float(target.numel()), dtype=y.dtype).reshape(target.shape)
        return y
    return x[built]


def _factory_samples(name: str) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        cases = {
            "arange": [[5], [2, 9, 3], [0, 1, 0.25], [128], [200], [-3, 3], [0, 10, -1]],
            "linspace": [[0, 1, 5], [-1.5, 2.5, 5], [3, 3, 1], [0, 1, 0]],
            "logspace": [[0, 2, 3], [-1, 1, 4]],
        }[name]
        for args in cases:
            for dtype in (None, "int8", "uint8", "int64", "float32", "float64", "bool"):
                yield Sample(list(args), {} if dtype is None else {"dtype": dtype})
    return samples


def _factory_call(name: str) -> Callable:
    def call(t: Any, form: str, *args: Any, **kwargs: Any) -> Any:
        if "dtype" in kwargs:
            kwargs = {**kwargs, "dtype": getattr(t, kwargs["dtype"])}
        return getattr(t, name)(*args, **kwargs)
    return call


def _isclose_samples(rng: np.random.Generator) -> Iterator[Sample]:
    specials = np.array([math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, 1e-9])
    a, b = np.meshgrid(specials, specials)
    for dtype in ("float32", "float64"):
        for kwargs in ({}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.0}):
            yield Sample([Input(a, dtype), Input(b, dtype)], kwargs)
    yield Sample([Input(rng.integers(0, 3, 5), "int64"), Input(rng.integers(0, 3, 5), "int64")])
    yield Sample([Input(rng.random(4) < 0.5, "bool"), Input(rng.random(4) < 0.5, "bool")])
    yield Sample([Input(a, "float32"), Input(b, "float64")], note="dtypes differ")


def _pow_grad_samples(rng: np.random.Generator) -> Iterator[Sample]:
    bases = np.array([0.0, 0.0, 0.0, 0.0, -2.0, -1.5, 2.0, math.inf])
    exponents = np.array([0.0, 2.0, 0.5, -1.0, 2.0, 3.0, 0.0, -1.0])
    yield Sample([Input(bases, "float64", requires_grad=True),
                  Input(exponents, "float64", requires_grad=True)])
    for e in (0.0, -1.5, 2.0, 0.5):
        yield Sample([Input(bases, "float64", requires_grad=True), e], note=f"exponent {e}")
    for b in (0.0, 2.0, -2.0):
        yield Sample([b, Input(exponents, "float64", requires_grad=True)], note=f"base {b}")


def _einsum_samples(rng: np.random.Generator) -> Iterator[Sample]:
    cases = [("->", [()]), ("i,->i", [(3,), ()]), (",", [(), ()]), ("ij->ji", [(2, 3)]),
             ("ij,jk->ik", [(2, 3), (3, 4)]), ("...i,i->...", [(2, 3), (3,)]),
             ("bij,bjk", [(2, 3, 4), (2, 4, 2)]), ("ii->i", [(3, 3)])]
    for equation, shapes in cases:
        yield Sample([equation, *[Input(values(rng, s, "float64"), "float64",
                                        requires_grad=True) for s in shapes]])


def _cross_entropy_samples(rng: np.random.Generator) -> Iterator[Sample]:
    logits = Input(values(rng, (3, 4), "float64"), "float64", requires_grad=True)
    yield Sample([logits, Input(np.array([0, 3, 1]), "int64")])
    yield Sample([logits, Input(np.array([0, 3, 1]), "int64")], {"label_smoothing": 0.1})
    yield Sample([logits, Input(values(rng, (3, 4), "float64", low=0, high=1), "float64")],
                 note="probabilities")
    yield Sample([logits, Input(values(rng, (3, 2), "float64"), "float64")], note="bad target")
    yield Sample([logits, Input(values(rng, (3,), "float64"), "float64")], note="float indices")
    yield Sample([logits, Input(np.array([0, 1]), "int64")], note="batch sizes differ")
    yield Sample([logits, Input(np.array([0, 1, 7]), "int64")], note="class out of range")
    yield Sample([logits, Input(np.array([0, -100, 1]), "int64")], note="ignored")


#: Tensor methods PyTorch calls without arguments, checked as one family (the others take
#: arguments their own families generate). Left out: what differs by design (``data_ptr``,
#: ``type``'s class names, ``numpy``'s array) and the factorizations whose signs are free
#: (``svd``, ``geqrf``).
NO_ARGUMENTS = (
    "adjoint angle argwhere bfloat16 bool byte char clone conj contiguous corrcoef cov cpu "
    "detach diag diag_embed diagflat diff dim double element_size fliplr flipud float frexp "
    "half hardshrink histc int is_complex is_conj is_contiguous is_floating_point is_neg "
    "is_signed isreal long mode msort ndimension nelement nonzero norm numel qr ravel relu "
    "resolve_conj resolve_neg rot90 short size stride t to tolist trace unbind unique "
    "unique_consecutive").split()


#: PyTorch's other names of ops (``divide`` is ``div``), and binary ops written once; each
#: entry runs the binary family's samples in its forms.
BINARY_MORE = ("arctan2 divide multiply subtract greater greater_equal less less_equal "
               "not_equal float_power logaddexp logaddexp2 ldexp heaviside igamma igammac lcm "
               "gcd bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift "
               "kron outer dist").split()
#: Binary ops of :data:`BINARY_MORE` with no in-place method in PyTorch.
NOT_IN_PLACE = {"kron", "outer", "dist", "logaddexp", "logaddexp2"}
#: Unary ops under their other names, with their in-place forms.
UNARY_MORE = ("negative absolute fix arccos arccosh arcsin arcsinh arctan arctanh sgn "
              "nan_to_num clip positive").split()
#: Attributes, compared as values (the dtype and layout by name).
PROPERTIES = ("H T mT mH data ndim shape itemsize nbytes is_leaf requires_grad layout real "
              "imag is_cpu is_cuda is_sparse is_quantized is_meta is_nested is_mkldnn "
              "is_sparse_csr is_xpu is_mps is_vulkan is_ipu is_maia is_mtia retains_grad "
              "grad_fn dtype").split()


def _property_call(name: str) -> Callable:
    def call(t: Any, form: str, x: Any) -> Any:
        value = getattr(x, name)
        if name in ("layout", "dtype"):
            return str(value).rsplit(".", 1)[-1]
        if name == "grad_fn":
            return None if value is None else type(value).__name__
        if name == "shape":
            return tuple(value)
        return value
    return call


def _property_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for dtype in ("bool", "int64", "float32", "float64"):
        for shape in [(), (4,), (2, 3), (3, 1, 2)]:
            yield Sample([Input(values(rng, shape, dtype), dtype)])
    yield Sample([Input(values(rng, (2, 3), "float64"), "float64", requires_grad=True)])


#: Ops shaped by a second tensor: ``x.expand_as(y)`` and the like.
LIKE_ANOTHER = "expand_as reshape_as type_as view_as broadcast_tensors expand_copy".split()


def _like_another_samples(name: str) -> Callable:
    def samples(rng: np.random.Generator) -> Iterator[Sample]:
        pairs = [((1, 3), (2, 3)), ((6,), (2, 3)), ((2, 3), (3, 2)), ((), (2,)), ((3,), (2, 2))]
        for dtype, other in [("float32", "float64"), ("int64", "bool"), ("bool", "float32")]:
            for left, right in pairs:
                second: Any = Input(values(rng, right, other), other)
                if name == "expand_copy":
                    second = list(right)
                yield Sample([Input(values(rng, left, dtype), dtype), second])
        other = [2, 3] if name == "expand_copy" else Input(values(rng, (2, 3), "float64"),
                                                            "float64")
        yield Sample([Input(values(rng, (1, 3), "float64"), "float64", requires_grad=True),
                      other], note="grad")
    return samples


def _no_argument_samples(rng: np.random.Generator) -> Iterator[Sample]:
    for dtype in ("bool", "int64", "float32", "float64"):
        for shape in SHAPES:
            yield Sample([Input(values(rng, shape, dtype, edges=True), dtype)])
    yield Sample([Input(values(rng, (3, 4), "float32"), "float32", "transposed")])
    yield Sample([Input(values(rng, (3, 3), "float64"), "float64", requires_grad=True)],
                 note="grad")


def build() -> list[OpInfo]:
    """Every entry of the database."""
    entries: list[OpInfo] = []
    for name in UNARY_FLOAT:
        entries.append(OpInfo(name, _function(name), _unary_samples(FLOATS + ("int64", "bool")),
                              ("function", "method", "inplace", "out"), family="unary"))
    for name in UNARY_ANY:
        entries.append(OpInfo(name, _function(name), _unary_samples(DTYPES),
                              ("function", "method", "inplace", "out"), family="unary"))
    for name in UNARY_PREDICATE:
        entries.append(OpInfo(name, _function(name), _unary_samples(DTYPES),
                              ("function", "method"), grad=False, family="unary"))
    for name in BINARY:
        forms = ("function", "method", "inplace", "out") if name not in IN_PLACE_LESS \
            else ("function", "method", "out")
        entries.append(OpInfo(name, _function(name), _binary_samples(name), forms,
                              family="binary"))
    for name in REDUCTIONS:
        forms = ("function",) if name in ("std_mean", "var_mean") else ("function", "method")
        entries.append(OpInfo(name, _function(name), _reduction_samples(name), forms,
                              family="reductions"))
    for name in SCANS:
        entries.append(OpInfo(name, _function(name), _scan_samples(name),
                              ("function", "method"), family="scans"))
    entries += _shape_entries()
    for name, settings in ACTIVATIONS.items():
        entries.append(OpInfo(f"F.{name}", _function(name, "nn.functional"),
                              _activation_samples(name, settings), family="activations"))
    entries += [
        OpInfo("F.pad", _function("pad", "nn.functional"), _pad_samples, family="nn"),
        OpInfo("F.interpolate", _function("interpolate", "nn.functional"),
               _interpolate_samples, family="nn"),
        OpInfo("F.scaled_dot_product_attention",
               _function("scaled_dot_product_attention", "nn.functional"), _sdpa_samples,
               family="nn"),
        OpInfo("F.cross_entropy", _function("cross_entropy", "nn.functional"),
               _cross_entropy_samples, family="nn"),
        OpInfo("nn.MultiheadAttention", _mha_call, _mha_samples, family="nn"),
        *(OpInfo(f"nn.{kind}", _recurrent_call(kind), _recurrent_samples(kind), family="nn")
          for kind in ("LSTM", "GRU", "RNN")),
        OpInfo("index", _index_call, _index_samples, ("getitem", "setitem"), family="indexing"),
        OpInfo("isclose", _function("isclose"), _isclose_samples, ("function", "method"),
               grad=False, family="binary"),
        OpInfo("pow (gradients)", _function("pow"), _pow_grad_samples, family="binary"),
        OpInfo("einsum", _function("einsum"), _einsum_samples, family="linalg"),
    ]
    for name in POOLS:
        entries.append(OpInfo(f"F.{name}", _function(name, "nn.functional"),
                              _pool_samples(name), family="pooling"))
    for name in CONVOLUTIONS:
        entries.append(OpInfo(f"F.{name}", _function(name, "nn.functional"),
                              _conv_samples(name), family="convolutions"))
    for name in BINARY_MORE:
        forms = ("function", "method") + (() if name in NOT_IN_PLACE else ("inplace",))
        entries.append(OpInfo(name, _function(name), _binary_samples(name), forms,
                              family="binary"))
    for name in UNARY_MORE:
        entries.append(OpInfo(name, _function(name), _unary_samples(DTYPES),
                              ("function", "method", "inplace"), family="unary"))
    for name in PROPERTIES:
        entries.append(OpInfo(f"Tensor.{name}", _property_call(name), _property_samples,
                              ("attribute",), grad=False, family="attributes"))
    for name in LIKE_ANOTHER:
        forms = ("function",) if name in ("broadcast_tensors", "expand_copy") else ("method",)
        entries.append(OpInfo(name, _function(name), _like_another_samples(name), forms,
                              family="shapes"))
    for name in NO_ARGUMENTS:
        entries.append(OpInfo(name, _function(name), _no_argument_samples, ("method",),
                              family="no arguments"))
    for name in ("arange", "linspace", "logspace"):
        entries.append(OpInfo(name, _factory_call(name), _factory_samples(name), grad=False,
                              family="factories"))
    return entries


# --- checking ---------------------------------------------------------------------------------


def _dtype_name(x: Any) -> str:
    return str(x.dtype).rsplit(".", 1)[-1]


def _leaves(result: Any) -> list:
    if isinstance(result, (tuple, list)):
        return [leaf for r in result for leaf in _leaves(r)]
    return [result]


def _run(t: Any, op: OpInfo, form: str, sample: Sample) -> tuple:
    """``(leaves, grads)`` of the op on ``sample`` in ``t``, or ``(error, None)``."""
    try:
        args, kwargs, grads = sample.build(t)
        if form == "inplace":
            args[0] = args[0].detach().clone()
            grads = []
        result = op.call(t, form, *args, **kwargs)
        arrays = leaves = _leaves(result)
        wanted = [leaf for leaf in leaves if hasattr(leaf, "requires_grad") and
                  leaf.requires_grad and leaf.dtype == t.float64]
        gradients = None
        if op.grad and grads and wanted:
            cotangent = 0
            for k, leaf in enumerate(wanted):
                weights = np.random.default_rng(k).standard_normal(tuple(leaf.shape))
                cotangent = cotangent + (leaf * t.tensor(weights)).sum()
            found = t.autograd.grad(cotangent, grads, allow_unused=True)
            gradients = [None if g is None else g.detach().numpy().copy() for g in found]
        return [(_dtype_name(a), tuple(a.shape), _numpy(a))
                if hasattr(a, "detach") else a for a in arrays], gradients
    except Exception as error:  # the class is compared
        return error, None


def _numpy(tensor: Any) -> np.ndarray:
    """A result's values (bfloat16 as float32: torch's ``numpy()`` has no bfloat16)."""
    tensor = tensor.detach()
    if _dtype_name(tensor) == "bfloat16":
        tensor = tensor.float()
    return np.array(tensor.numpy(), copy=True)


def _same(expected: Any, got: Any, where: str) -> str | None:
    if type(expected) is tuple and len(expected) == 3 and type(got) is tuple:
        (dt, shape, a), (dt2, shape2, b) = expected, got
        if dt != dt2:
            return f"{where}: dtype {dt2}, PyTorch's {dt}"
        if shape != shape2:
            return f"{where}: shape {shape2}, PyTorch's {shape}"
        return _close(a, b, dt, where)
    if type(got) is tuple:
        return f"{where}: a tensor where PyTorch gives {expected!r}"
    if expected != got and not (isinstance(expected, float) and math.isnan(expected)
                                and math.isnan(got)):
        return f"{where}: {got!r}, PyTorch's {expected!r}"
    return None


def _close(a: np.ndarray, b: np.ndarray, dtype: str, where: str) -> str | None:
    if dtype in TOLERANCE:
        rtol, atol = TOLERANCE[dtype]
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(a64), np.isnan(b64)):
            return f"{where}: NaN at other places"
        both = ~np.isnan(a64)
        if not np.array_equal(np.isinf(a64[both]) * np.sign(a64[both]),
                              np.isinf(b64[both]) * np.sign(b64[both])):
            return f"{where}: infinities at other places"
        finite = both & np.isfinite(a64)
        if not np.allclose(a64[finite], b64[finite], rtol=rtol, atol=atol):
            gap = np.max(np.abs(a64[finite] - b64[finite]))
            return f"{where}: values differ (by up to {gap:.3g})"
        return None
    if not np.array_equal(a, b):
        return f"{where}: values differ in {int(np.sum(a != b))} of {a.size} elements"
    return None


def check(op: OpInfo, form: str, sample: Sample) -> str | None:
    """What differs from PyTorch when ``op`` runs ``sample`` in ``form``, or None."""
    import torch

    import pargraph

    expected, grads_expected = _run(torch, op, form, sample)
    got, grads_got = _run(pargraph, op, form, sample)
    if isinstance(expected, Exception) or isinstance(got, Exception):
        if isinstance(expected, Exception) and isinstance(got, Exception):
            if isinstance(got, type(expected)):  # its class, or a subclass of it
                return None
            return (f"raises {type(got).__name__} ({got}), PyTorch raises "
                    f"{type(expected).__name__} ({expected})")
        if isinstance(got, Exception):
            return f"raises {type(got).__name__}: {got}; PyTorch gives a result"
        return f"gives a result; PyTorch raises {type(expected).__name__}: {expected}"
    if len(expected) != len(got):
        return f"{len(got)} results, PyTorch's {len(expected)}"
    for k, (e, g) in enumerate(zip(expected, got)):
        found = _same(e, g, f"result {k}")
        if found:
            return found
    if grads_expected is not None or grads_got is not None:
        if grads_expected is None or grads_got is None:
            return "gradients on one side only"
        for k, (e, g) in enumerate(zip(grads_expected, grads_got)):
            if (e is None) != (g is None):
                e = np.zeros_like(g) if e is None else e
                g = np.zeros_like(e) if g is None else g
            if e is not None:
                found = _close(e, g, "float64", f"gradient {k}")
                if found:
                    return found
        return finite_difference(op, form, sample)
    return None


def finite_difference(op: OpInfo, form: str, sample: Sample) -> str | None:
    """Where pargraph's float64 gradient of ``sample`` disagrees with central differences of
    its own forward along a random direction, or None (also when the sample has no gradient
    or its values are not finite there)."""
    import pargraph

    grads_of = [k for k, a in enumerate(sample.args)
                if isinstance(a, Input) and a.requires_grad]
    if not op.grad or not grads_of or form not in ("function", "method", "getitem"):
        return None
    rng = np.random.default_rng(7)
    directions = {k: rng.standard_normal(sample.args[k].values.shape) for k in grads_of}

    def objective(step: float) -> tuple[float, list | None]:
        args = [Input(a.values + step * directions[k], a.dtype, a.layout, True)
                if k in directions else a for k, a in enumerate(sample.args)]
        moved = Sample(args, sample.kwargs, sample.note)
        made, kwargs, leaves = moved.build(pargraph)
        result = [r for r in _leaves(op.call(pargraph, form, *made, **kwargs))
                  if hasattr(r, "requires_grad") and r.requires_grad]
        if not result:
            return math.nan, None
        total = 0
        for k, r in enumerate(result):
            weights = np.random.default_rng(k).standard_normal(tuple(r.shape))
            total = total + (r * pargraph.tensor(weights)).sum()
        grads = pargraph.autograd.grad(total, leaves, allow_unused=True) if step == 0 \
            else None
        return float(total.item()), grads

    try:
        _, grads = objective(0.0)
        h = 1e-6
        numeric = (objective(h)[0] - objective(-h)[0]) / (2 * h)
    except Exception:  # errors are check()'s to compare
        return None
    if grads is None or not math.isfinite(numeric):
        return None
    analytic = sum(float((g.detach().numpy() * directions[k]).sum())
                   for k, g in zip(grads_of, grads) if g is not None)
    if not math.isfinite(analytic):
        return None
    if abs(analytic - numeric) > 1e-4 * max(1.0, abs(numeric)):
        return f"gradient {analytic:.8g} along a direction, finite differences {numeric:.8g}"
    return None


def cases(op: OpInfo, seed: int = 0) -> list[tuple[str, Sample]]:
    """Every (form, sample) of ``op``: each sample in the first form, and a few in the
    others."""
    rng = np.random.default_rng(seed)
    samples = list(op.samples(rng))
    found = [(op.forms[0], s) for s in samples]
    for form in op.forms[1:]:
        found += [(form, s) for s in samples[:: max(1, len(samples) // 6)]]
    return found


def main(argv: list[str]) -> int:
    failures = total = 0
    for op in build():
        for form, sample in cases(op):
            total += 1
            found = check(op, form, sample)
            if found:
                failures += 1
                print(f"{op.name} [{form}] {sample}: {found}")
    print(f"{total - failures} of {total} cases agree with PyTorch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

