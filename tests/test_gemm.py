"""BLAS's product in place (``pargraph.ops.gemm``), through MKL and through numpy's own
OpenBLAS, against numpy's ``matmul`` in float64."""

import importlib.metadata

import dask
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from pargraph.ops import gemm as gemm_module
from pargraph.ops.gemm import gemm, product


def _mkl_installed() -> bool:
    try:
        importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture(params=["numpy", "mkl"])
def library(request):
    """Each test once per BLAS; MKL's only where its wheel is (the test extra installs it)."""
    if request.param == "mkl" and not _mkl_installed():
        pytest.skip("the mkl wheel is not installed (pip install 'pargraph[mkl]')")
    with dask.config.set({"pargraph.blas": request.param}):
        gemm_module.blas.reset()
        yield request.param
    gemm_module.blas.reset()


def _layouts(rng, shape, dtype):
    """The same matrix contiguous, transposed (Fortran order), and as a slice of wider rows."""
    values = rng.standard_normal(shape).astype(dtype)
    wide = np.zeros((shape[0], shape[1] + 3), dtype)
    wide[:, 1:1 + shape[1]] = values
    return [values, np.asfortranarray(values), wide[:, 1:1 + shape[1]]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_gemm_writes_and_adds_the_product_in_every_layout(dtype, library):
    rng = np.random.default_rng(0)
    for m, k, n in [(3, 4, 5), (1, 7, 1), (6, 1, 2), (33, 17, 9)]:
        for a in _layouts(rng, (m, k), dtype):
            for b in _layouts(rng, (k, n), dtype):
                for accumulate in (False, True):
                    start = rng.standard_normal((m, n + 2)).astype(dtype)
                    c = start.copy()[:, :n]  # rows longer than the product's
                    gemm(a, b, c, accumulate)
                    expected = a.astype(np.float64) @ b.astype(np.float64) + (
                        start[:, :n] if accumulate else 0)
                    tolerance = 1e-2 if dtype == np.float16 else 1e-5
                    np.testing.assert_allclose(c.astype(np.float64), expected, rtol=tolerance,
                                               atol=tolerance)


def test_gemm_of_empty_operands_writes_zeros_or_keeps_c(library):
    c = np.ones((2, 3), np.float32)
    gemm(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), c, accumulate=True)
    assert (c == 1).all()
    gemm(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), c, accumulate=False)
    assert (c == 0).all()


def test_numpys_own_openblas_is_called_directly():
    numpys = [lib for lib in threadpool_info()
              if lib["user_api"] == "blas" and "numpy" in lib["filepath"]]
    if not numpys or numpys[0]["internal_api"] != "openblas":
        pytest.skip("numpy is not built with a bundled OpenBLAS here")
    found = gemm_module.blas.functions()
    assert set(found) == {np.dtype(np.float32), np.dtype(np.float64)}


def test_the_chosen_library_is_the_one_asked_for(library):
    assert product(np.ones((256, 256), np.float32), np.ones((256, 256), np.float32))[0, 0] == 256
    assert gemm_module.blas.name == library
    assert set(gemm_module.blas.functions()) == {np.dtype(np.float32), np.dtype(np.float64)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_product_equals_matmul_for_every_size_layout_and_dtype(dtype, library):
    rng = np.random.default_rng(1)
    for m, k, n in [(1, 1, 1), (2, 3, 4), (40, 64, 48), (257, 33, 65), (20, 300, 200),
                    (210, 200, 200), (0, 5, 3), (4, 0, 2)]:
        for a in _layouts(rng, (m, k), dtype) if m and k else [np.ones((m, k), dtype)]:
            for b in _layouts(rng, (k, n), dtype) if k else [np.ones((k, n), dtype)]:
                got = product(a, b)
                assert got.dtype == np.matmul(a, b).dtype and got.shape == (m, n)
                tolerance = 1e-2 if dtype == np.float16 else 1e-5
                np.testing.assert_allclose(got.astype(np.float64),
                                           a.astype(np.float64) @ b.astype(np.float64),
                                           rtol=tolerance, atol=tolerance * k)


def test_product_leaves_what_blas_cannot_do_to_numpy(library):
    a64, b32 = np.ones((64, 64)), np.ones((64, 64), np.float32)
    assert product(a64, b32).dtype == np.float64  # numpy's promotion
    with pytest.raises(ValueError, match="matmul"):
        product(np.ones((64, 3)), np.ones((4, 64)))


def test_the_same_product_gives_the_same_bits_wherever_its_operands_lie(library):
    # A compiled step's arrays lie elsewhere than an eager step's: their results must agree.
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((24, 400), (400, 130)))
    first = product(a, b)
    for shift in (4, 8, 16, 36):
        raw = np.empty(a.nbytes + b.nbytes + 256, np.uint8)
        start = (-raw.ctypes.data) % 64 + shift
        a2 = raw[start:start + a.nbytes].view(np.float32).reshape(a.shape)
        b2 = raw[start + a.nbytes:start + a.nbytes + b.nbytes].view(np.float32).reshape(b.shape)
        a2[...], b2[...] = a, b
        assert np.array_equal(product(a2, b2), first), shift


def test_an_unknown_or_missing_library_is_a_clear_error(monkeypatch):
    with dask.config.set({"pargraph.blas": "openblas"}):
        gemm_module.blas.reset()
        with pytest.raises(ValueError, match="'auto', 'mkl' or 'numpy'"):
            gemm_module.blas.functions()
    monkeypatch.setattr(gemm_module, "_mkl", lambda: {})
    with dask.config.set({"pargraph.blas": "mkl"}):
        gemm_module.blas.reset()
        with pytest.raises(RuntimeError, match=r"pip install 'pargraph\[mkl\]'"):
            gemm_module.blas.functions()
    with dask.config.set({"pargraph.blas": "auto"}):  # MKL absent: numpy's, quietly
        gemm_module.blas.reset()
        assert gemm_module.blas.functions() and gemm_module.blas.name == "numpy"
    gemm_module.blas.reset()


def test_a_convolution_and_an_lstm_train_alike_on_either_library():
    import pargraph

    if not _mkl_installed():
        pytest.skip("the mkl wheel is not installed (pip install 'pargraph[mkl]')")

    def gradients(library):
        with dask.config.set({"pargraph.blas": library}):
            gemm_module.blas.reset()
            pargraph.manual_seed(0)
            conv, lstm = pargraph.nn.Conv2d(8, 16, 3, padding=1), pargraph.nn.LSTM(12, 32)
            x, s = pargraph.randn(4, 8, 12, 12), pargraph.randn(5, 3, 12)
            (conv(x).square().mean() + lstm(s)[0].square().mean()).backward()
            grads = [p.grad.numpy() for p in [*conv.parameters(), *lstm.parameters()]]
            assert gemm_module.blas.name == library  # the products ran on it
        gemm_module.blas.reset()
        return grads

    for a, b in zip(gradients("mkl"), gradients("numpy")):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
