"""Every entry of the op database (``tests/op_db.py``) against PyTorch: values, dtypes,
shapes, gradients and errors, over generated dtypes, shapes, layouts, edge values and keyword
spellings. ``python -m tests.op_db`` prints every case that differs.

:data:`KNOWN` lists the differences not fixed yet, each with its reason; an entry that no
longer differs fails the test too, so that the list only shrinks. An entry whose difference
shows only on some CPUs (PyTorch picks its kernels by the CPU's vector instructions) holds a
check of this machine's PyTorch, and counts only where that check says it shows.
"""

import functools
import pathlib
import re
import warnings

import pytest

from tests import op_db


@functools.cache
def _pytorch_gelu_of_inf_is_nan() -> bool:
    """Whether this machine's PyTorch gives NaN for gelu(+inf): its vectorized erf did on the
    machines the entry was found on, and gives +inf where PyTorch picks AVX2 kernels."""
    import torch

    inf = [torch.full((64,), float("inf"), dtype=dtype)
           for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)]
    return any(bool(torch.nn.functional.gelu(x).isnan().any()) for x in inf)


#: (op, a part of the case's description, why it differs from PyTorch[, a check of whether
#: it shows on this machine]).
KNOWN = [
    ("F.gelu", "", "gelu(+inf): PyTorch's vectorized erf makes it NaN, ours is +inf",
     _pytorch_gelu_of_inf_is_nan),
    ("lgamma", "float16", "scipy's gammaln at the dtype's extremes: inf where PyTorch's "
                          "is finite"),
    ("lgamma", "float32", "the same"),
    ("nanmean", "bfloat16[4]", "composite in bfloat16: an intermediate overflows where "
                               "PyTorch computes in float32"),
    ("median", "float16[4]", "the same"),
    ("median", "[0, 3]", "the median of an empty tensor: an index error where PyTorch "
                         "gives NaN or an empty result"),
    ("median", "[2, 0]", "the same"),
    ("nanmedian", "[0, 3]", "the same"),
    ("nanmedian", "[2, 0]", "the same"),
    ("F.glu", "[0, 2]", "glu along an empty dimension"),
    ("std_mean", "float", "PyTorch computes std_mean and var_mean in one Welford pass: "
                          "its mean is NaN where an infinity meets its update, ours is the "
                          "plain mean; and keepdim with an empty dim list"),
    ("var_mean", "float", "the same"),
    ("std", "float32[4]", "the same pass: NaN where ours is inf"),
    ("logsumexp", "(), keepdim=False", "an empty dim list without keepdim: PyTorch's "
                                       "logsumexp fails its own shape check (with keepdim it "
                                       "reduces every dimension, as ours does either way)"),
    ("logsumexp", "axis=(), keepdims=False", "the same"),
    ("logit", "float64[4]) [grad]", "logit's gradient outside (0, 1): NaN at other places"),
    ("einsum", "'ii->i'", "the gradient through a repeated subscript (a diagonal)"),
    ("linspace", "dtype='uint8'", "linspace into uint8 from a negative start: PyTorch "
                                  "refuses the overflow"),
    ("linspace", "dtype='bool'", "PyTorch gives a result for one or no steps"),
    ("logspace", "dtype='uint8'", "logspace rounded into uint8: one element differs"),
    ("pow", "bool[3], True", "a bool tensor to a bool power: PyTorch computes it"),
    ("corrcoef", "int64", "integers at int64's extremes: converted to float at another point"),
    ("cov", "int64", "the same"),
    ("histc", "", "histc: numpy's errors (ValueError) where PyTorch raises RuntimeError, no "
                  "refusal of bool and integers, one bin differs at an edge value"),
    ("is_contiguous", "transposed", "strides are not modelled: every tensor reports "
                                    "contiguous"),
    ("stride", "", "the same: strides are those of a contiguous tensor (and 1, not 0, for "
                   "an empty one)"),
    ("mode", "", "mode of an empty tensor (numpy's ValueError) and of NaN"),
    ("qr", "float32[2, 3]", "QR of a matrix holding infinities: NaN at other places"),
    ("sgn", "grad", "PyTorch's gradient is a ZeroTensor, which its numpy() refuses"),
    ("unique", "[grad]", "unique's result is a constant here; PyTorch refuses its backward"),
    ("unique_consecutive", "[grad]", "the same"),
    ("bitwise_right_shift", "uint8", "a shift by the width of the dtype or more"),
    ("kron", "transposed", "PyTorch's kron of a transposed operand fails its view"),
]


def _shows(entry: tuple) -> bool:
    """Whether a known difference shows on this machine (always, unless it holds a check)."""
    return len(entry) < 4 or entry[3]()


def _known(op: op_db.OpInfo, description: str) -> int | None:
    for k, entry in enumerate(KNOWN):
        if entry[0] == op.name and entry[1] in description and _shows(entry):
            return k
    return None


OPS = op_db.build()


@pytest.mark.parametrize("op", OPS, ids=str)
def test_an_op_agrees_with_pytorch_on_every_generated_case(op):
    unexpected, matched = [], set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's and pargraph's warnings alike
        for form, sample in op_db.cases(op):
            found = op_db.check(op, form, sample)
            if found is None:
                continue
            k = _known(op, f"[{form}] {sample}")
            if k is None:
                unexpected.append(f"[{form}] {sample}: {found}")
            else:
                matched.add(k)
    assert not unexpected, f"{op.name} differs from PyTorch:\n" + "\n".join(unexpected)
    stale = [KNOWN[k][:2] for k, entry in enumerate(KNOWN)
             if entry[0] == op.name and k not in matched and _shows(entry)]
    assert not stale, f"{op.name}: these known differences are gone, remove them: {stale}"


def test_every_op_of_the_database_runs_in_several_forms():
    names = [op.name for op in OPS]
    assert len(names) == len(set(names))
    forms = {form for op in OPS for form, _ in op_db.cases(op)}
    assert {"function", "method", "getitem", "setitem"} <= forms


#: Names pargraph has (docs/coverage.md) that neither the database nor a hand-written test
#: calls, with why.
_MODULE = "called by its module, which tests/test_nn_functional.py checks against PyTorch"
_IN_PLACE = ("the in-place form of an op tests/test_selection.py checks against "
             "PyTorch: the same node, then a rebind")
UNTESTED: dict[str, str] = {
    "rms_norm": _MODULE, "adaptive_max_pool3d": _MODULE,
    "fractional_max_pool2d_with_indices": _MODULE,
    "fractional_max_pool3d_with_indices": _MODULE, "instance_norm": _MODULE,
    "lp_pool3d": _MODULE,
    "index_copy_": _IN_PLACE, "index_put_": _IN_PLACE, "masked_scatter_": _IN_PLACE,
    "put_": _IN_PLACE, "scatter_reduce_": _IN_PLACE,
    "index_reduce_": "the in-place form of index_reduce, which tests/test_methods.py "
                     "checks against PyTorch",
    "lerp_": "the in-place form of lerp, which tests/test_swa.py checks against PyTorch "
             "(the weight averaging uses lerp_)",
    "detach_": "untested: the in-place detach of a non-leaf",
    "data_ptr": "an address: it differs between any two tensors by design",
    "max_unpool1d": "untested: MaxUnpool2d is tested (tests/test_nn_functional.py), the 1d and "
                    "3d forms share its code",
    "max_unpool3d": "the same",
    "upsample": "untested: PyTorch's older name of interpolate, which the database checks",
}


def _called_by_hand(name: str, texts: list[str]) -> bool:
    """Whether a test calls ``name`` (``name(`` or ``.name(``) or names it in quotes."""
    call = re.compile(r"(\.|\b)" + re.escape(name) + r"\(|[\"']" + re.escape(name) + r"[\"']")
    return any(call.search(text) for text in texts)


def _hand_called(texts: list[str]) -> set[str]:
    """Names the texts call or quote whole (each one ``_called_by_hand`` would find): one scan
    answers most names, the regex search runs only for the rest."""
    joined = "\n".join(texts)
    return set(re.findall(r"\b(\w+)\(", joined)) | set(re.findall(r"[\"'](\w+)[\"']", joined))


def test_every_op_pargraph_has_is_in_the_database_or_tested_by_hand():
    """Each name of docs/coverage.md's op lists (``torch.*``, Tensor methods,
    ``nn.functional``) that pargraph has: an entry of the database (any of its forms), a call
    in a hand-written test, or a reason in :data:`UNTESTED`."""
    from benchmarks import coverage

    entries = set()
    for op in OPS:
        name = op.name.removeprefix("F.").removeprefix("Tensor.")
        entries.add(name)
        if "inplace" in op.forms:
            entries.add(name + "_")
    here = pathlib.Path(__file__).parent
    texts = [path.read_text() for path in here.glob("*.py")
             if path.name not in ("op_db.py", "test_op_db.py")]
    found = coverage.measure()
    called = _hand_called(texts)

    def by_hand(name: str) -> bool:
        return name in called or _called_by_hand(name, texts)

    missing = []
    for kind in ("torch.* (overridable)", "Tensor methods", "nn.functional"):
        for name in found[kind][0]:
            if name not in entries and name not in UNTESTED and not by_hand(name):
                missing.append(f"{kind}: {name}")
    assert not missing, "names with no entry, no test and no reason:\n" + "\n".join(missing)
    stale = [name for name in UNTESTED if name in entries or by_hand(name)]
    assert not stale, f"tested now, remove from UNTESTED: {stale}"
