"""The distributions and transforms added after the first ones, against PyTorch: log_prob,
cdf, entropy, moments and their float64 gradients, sample shapes and sample statistics, and a
tanh-squashed Gaussian policy (SAC's) through TransformedDistribution."""

import math

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(7)
LOC, SCALE = RNG.standard_normal(4), np.abs(RNG.standard_normal(4)) + 0.3
POSITIVE = np.abs(RNG.standard_normal(4)) + 0.2
REAL = RNG.standard_normal(4)

CASES = {
    "Laplace": (lambda lib, a, b: lib.distributions.Laplace(a, b), (LOC, SCALE), REAL),
    "Exponential": (lambda lib, a: lib.distributions.Exponential(a), (SCALE,), POSITIVE),
    "Cauchy": (lambda lib, a, b: lib.distributions.Cauchy(a, b), (LOC, SCALE), REAL),
    "Gumbel": (lambda lib, a, b: lib.distributions.Gumbel(a, b), (LOC, SCALE), REAL),
    "HalfNormal": (lambda lib, a: lib.distributions.HalfNormal(a), (SCALE,), POSITIVE),
    "LogNormal": (lambda lib, a, b: lib.distributions.LogNormal(a, b), (LOC, SCALE), POSITIVE),
    "Geometric": (lambda lib, p: lib.distributions.Geometric(probs=p), (SCALE / 2,),
                  np.array([0.0, 1.0, 3.0, 2.0])),
    "Poisson": (lambda lib, r: lib.distributions.Poisson(r), (POSITIVE,),
                np.array([0.0, 1.0, 3.0, 2.0])),
}


@pytest.mark.parametrize("name", list(CASES))
def test_scores_and_moments_as_pytorchs(name):
    make, parameters, value = CASES[name]
    results = []
    for lib in (pargraph, torch):
        params = [lib.tensor(p, requires_grad=True) for p in parameters]
        d = make(lib, *params)
        out = {"log_prob": d.log_prob(lib.tensor(value))}
        for what in ("mean", "variance", "mode", "entropy", "cdf"):
            try:
                out[what] = d.cdf(lib.tensor(value)) if what == "cdf" else (
                    d.entropy() if what == "entropy" else getattr(d, what))
            except NotImplementedError:
                continue
        total = sum((v * (k + 1)).sum() for k, v in enumerate(out.values())
                    if v.requires_grad and bool(v.isfinite().all()))
        grads = lib.autograd.grad(total, params) if hasattr(total, "requires_grad") else ()
        results.append(({k: v.detach().numpy() for k, v in out.items()},
                        [g.numpy() for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    assert ours.keys() == theirs.keys()
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-10, atol=1e-12, err_msg=key)
    for a, b in zip(our_grads, their_grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["Laplace", "Exponential", "Gumbel", "HalfNormal", "LogNormal",
                                  "Geometric", "Poisson"])
def test_samples_have_the_moments(name):
    make, parameters, _ = CASES[name]
    pargraph.manual_seed(0)
    d = make(pargraph, *[pargraph.tensor(p) for p in parameters])
    draws = d.sample((40000,))
    assert tuple(draws.shape) == (40000, 4)
    np.testing.assert_allclose(draws.mean(0).numpy(), d.mean.numpy(), rtol=0.05, atol=0.05)
    if d.has_rsample:
        params = [pargraph.tensor(p, requires_grad=True) for p in parameters]
        d = make(pargraph, *params)
        d.rsample((8,)).sum().backward()
        assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in params)


def test_one_hot_categorical_as_pytorchs():
    probs = np.array([[0.2, 0.5, 0.3], [0.9, 0.05, 0.05]])
    value = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    outs = []
    for lib in (pargraph, torch):
        d = lib.distributions.OneHotCategorical(probs=lib.tensor(probs))
        outs.append([d.log_prob(lib.tensor(value)).numpy(), d.entropy().numpy(),
                     d.mean.numpy(), d.variance.numpy(), d.mode.numpy(),
                     tuple(d.sample((5,)).shape), tuple(d.event_shape)])
    for a, b in zip(*outs):
        if isinstance(b, tuple):
            assert tuple(a) == b
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("transforms", ["tanh", "affine exp", "sigmoid", "softplus power"])
def test_transformed_distributions_as_pytorchs(transforms):
    def build(lib, loc, scale):
        t = lib.distributions.transforms
        parts = {"tanh": [t.TanhTransform()],
                 "affine exp": [t.AffineTransform(0.5, 2.0), t.ExpTransform()],
                 "sigmoid": [t.SigmoidTransform()],
                 "softplus power": [t.SoftplusTransform(), t.PowerTransform(2.0)]}[transforms]
        return lib.distributions.TransformedDistribution(lib.distributions.Normal(loc, scale),
                                                         parts)

    pargraph.manual_seed(1)
    samples = build(pargraph, pargraph.tensor(LOC), pargraph.tensor(SCALE)).sample((3,))
    value = samples.numpy().clip(-0.999, None)
    results = []
    for lib in (pargraph, torch):
        loc, scale = lib.tensor(LOC, requires_grad=True), lib.tensor(SCALE, requires_grad=True)
        d = build(lib, loc, scale)
        log_prob = d.log_prob(lib.tensor(value))
        log_prob.sum().backward()
        results.append((log_prob.detach().numpy(), loc.grad.numpy(), scale.grad.numpy(),
                        tuple(d.rsample((2,)).shape)))
    for a, b in zip(*results):
        if isinstance(b, tuple):
            assert a == b
        else:
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_a_tanh_squashed_gaussian_policy_as_sacs():
    """SAC's actor: a Normal squashed by tanh, reparameterized; its log-probability and the
    gradient of the actor's loss equal PyTorch's for the same draws."""
    noise = RNG.standard_normal((5, 2))
    results = []
    for lib in (pargraph, torch):
        mu = lib.tensor(noise * 0.5, requires_grad=True)
        log_std = lib.tensor(np.full((5, 2), -0.5), requires_grad=True)
        base = lib.distributions.Normal(mu, log_std.exp())
        squashed = lib.distributions.TransformedDistribution(
            base, [lib.distributions.transforms.TanhTransform()])
        action = (mu + log_std.exp() * lib.tensor(noise)).tanh()  # the draw, by hand
        log_prob = squashed.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
        loss = (0.2 * log_prob - action.sum(-1)).mean()
        loss.backward()
        results.append((log_prob.detach().numpy(), mu.grad.numpy(), log_std.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    assert math.isfinite(float(results[0][0].sum()))
