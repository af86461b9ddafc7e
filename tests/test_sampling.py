"""F.grid_sample and F.affine_grid against torch 2.13: values and float64 gradients with
respect to the images, the grid and theta, for every mode, padding and align_corners; the
errors and warnings; a spatial transformer trained eager and compiled."""

import warnings

import numpy as np
import pytest

import pargraph
from pargraph.nn import functional as F

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
TF = torch.nn.functional

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((2, 3, 5, 4))
GRID = RNG.uniform(-1.3, 1.3, (2, 6, 7, 2))  # some positions outside, to test padding
GRID[0, 0, 0], GRID[0, 0, 1], GRID[1, 2, 3] = [1.0, -1.0], [0.0, 0.0], [-1.0, 1.0]


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_values_and_gradients_as_pytorchs(mode, padding_mode, align_corners):
    x, grid = (pargraph.tensor(a, requires_grad=True) for a in (IMAGES, GRID))
    tx, tgrid = (torch.tensor(a, requires_grad=True) for a in (IMAGES, GRID))
    ours = F.grid_sample(x, grid, mode, padding_mode, align_corners)
    theirs = TF.grid_sample(tx, tgrid, mode, padding_mode, align_corners)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    weights = RNG.standard_normal(tuple(theirs.shape))
    (ours * pargraph.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(grid.grad.numpy(), tgrid.grad.numpy(), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (2, 3, 2, 3, 4)])
@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_grid_as_pytorchs(size, align_corners):
    theta = RNG.standard_normal((2, len(size) - 2, len(size) - 1))
    ours_theta, theirs_theta = (lib.tensor(theta, requires_grad=True)
                                for lib in (pargraph, torch))
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = F.affine_grid(ours_theta, size, align_corners)
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = TF.affine_grid(theirs_theta, size, align_corners)
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    weights = RNG.standard_normal(tuple(theirs.shape))
    (ours * pargraph.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours_theta.grad.numpy(), theirs_theta.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 2, 2), lib.ones(1, 1, 1, 2),
                                              mode="cubic", align_corners=False),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 2, 2), lib.ones(1, 1, 1, 2),
                                              padding_mode="wrap", align_corners=False),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(1, 1, 2, 2), lib.ones(1, 1, 1, 3),
                                              align_corners=False),
    lambda lib: lib.nn.functional.grid_sample(lib.ones(2, 1, 2, 2), lib.ones(1, 1, 1, 2),
                                              align_corners=False),
    lambda lib: lib.nn.functional.affine_grid(lib.ones(1, 2, 3), (1, 1, 2), False),
    lambda lib: lib.nn.functional.affine_grid(lib.ones(1, 3, 3), (1, 1, 2, 2), False),
])
def test_errors_are_pytorchs(call):
    caught = []
    for library in (pargraph, torch):
        with pytest.raises(Exception) as raised:
            call(library)
        caught.append((type(raised.value).__name__,
                       str(raised.value).replace("torch.", "").replace("pargraph.", "")))
    assert caught[0] == caught[1]


def test_the_default_align_corners_warns_as_pytorchs():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(pargraph.ones(1, 1, 2, 2), pargraph.zeros(1, 1, 1, 2))
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(pargraph.ones(1, 1, 2, 2), pargraph.zeros(1, 1, 1, 2), "bicubic",
                      align_corners=False)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_spatial_transformer_trains_as_pytorchs(compiled):
    """The localization net predicts theta, affine_grid and grid_sample warp the images, a
    classifier reads them: three Adam steps give PyTorch's losses and parameters."""
    def make(lib):
        class Transformer(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.localize = lib.nn.Linear(16, 6)
                self.classify = lib.nn.Linear(16, 3)

            def forward(self, x):
                theta = self.localize(x.flatten(1)).reshape(-1, 2, 3) + lib.tensor(
                    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=x.dtype)
                grid = lib.nn.functional.affine_grid(theta, tuple(x.shape), align_corners=False)
                warped = lib.nn.functional.grid_sample(x, grid, align_corners=False)
                return self.classify(warped.flatten(1))
        return Transformer().double()

    theirs, ours = make(torch), make(pargraph)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((5, 1, 4, 4))
    y = np.array([0, 1, 2, 1, 0])
    ours_opt = pargraph.optim.Adam(ours.parameters(), lr=0.05)
    theirs_opt = torch.optim.Adam(theirs.parameters(), lr=0.05)

    def step(images, labels):
        ours_opt.zero_grad()
        loss = F.cross_entropy(ours(images), labels)
        loss.backward()
        ours_opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    for _ in range(3):
        loss = run(pargraph.tensor(x), pargraph.tensor(y))
        theirs_opt.zero_grad()
        expected = TF.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        expected.backward()
        theirs_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-10)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-8)
