"""numpy's BLAS product in place (``pargraph.ops.gemm``) against numpy's ``matmul``."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from pargraph.ops import gemm as gemm_module
from pargraph.ops.gemm import gemm


def _layouts(rng, shape, dtype):
    """The same matrix contiguous, transposed (Fortran order), and as a slice of wider rows."""
    values = rng.standard_normal(shape).astype(dtype)
    wide = np.zeros((shape[0], shape[1] + 3), dtype)
    wide[:, 1:1 + shape[1]] = values
    return [values, np.asfortranarray(values), wide[:, 1:1 + shape[1]]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_gemm_writes_and_adds_the_product_in_every_layout(dtype):
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


def test_gemm_of_empty_operands_writes_zeros_or_keeps_c():
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
