"""PyTorch's semantics at the edges: type promotion, bitwise ops, masks, split and chunk.

Each test states what PyTorch does (checked against torch when the table was written; the
tests never import it)."""

import itertools

import numpy as np
import pytest

import pargraph

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
# torch.promote_types(row, column), written out from PyTorch 2.13.
PROMOTE = """
bool    uint8   int8    int16   int32   int64   float16 float32 float64
uint8   uint8   int16   int16   int32   int64   float16 float32 float64
int8    int16   int8    int16   int32   int64   float16 float32 float64
int16   int16   int16   int16   int32   int64   float16 float32 float64
int32   int32   int32   int32   int32   int64   float16 float32 float64
int64   int64   int64   int64   int64   int64   float16 float32 float64
float16 float16 float16 float16 float16 float16 float16 float32 float64
float32 float32 float32 float32 float32 float32 float32 float32 float64
float64 float64 float64 float64 float64 float64 float64 float64 float64
"""
TABLE = {(a, b): c for a, row in zip(NAMES, PROMOTE.split("\n")[1:])
         for b, c in zip(NAMES, row.split())}


def category(name: str) -> int:
    return 0 if name == "bool" else 2 if name.startswith("float") else 1


def promote(names: list[str]) -> str:
    result = names[0]
    for name in names[1:]:
        result = TABLE[result, name]
    return result


def expected_result_type(dimensioned: list[str], zero_dim: list[str], scalars: list) -> str:
    """torch.result_type's rule: dimensioned tensors decide; 0-d tensors, then Python scalars,
    count only when their category is higher (scalars then give the default dtype)."""
    result = promote(dimensioned)
    if zero_dim and category(promote(zero_dim)) > category(result):
        result = promote(zero_dim)
    scalar_names = ["bool" if isinstance(s, bool) else "int64" if isinstance(s, int)
                    else "float32" for s in scalars]
    if scalar_names and category(promote(scalar_names)) > category(result):
        result = "float32" if category(promote(scalar_names)) == 2 else "int64"
    return result


def make(name: str, shape=(2,)):
    return pargraph.tensor(np.ones(shape, dtype=name))


def test_promote_types_table_for_every_pair():
    for a, b in itertools.product(NAMES, NAMES):
        assert (make(a) + make(b)).dtype == np.dtype(TABLE[a, b]), (a, b)


def random_operand(rng):
    """A dimensioned tensor, a 0-d tensor or a Python scalar, and its description."""
    kind = rng.choice(["tensor", "zero_dim", "scalar"])
    if kind == "scalar":
        value = [True, 3, -2, 1.5][rng.integers(4)]
        return value, ("scalar", value)
    name = str(rng.choice(NAMES))
    return make(name, (2,) if kind == "tensor" else ()), (kind, name)


def expected_of(*described) -> str:
    dimensioned = [n for kind, n in described if kind == "tensor"]
    zero_dim = [n for kind, n in described if kind == "zero_dim"]
    scalars = [v for kind, v in described if kind == "scalar"]
    if not dimensioned:  # only 0-d tensors (and scalars): they decide as dimensioned ones do
        dimensioned, zero_dim = zero_dim, []
    return expected_result_type(dimensioned, zero_dim, scalars)


def test_fuzz_result_type_of_random_operand_pairs():
    rng = np.random.default_rng(7)
    checked = 0
    while checked < 400:
        (x, dx), (y, dy) = random_operand(rng), random_operand(rng)
        if not isinstance(x, pargraph.Tensor) and not isinstance(y, pargraph.Tensor):
            continue
        expected = np.dtype(expected_of(dx, dy))
        assert (x + y).dtype == expected, (dx, dy)
        assert (y * x).dtype == expected, (dx, dy)
        assert pargraph.where(pargraph.tensor([True, False]), x, y).dtype == expected, (dx, dy)
        checked += 1


def test_int64_plus_float32_is_float32_and_computes_in_it():
    out = pargraph.arange(3) + pargraph.tensor([0.5, 0.25, 0.125])
    assert out.dtype == pargraph.float32
    assert out.tolist() == [0.5, 1.25, 2.125]


def test_matmul_and_linear_refuse_mixed_dtypes_as_pytorch_does():
    with pytest.raises(RuntimeError, match="same dtype"):
        pargraph.ones(2, 2, dtype=pargraph.int64) @ pargraph.ones(2, 2)
    with pytest.raises(RuntimeError, match="same dtype"):
        pargraph.nn.functional.linear(pargraph.ones(2, 3, dtype=pargraph.float64),
                                      pargraph.ones(4, 3))
    with pytest.raises(RuntimeError, match="Float and Double"):  # the bias's dtype too
        pargraph.nn.functional.linear(pargraph.ones(2, 3), pargraph.ones(4, 3),
                                      pargraph.ones(4, dtype=pargraph.float64))
    assert pargraph.nn.functional.linear(pargraph.ones(2, 3, dtype=pargraph.float64),
                                         pargraph.ones(4, 3, dtype=pargraph.float64)).dtype \
        == pargraph.float64


def test_bitwise_ops_on_integers_logical_on_bools_refused_on_floats():
    a, b = np.array([5, -3, 12]), np.array([6, 7, -8])
    x, y = pargraph.tensor(a), pargraph.tensor(b)
    assert (x & y).tolist() == (a & b).tolist()
    assert (x | y).tolist() == (a | b).tolist()
    assert (x ^ y).tolist() == (a ^ b).tolist()
    assert (~x).tolist() == (~a).tolist()
    assert (x ^ 3).tolist() == (a ^ 3).tolist() and (3 & x).tolist() == (3 & a).tolist()
    p, q = pargraph.tensor([True, True, False]), pargraph.tensor([True, False, False])
    assert (p & q).tolist() == [True, False, False] and (p ^ q).tolist() == [False, True, False]
    assert (~p).tolist() == [False, False, True] and (p | q).dtype == pargraph.bool
    assert (p & 1).dtype == pargraph.int64  # a Python int outranks bool, as in PyTorch
    f = pargraph.ones(3)
    for apply in (lambda: f & f, lambda: f | 1, lambda: f ^ p):
        with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
            apply()
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer"):
        _ = ~f


def test_a_mask_of_the_wrong_shape_raises_like_pytorch():
    x = pargraph.ones(3, 4)
    with pytest.raises(IndexError, match=r"mask \[2\] at index 0 does not match the shape of "
                                         r"the indexed tensor \[3, 4\] at index 0"):
        x[pargraph.tensor([True, False])]
    with pytest.raises(IndexError, match=r"indexed tensor \[3, 4\] at index 1"):
        x[:, [True, False, True]]
    assert x[..., pargraph.tensor([True, False, True, True])].shape == (3, 3)
    assert x[None, pargraph.tensor([True, False, True])].shape == (1, 2, 4)
    assert x[pargraph.ones(3, 4, dtype=pargraph.bool)].shape == (12,)
    assert x[pargraph.tensor([0, 2]), ...].shape == (2, 4)  # an index tensor before ...
    assert x[np.array([0, 2]), ..., pargraph.tensor([True, False, True, False])].shape == (2,)


@pytest.mark.parametrize("call,message", [
    (lambda x: x.split(0), "split_size can only be 0 if dimension size is 0, but got "
                           "dimension size of 4"),
    (lambda x: x.split(-1), "split expects split_size be non-negative, but got split_size=-1"),
    (lambda x: x.chunk(0), "chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda x: x.chunk(-1), "chunk expects `chunks` to be greater than 0, got: -1"),
])
def test_split_and_chunk_refuse_bad_sizes_like_pytorch(call, message):
    with pytest.raises(RuntimeError) as error:
        call(pargraph.ones(4))
    assert str(error.value) == message
    assert [p.shape for p in pargraph.ones(0).split(0)] == [(0,)]
