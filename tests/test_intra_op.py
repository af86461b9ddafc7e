"""Intra-op threads (pargraph.ops.intra_op): a big convolution in a narrow run splits its
samples across BLAS's threads, agrees with the unsplit op and PyTorch on generated
geometries, runs its parts' products on one thread each, and reports a part's failure."""

import dask
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import pargraph
from pargraph.ops.gemm import blas
from pargraph.ops.intra_op import SPLIT_SECONDS, IntraOp, intra_op

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
needs_mkl = pytest.mark.skipif(
    blas.functions() is None or blas.name != "mkl",
    reason="splits run only on MKL's sequential products: pip install 'pargraph[mkl]'")


def _geometries(count=6):
    """Generated stride-1 convolutions big enough to split: batch 2-9, channels, odd and even
    images, kernels 1-5, paddings as ints and pairs, dilations 1-2."""
    rng = np.random.default_rng(3)
    for _ in range(count):
        k = int(rng.choice([2, 3, 5]))
        dilation = int(rng.integers(1, 3))
        pad = int(rng.integers(0, k)) if rng.random() < 0.5 else \
            (int(rng.integers(0, k)), int(rng.integers(0, k)))
        shape = (int(rng.integers(2, 10)), int(rng.integers(8, 24)),
                 int(rng.integers(30, 60)), int(rng.integers(30, 60)))
        outputs = int(rng.integers(8, 33))
        # at least SPLIT_SECONDS of work by the ops' own estimate, so the split is due
        shape = (max(shape[0], int(3 * SPLIT_SECONDS * 15e9 / (
            2 * outputs * shape[1] * k * k * shape[2] * shape[3])) + 1),) + shape[1:]
        yield shape, outputs, k, pad, dilation


def _conv_step(lib, x, w, b, pad, dilation):
    xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
    y = lib.nn.functional.conv2d(xt, wt, bt, padding=pad, dilation=dilation)
    (y * y.tanh()).sum().backward()
    return [t.detach().numpy() for t in (y, xt.grad, wt.grad, bt.grad)]


@needs_mkl
@pytest.mark.parametrize("case", list(_geometries()), ids=str)
def test_a_split_convolution_agrees_with_the_unsplit_one_and_pytorch(case):
    shape, outputs, k, pad, dilation = case
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((outputs, shape[1], k, k)) / k).astype(np.float32)
    b = rng.standard_normal(outputs).astype(np.float32)
    results = {}
    for split in (True, False):
        before = intra_op.splits
        with threadpool_limits(2, "blas"), dask.config.set({"pargraph.intra-op": split,
                                                           "scheduler": "sync"}):
            results[split] = _conv_step(pargraph, x, w, b, pad, dilation)
        # the input gradient splits at any padding; the op and the weight gradient where the
        # padded grid is not much larger than the output (convolution.OVERCOMPUTE)
        assert (intra_op.splits - before >= 1) is split
    reference = _conv_step(torch, x, w, b, pad, dilation)
    for split, whole, theirs in zip(results[True], results[False], reference):
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(split, whole, atol=1e-5 * scale, rtol=0)
        np.testing.assert_allclose(split, theirs, atol=2e-5 * scale, rtol=0)


@needs_mkl
def test_a_run_limited_to_one_blas_thread_and_a_small_op_do_not_split():
    x = np.ones((8, 16, 40, 40), np.float32)
    w = np.ones((16, 16, 3, 3), np.float32)
    before = intra_op.splits
    with threadpool_limits(1, "blas"):
        pargraph.nn.functional.conv2d(pargraph.tensor(x), pargraph.tensor(w), padding=1).numpy()
    with threadpool_limits(2, "blas"):
        pargraph.nn.functional.conv2d(pargraph.tensor(x[:1, :2, :8, :8]),
                                      pargraph.tensor(w[:2, :2]), padding=1).numpy()
    assert intra_op.splits == before


@needs_mkl
def test_parts_cover_the_samples_and_run_their_products_on_one_thread():
    pool = IntraOp()
    with threadpool_limits(2, "blas"):
        ranges = pool.parts(7, SPLIT_SECONDS)
        assert pool.parts(7, SPLIT_SECONDS / 2) == [(0, 7)]
    assert ranges == [(0, 3), (3, 7)]
    seen = pool.run(lambda lo, hi: (lo, hi, blas.local.one), ranges)
    assert seen == [(0, 3, True), (3, 7, True)]
    assert not getattr(blas.local, "one", False)  # the calling thread's products are its own


def test_a_failing_part_raises_in_the_op_after_every_part_finished():
    pool, finished = IntraOp(), []

    def part(lo, hi):
        if lo:
            raise ValueError(f"part {lo}-{hi} failed")
        finished.append(lo)

    with pytest.raises(ValueError, match="part 2-4 failed"):
        pool.run(part, [(0, 2), (2, 4)])
    assert finished == [0]


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 1, 1), (1, 0, 2), (1, 2, 1)])
def test_an_empty_batch_convolves_to_an_empty_result_as_pytorchs(stride, padding, groups):
    """No samples: one empty part, PyTorch's shapes and a zero weight gradient, on every
    path (shifted products, columns, groups)."""
    found = []
    for lib in (pargraph, torch):
        x = lib.zeros(0, 4, 9, 9, requires_grad=True)
        w = lib.ones(6, 4 // groups, 3, 3, requires_grad=True)
        with threadpool_limits(2, "blas"), dask.config.set(scheduler="sync"):
            y = lib.nn.functional.conv2d(x, w, stride=stride, padding=padding, groups=groups)
            y.sum().backward()
            found.append((tuple(y.shape), tuple(x.grad.shape), w.grad.detach().numpy()))
    assert found[0][:2] == found[1][:2]
    np.testing.assert_array_equal(found[0][2], found[1][2])
