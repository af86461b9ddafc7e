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


GAMMA_FAMILY = {
    "Gamma": (lambda lib, a, b: lib.distributions.Gamma(a, b), (POSITIVE * 3, SCALE),
              POSITIVE),
    "Chi2": (lambda lib, a: lib.distributions.Chi2(a), (POSITIVE * 4,), POSITIVE),
    "Beta": (lambda lib, a, b: lib.distributions.Beta(a, b), (POSITIVE, SCALE * 2),
             np.array([0.2, 0.5, 0.9, 0.01])),
    "Dirichlet": (lambda lib, a: lib.distributions.Dirichlet(a),
                  (np.abs(RNG.standard_normal((2, 3))) + 0.3,),
                  np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
    "StudentT": (lambda lib, df, loc, scale: lib.distributions.StudentT(df, loc, scale),
                 (np.array([0.5, 1.5, 3.0, 7.0]), LOC, SCALE), REAL),
}


@pytest.mark.parametrize("name", list(GAMMA_FAMILY))
def test_the_gamma_family_scores_and_moments_as_pytorchs(name):
    make, parameters, value = GAMMA_FAMILY[name]
    results = []
    for lib in (pargraph, torch):
        params = [lib.tensor(p, requires_grad=True) for p in parameters]
        d = make(lib, *params)
        out = {"log_prob": d.log_prob(lib.tensor(value)), "entropy": d.entropy()}
        moments = {what: getattr(d, what).detach() for what in ("mean", "variance", "mode")}
        if name in ("Gamma", "Chi2"):
            moments["cdf"] = d.cdf(lib.tensor(value)).detach()
        total = sum((v * (k + 1)).sum() for k, v in enumerate(out.values()))
        grads = lib.autograd.grad(total, params)
        results.append(({k: v.detach().numpy() for k, v in {**out, **moments}.items()},
                         [g.numpy() for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-10, atol=1e-12, err_msg=key)
    # The gradients go through digamma and trigamma, where scipy's and PyTorch's own
    # implementations differ in the ninth digit.
    for a, b in zip(our_grads, their_grads):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12)


def test_gamma_samples_are_reparameterized_with_the_implicit_gradient():
    """``d E[X] / d concentration`` by the samples' pathwise gradients against the closed
    forms: Gamma(a, b) has mean a / b, Beta(a, b) a / (a + b), Dirichlet(c) c / sum(c)."""
    pargraph.manual_seed(0)
    a = pargraph.tensor([0.3, 2.0, 9.0], dtype=pargraph.float64, requires_grad=True)
    draws = pargraph.distributions.Gamma(a, 2.0).rsample((40000,))
    draws.mean(0).sum().backward()
    np.testing.assert_allclose(draws.mean(0).detach().numpy(), a.detach().numpy() / 2,
                               rtol=0.03)
    np.testing.assert_allclose(a.grad.numpy(), 0.5, rtol=0.03)
    a = pargraph.tensor([0.5, 2.0], dtype=pargraph.float64, requires_grad=True)
    b = pargraph.tensor([1.0, 1.0], dtype=pargraph.float64, requires_grad=True)
    pargraph.distributions.Beta(a, b).rsample((40000,)).mean(0).sum().backward()
    A, B = np.array([0.5, 2.0]), np.array([1.0, 1.0])
    np.testing.assert_allclose(a.grad.numpy(), B / (A + B) ** 2, rtol=0.03)
    np.testing.assert_allclose(b.grad.numpy(), -A / (A + B) ** 2, rtol=0.03)
    c = pargraph.tensor([0.5, 1.0, 2.5], dtype=pargraph.float64, requires_grad=True)
    draws = pargraph.distributions.Dirichlet(c).rsample((40000,))
    np.testing.assert_allclose(draws.sum(-1).detach().numpy(), 1.0, rtol=1e-12)
    draws.mean(0)[0].backward()  # d (c0 / total) / dc = (total - c0, -c0, -c0) / total^2
    C = np.array([0.5, 1.0, 2.5])
    expected = (np.array([C.sum(), 0, 0]) - C[0]) / C.sum() ** 2
    np.testing.assert_allclose(c.grad.numpy(), expected, rtol=0.05, atol=2e-3)
    t = pargraph.distributions.StudentT(pargraph.tensor([5.0]), 1.0, 2.0).sample((40000,))
    assert tuple(t.shape) == (40000, 1) and not t.requires_grad
    np.testing.assert_allclose(float(t.mean()), 1.0, atol=0.05)


def test_the_implicit_gradient_is_the_quantiles_derivative():
    """``standard_gamma_grad(a, x)`` is ``d/da`` of the gamma quantile at ``x``'s level."""
    from scipy import special

    from pargraph import ops

    a = np.array([0.05, 0.7, 3.0, 40.0])
    u = np.array([0.3, 0.6, 0.05, 0.99])
    x = special.gammaincinv(a, u)
    h = 1e-6 * a
    numeric = (special.gammaincinv(a + h, u) - special.gammaincinv(a - h, u)) / (2 * h)
    np.testing.assert_allclose(ops.standard_gamma_grad.forward(a, x), numeric, rtol=1e-5)


def test_incomplete_gamma_functions_as_pytorchs():
    a, x = POSITIVE * 2, POSITIVE
    for name in ("gammainc", "gammaincc"):
        values = []
        for lib in (pargraph, torch):
            tx = lib.tensor(x, requires_grad=True)
            out = getattr(lib.special, name)(lib.tensor(a), tx)
            (grad,) = lib.autograd.grad(out.sum(), [tx])
            values.append((out.detach().numpy(), grad.numpy()))
        for ours, theirs in zip(*values):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    assert pargraph.igamma(pargraph.tensor([1.0]), pargraph.tensor([1.0])).item() == \
        pytest.approx(1 - math.exp(-1))
    with pytest.raises(NotImplementedError, match="with respect to 'self'"):
        a = pargraph.tensor([2.0], requires_grad=True)
        pargraph.special.gammainc(a, pargraph.tensor([1.0])).sum().backward()


KL_PAIRS = {
    "Gamma": lambda lib, a, b: lib.distributions.Gamma(a, b),
    "Chi2": lambda lib, a, b: lib.distributions.Chi2(a),
    "Beta": lambda lib, a, b: lib.distributions.Beta(a, b),
    "Dirichlet": lambda lib, a, b: lib.distributions.Dirichlet(a.reshape(2, 2)),
    "Exponential": lambda lib, a, b: lib.distributions.Exponential(a),
    "Laplace": lambda lib, a, b: lib.distributions.Laplace(a - 1, b),
    "Poisson": lambda lib, a, b: lib.distributions.Poisson(a),
    "Geometric": lambda lib, a, b: lib.distributions.Geometric(probs=a / (a + b)),
    "Gumbel": lambda lib, a, b: lib.distributions.Gumbel(a - 1, b),
    "HalfNormal": lambda lib, a, b: lib.distributions.HalfNormal(a),
    "OneHotCategorical": lambda lib, a, b: lib.distributions.OneHotCategorical(
        probs=(a / a.sum()).reshape(2, 2)),
    "Cauchy": lambda lib, a, b: lib.distributions.Cauchy(a - 1, b),
}


@pytest.mark.parametrize("name", list(KL_PAIRS))
def test_kl_divergences_as_pytorchs(name):
    make = KL_PAIRS[name]
    values = [POSITIVE, SCALE, POSITIVE[::-1] + 0.1, SCALE[::-1] + 0.2]
    results = []
    for lib in (pargraph, torch):
        params = [lib.tensor(v, requires_grad=True) for v in values]
        kl = lib.distributions.kl_divergence(make(lib, *params[:2]), make(lib, *params[2:]))
        grads = lib.autograd.grad(kl.sum(), params, allow_unused=True)
        results.append((kl.detach().numpy(), [np.zeros(4) if g is None else g.numpy()
                                              for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    for a, b in zip(our_grads, their_grads):  # through digamma: see the test above
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12)


def test_binomial_and_multinomial_as_pytorchs():
    def f64(lib, v):
        return lib.tensor(v, dtype=lib.float64, requires_grad=True)

    cases = [
        lambda lib, p: lib.distributions.Binomial(f64(lib, [3.0, 5.0, 10.0]), probs=p)
        .log_prob(lib.tensor([1.0, 5.0, 3.0], dtype=lib.float64)),
        lambda lib, p: lib.distributions.Binomial(4, logits=p).log_prob(
            lib.tensor([0.0, 4.0, 2.0], dtype=lib.float64)),
        lambda lib, p: lib.distributions.Binomial(4, probs=p).entropy(),
        lambda lib, p: lib.distributions.Binomial(f64(lib, [3.0, 5.0, 10.0]), probs=p).mode,
        lambda lib, p: lib.distributions.Binomial(6, probs=p).variance,
        lambda lib, p: lib.distributions.Multinomial(5, probs=p / p.sum()).log_prob(
            lib.tensor([1.0, 1.0, 3.0], dtype=lib.float64)),
        lambda lib, p: lib.distributions.Multinomial(5, logits=p).log_prob(
            lib.tensor([0.0, 5.0, 0.0], dtype=lib.float64)),
        lambda lib, p: lib.distributions.Multinomial(4, probs=p / p.sum()).entropy(),
        lambda lib, p: lib.distributions.kl_divergence(
            lib.distributions.Binomial(5, probs=p), lib.distributions.Binomial(5, probs=p * 0.5)),
    ]
    for case in cases:
        results = []
        for lib in (pargraph, torch):
            p = lib.tensor([0.2, 0.5, 0.9], dtype=lib.float64, requires_grad=True)
            out = case(lib, p)
            grad = lib.autograd.grad(out.sum(), [p], allow_unused=True)[0] \
                if out.requires_grad else None
            results.append((out.detach().numpy(), None if grad is None else grad.numpy()))
        (ours, our_grad), (theirs, their_grad) = results
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)
        if their_grad is not None:
            np.testing.assert_allclose(our_grad, their_grad, rtol=1e-8, atol=1e-12)
    pargraph.manual_seed(0)
    draws = pargraph.distributions.Binomial(pargraph.tensor([10.0]), probs=0.3).sample((20000,))
    assert tuple(draws.shape) == (20000, 1) and abs(float(draws.mean()) - 3.0) < 0.05
    counts = pargraph.distributions.Multinomial(6, probs=pargraph.tensor([0.2, 0.3, 0.5])) \
        .sample((20000,))
    assert (counts.sum(-1) == 6).all().item()
    np.testing.assert_allclose(counts.mean(0).numpy(), [1.2, 1.8, 3.0], atol=0.05)
    with pytest.raises(NotImplementedError, match="inhomogeneous"):
        pargraph.distributions.Multinomial(pargraph.tensor(3), probs=pargraph.tensor([0.5, 0.5]))


@pytest.mark.parametrize("name,arguments", [
    ("Normal", (0.5, 2.0)), ("Uniform", (-1.0, 3.0)), ("Laplace", (0.5, 1.5)),
    ("Exponential", (2.0,)), ("Cauchy", (-0.5, 0.7))])
def test_icdf_inverts_cdf_as_pytorchs(name, arguments):
    torch = pytest.importorskip("torch")
    q = [0.05, 0.3, 0.5, 0.9]
    seen = []
    for library in (pargraph, torch):
        params = [library.tensor(a, dtype=library.float64, requires_grad=True)
                  for a in arguments]
        dist = getattr(library.distributions, name)(*params)
        x = dist.icdf(library.tensor(q, dtype=library.float64))
        x.sum().backward()
        seen.append((x.detach().numpy(), dist.cdf(x.detach()).detach().numpy(),
                     [p.grad.numpy() for p in params]))
    np.testing.assert_allclose(seen[0][0], seen[1][0], rtol=1e-12)
    np.testing.assert_allclose(seen[0][1], q, rtol=1e-12)
    for ours, theirs in zip(seen[0][2], seen[1][2]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
