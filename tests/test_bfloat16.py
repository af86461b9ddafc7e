"""bfloat16 (ml_dtypes' type, which numpy lacks): tensors, promotion, layers, gradients and
checkpoints behave as PyTorch's bfloat16 does on the CPU."""

import numpy as np
import pytest

import pargraph
from pargraph import nn

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def _same(ours, theirs):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.detach().float().numpy(),
                                  theirs.detach().float().numpy())


def test_bfloat16_promotes_as_pytorchs():
    kinds = {"bfloat16": (pargraph.bfloat16, torch.bfloat16),
             "float16": (pargraph.float16, torch.float16),
             "float32": (pargraph.float32, torch.float32),
             "float64": (pargraph.float64, torch.float64),
             "int64": (pargraph.int64, torch.int64), "bool": (np.dtype(bool), torch.bool)}
    for ours_dtype, theirs_dtype in kinds.values():
        a = pargraph.ones(2, dtype=pargraph.bfloat16) + pargraph.ones(2, dtype=ours_dtype)
        b = torch.ones(2, dtype=torch.bfloat16) + torch.ones(2, dtype=theirs_dtype)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    scalar = pargraph.ones(2, dtype=pargraph.bfloat16) * 2.5
    assert scalar.dtype == pargraph.bfloat16 and scalar.is_floating_point()
    assert pargraph.tensor([1.0]).bfloat16().type() == "torch.BFloat16Tensor"
    assert isinstance(pargraph.BFloat16Tensor([1, 2]), pargraph.BFloat16Tensor)
    assert pargraph.finfo(pargraph.bfloat16).eps == torch.finfo(torch.bfloat16).eps
    with pytest.raises(TypeError, match="floating point"):
        pargraph.finfo(pargraph.int64)


def test_bfloat16_ops_round_as_pytorchs():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    ours, theirs = pargraph.tensor(x).bfloat16(), torch.tensor(x).bfloat16()
    for op in (lambda t: t + 1.5, lambda t: t * t, lambda t: t.exp(), lambda t: t.relu(),
               lambda t: t.softmax(-1), lambda t: t.sum(0), lambda t: t.mean(),
               lambda t: t @ t.T, lambda t: t.tanh(), lambda t: t.float(),
               lambda t: t.max(1).values):
        _same(op(ours), op(theirs))
    assert repr(ours[0, :2]) == repr(theirs[0, :2]).replace("torch", "pargraph")


def test_a_bfloat16_model_trains_as_pytorchs():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                 torch.nn.Linear(8, 3)).to(torch.bfloat16)
    ours = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(pargraph.bfloat16)
    ours.load_state_dict({k: v.float().numpy() for k, v in theirs.state_dict().items()})
    ours.to(pargraph.bfloat16)
    assert all(p.dtype == pargraph.bfloat16 for p in ours.parameters())
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])
    loss = nn.functional.cross_entropy(ours(pargraph.tensor(x).bfloat16()), pargraph.tensor(y))
    expected = torch.nn.functional.cross_entropy(theirs(torch.tensor(x).bfloat16()),
                                                 torch.tensor(y))
    np.testing.assert_allclose(loss.float().item(), expected.float().item(), rtol=1e-2)
    loss.backward()
    expected.backward()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert p.grad.dtype == pargraph.bfloat16
        np.testing.assert_allclose(p.grad.float().numpy(), q.grad.float().numpy(), rtol=0.05,
                                   atol=0.02)


def test_bfloat16_tensors_survive_a_checkpoint(tmp_path):
    values = pargraph.tensor([1.5, -2.25, 3e-3]).bfloat16()
    pargraph.save({"values": values, "array": values.numpy()}, tmp_path / "state.npz")
    loaded = pargraph.load(tmp_path / "state.npz")
    assert loaded["values"].dtype == pargraph.bfloat16
    np.testing.assert_array_equal(loaded["values"].float().numpy(), values.float().numpy())
    assert loaded["array"].dtype == values.numpy().dtype


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_addmm_sums_in_float32_and_rounds_once_as_pytorchs(dtype):
    """``beta * c + alpha * (a @ b)`` in float16 or bfloat16: PyTorch's kernel sums in float32
    and rounds once, not the product, the scaled terms and the sum apart (Muon's
    Newton-Schulz iterations are such sums)."""
    rng = np.random.default_rng(1)
    c, a, b = (rng.standard_normal(shape).astype(np.float32)
               for shape in ((6, 5), (6, 7), (7, 5)))
    batched = rng.standard_normal((3, 6, 5)).astype(np.float32)
    results = []
    for library in (pargraph, torch):
        half = getattr(library, dtype)
        ct, at, bt, bat = (library.tensor(x).to(half) for x in (c, a, b, batched))
        results.append([library.addmm(ct, at, bt, beta=-4.775, alpha=2.0315),
                        ct.addmm(at, bt, beta=3.4445), ct.addmm(at, bt, beta=0.0),
                        library.baddbmm(bat, at.expand(3, 6, 7), bt.expand(3, 7, 5), beta=0.5,
                                        alpha=1.5)])
    for ours, theirs in zip(*results):
        _same(ours, theirs)
