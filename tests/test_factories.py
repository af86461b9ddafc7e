"""New tensors from data, filled, ranged and random: dtypes, values and seeding as PyTorch's."""


import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def test_python_floats_default_to_float32_and_ints_to_int64():
    assert pargraph.tensor(2.0).dtype == pargraph.float32
    assert pargraph.tensor([1, 2]).dtype == pargraph.int64
    assert pargraph.tensor([True]).dtype == pargraph.bool
    assert pargraph.tensor(np.arange(3.0)).dtype == pargraph.float64  # numpy keeps its dtype
    assert pargraph.tensor([1, 2], dtype=pargraph.float64).dtype == np.float64


@pytest.mark.parametrize(
    "make, shape, dtype, values",
    [
        (lambda: pargraph.zeros(2, 3), (2, 3), np.float32, np.zeros((2, 3))),
        (lambda: pargraph.zeros((2, 3)), (2, 3), np.float32, np.zeros((2, 3))),
        (lambda: pargraph.ones(4, dtype=pargraph.int64), (4,), np.int64, np.ones(4)),
        (lambda: pargraph.full((2,), 1.5), (2,), np.float32, [1.5, 1.5]),
        (lambda: pargraph.full((2,), True), (2,), np.bool_, [True, True]),
        (lambda: pargraph.arange(5), (5,), np.int64, np.arange(5)),
        (lambda: pargraph.arange(1, 2, 0.5), (2,), np.float32, [1.0, 1.5]),
        (lambda: pargraph.linspace(0, 1, 5), (5,), np.float32, np.linspace(0, 1, 5)),
        (lambda: pargraph.eye(3), (3, 3), np.float32, np.eye(3)),
        (lambda: pargraph.eye(2, 3), (2, 3), np.float32, np.eye(2, 3)),
        (lambda: pargraph.zeros_like(pargraph.ones(2, dtype=pargraph.float64)), (2,), np.float64,
         [0, 0]),
        (lambda: pargraph.ones_like(pargraph.zeros(2, 2)), (2, 2), np.float32, np.ones((2, 2))),
        (lambda: pargraph.full_like(pargraph.zeros(3), 7), (3,), np.float32, [7, 7, 7]),
        (lambda: pargraph.from_numpy(np.arange(3, dtype=np.float64)), (3,), np.float64,
         [0, 1, 2]),
    ],
)
def test_factories(make, shape, dtype, values):
    t = make()
    assert t.shape == shape and t.size() == shape and t.dtype == dtype
    np.testing.assert_allclose(t.numpy(), values)


def test_random_factories_are_seeded_by_manual_seed():
    pargraph.manual_seed(7)
    first = [pargraph.rand(3).tolist(), pargraph.randn(2, 2).tolist(),
             pargraph.randint(0, 10, (5,)).tolist(), pargraph.randint(4, (2,)).tolist()]
    pargraph.manual_seed(7)
    second = [pargraph.rand(3).tolist(), pargraph.randn(2, 2).tolist(),
              pargraph.randint(0, 10, (5,)).tolist(), pargraph.randint(4, (2,)).tolist()]
    assert first == second
    x = pargraph.rand(1000)
    assert 0 <= x.min().item() and x.max().item() < 1
    assert abs(pargraph.randn(10000).mean().item()) < 0.05
    assert pargraph.randint(3, 5, (100,)).min().item() >= 3
    assert pargraph.rand_like(pargraph.zeros(2, dtype=pargraph.float64)).dtype == np.float64
    assert pargraph.randn_like(pargraph.zeros(4, 2)).shape == (4, 2)


def test_from_numpy_shares_memory():
    array = np.zeros(3)
    t = pargraph.from_numpy(array)
    array[0] = 5
    assert t.tolist() == [5.0, 0.0, 0.0]


def test_factories_take_tensors_low_precision_and_refuse_integer_draws_as_pytorch():
    for library in (pargraph, torch):
        assert str(library.arange(library.tensor(3)).dtype).endswith("int64")
        assert library.arange(1, library.tensor(6), 2).tolist() == [1, 3, 5]
        assert str(library.arange(library.tensor(2.0)).dtype).endswith("float32")
        with pytest.warns(UserWarning, match="To copy construct from a tensor"):
            library.tensor(library.ones(2))
        for draw, kernel in ((library.rand, "check_uniform_bounds"),
                             (library.randn, "normal_kernel_cpu")):
            with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for '
                                                          "'Long'"):
                draw(3, dtype=library.int64)
        assert repr(library.ones(2).layout).endswith("strided")
    for dtype in (pargraph.float16, pargraph.bfloat16):
        pargraph.manual_seed(0)
        uniform = pargraph.rand(100000, dtype=dtype)
        normal = pargraph.randn(100000, dtype=dtype)
        assert uniform.dtype == dtype and normal.dtype == dtype
        values = uniform.float().numpy()
        assert values.min() >= 0 and values.max() < 1 and abs(values.mean() - 0.5) < 0.01
        assert abs(normal.float().numpy().std() - 1) < 0.02


def test_random_factories_take_a_generator():
    def draw(seed):
        g = pargraph.Generator().manual_seed(seed)
        return (pargraph.rand(3, generator=g).tolist(), pargraph.randn(2, generator=g).tolist(),
                pargraph.randint(0, 100, (4,), generator=g).tolist(),
                pargraph.randperm(6, generator=g).tolist())

    assert draw(5) == draw(5) and draw(5) != draw(6)
    pargraph.manual_seed(0)
    first = pargraph.rand(2).tolist()
    pargraph.manual_seed(0)
    pargraph.rand(2, generator=pargraph.Generator().manual_seed(1))  # leaves the global one alone
    assert pargraph.rand(2).tolist() == first
    assert sorted(pargraph.randperm(5).tolist()) == [0, 1, 2, 3, 4]
    with pytest.raises(TypeError, match="generator must be a pargraph.Generator"):
        pargraph.randn(2, generator=np.random.default_rng(0))
