"""Every entry of the op database (``tests/op_db.py``) against PyTorch: values, dtypes,
shapes, gradients and errors, over generated dtypes, shapes, layouts, edge values and keyword
spellings. ``python -m tests.op_db`` prints every case that differs.

:data:`KNOWN` lists the differences not fixed yet, each with its reason; an entry that no
longer differs fails the test too, so that the list only shrinks.
"""

import warnings

import pytest

from tests import op_db

#: (op, a part of the case's description, why it differs from PyTorch).
KNOWN = [
    ("F.gelu", "float16", "composite in the half dtypes (float16 and bfloat16): an "
                          "intermediate overflows where PyTorch computes in float32 and "
                          "rounds once"),
    ("F.hardswish", "float16", "the same"),
    ("sinc", "float16", "the same"),
    ("lgamma", "float16", "scipy's gammaln at the dtype's extremes: inf where PyTorch's "
                          "is finite"),
    ("lgamma", "float32", "the same"),
    ("nanmean", "bfloat16[4]", "composite in bfloat16: an intermediate overflows"),
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
    ("nansum", "(), keepdim=True", "an empty dim list with keepdim keeps no dimensions"),
    ("nansum", "axis=(), keepdims=True", "the same"),
    ("nanmean", "(), keepdim=True", "the same"),
    ("nanmean", "axis=(), keepdims=True", "the same"),
    ("logsumexp", "()", "PyTorch's logsumexp refuses an empty dim list (a shape error), "
                        "however spelled; ours reduces nothing"),
    ("logit", "int64", "logit of integers: PyTorch casts them, with eps handling of its own"),
    ("logit", "bool", "logit of booleans: refused by our subtraction"),
    ("logit", "float64[4]) [grad]", "logit's gradient outside (0, 1): NaN at other places"),
    ("fmax", "bfloat16[2, 3], float16[3]", "bfloat16 with float16: numpy has no common "
                                           "dtype (PyTorch's is float32)"),
    ("fmin", "bfloat16[2, 3], float16[3]", "the same"),
    ("einsum", "'ii->i'", "the gradient through a repeated subscript (a diagonal)"),
    ("linspace", "dtype='uint8'", "linspace into uint8 from a negative start: PyTorch "
                                  "refuses the overflow"),
    ("linspace", "dtype='bool'", "PyTorch gives a result for one or no steps"),
    ("logspace", "dtype='uint8'", "logspace rounded into uint8: one element differs"),
    ("pow", "bool[3], True", "a bool tensor to a bool power: PyTorch computes it"),
]


def _known(op: op_db.OpInfo, description: str) -> int | None:
    for k, (name, part, _) in enumerate(KNOWN):
        if name == op.name and part in description:
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
            k = _known(op, str(sample))
            if k is None:
                unexpected.append(f"[{form}] {sample}: {found}")
            else:
                matched.add(k)
    assert not unexpected, f"{op.name} differs from PyTorch:\n" + "\n".join(unexpected)
    stale = [KNOWN[k][:2] for k, entry in enumerate(KNOWN)
             if entry[0] == op.name and k not in matched]
    assert not stale, f"{op.name}: these known differences are gone, remove them: {stale}"


def test_every_op_of_the_database_runs_in_several_forms():
    names = [op.name for op in OPS]
    assert len(names) == len(set(names))
    forms = {form for op in OPS for form, _ in op_db.cases(op)}
    assert {"function", "method", "getitem", "setitem"} <= forms
