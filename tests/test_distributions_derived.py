"""The distributions made from others (transformed, relaxed, mixtures), NegativeBinomial,
VonMises, FisherSnedecor and the vector transforms, against PyTorch: scores, moments and
their float64 gradients, sample statistics, and the transforms' values, inverses and
Jacobians."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build

RNG = np.random.default_rng(11)
LOC, SCALE = RNG.standard_normal(4), np.abs(RNG.standard_normal(4)) + 0.3
POSITIVE = np.abs(RNG.standard_normal(4)) + 0.2
UNIT = RNG.uniform(0.05, 0.95, 4)
COUNTS = np.array([0.0, 1.0, 4.0, 2.0])

#: name: (make(lib, *parameters), parameters, a value in the support, relative tolerance)
CASES = {
    "Weibull": (lambda lib, a, b: lib.distributions.Weibull(a, b), (SCALE, POSITIVE + 0.5),
                POSITIVE, 1e-10),
    "Pareto": (lambda lib, a, b: lib.distributions.Pareto(a, b), (SCALE, POSITIVE + 2.0),
               SCALE + POSITIVE, 1e-10),
    "HalfCauchy": (lambda lib, a: lib.distributions.HalfCauchy(a), (SCALE,), POSITIVE, 1e-10),
    "InverseGamma": (lambda lib, a, b: lib.distributions.InverseGamma(a, b),
                     (POSITIVE + 2.0, SCALE), POSITIVE, 1e-10),
    "Kumaraswamy": (lambda lib, a, b: lib.distributions.Kumaraswamy(a, b),
                    (POSITIVE + 0.5, SCALE + 0.5), UNIT, 1e-10),
    "NegativeBinomial": (lambda lib, n, p: lib.distributions.NegativeBinomial(n, probs=p),
                         (POSITIVE * 3, UNIT), COUNTS, 1e-10),
    "NegativeBinomial-logits": (
        lambda lib, n, z: lib.distributions.NegativeBinomial(n, logits=z), (POSITIVE * 3, LOC),
        COUNTS, 1e-10),
    # PyTorch computes log I0 with a polynomial approximation (to about 1e-7).
    "VonMises": (lambda lib, a, b: lib.distributions.VonMises(a, b), (LOC, SCALE),
                 LOC[::-1].copy(), 1e-6),
    "RelaxedBernoulli": (
        lambda lib, p: lib.distributions.RelaxedBernoulli(lib.tensor(0.7, dtype=lib.float64),
                                                          probs=p),
        (UNIT,), UNIT[::-1].copy(), 1e-10),
    "FisherSnedecor": (lambda lib, a, b: lib.distributions.FisherSnedecor(a, b),
                       (POSITIVE + 1.0, POSITIVE + 8.0), POSITIVE, 1e-10),
    "LogisticNormal": (lambda lib, a, b: lib.distributions.LogisticNormal(a, b), (LOC, SCALE),
                       np.array([0.1, 0.2, 0.3, 0.25, 0.15]), 1e-10),
    "ContinuousBernoulli": (lambda lib, p: lib.distributions.ContinuousBernoulli(probs=p),
                            (UNIT,), UNIT[::-1].copy(), 1e-10),
    # probs around 1/2, where PyTorch switches to its Taylor expansions
    "ContinuousBernoulli-half": (
        lambda lib, p: lib.distributions.ContinuousBernoulli(probs=p),
        (np.array([0.1, 0.4995, 0.7, 0.5]),), np.array([0.3, 0.5, 0.9, 0.1]), 1e-10),
    "ContinuousBernoulli-logits": (
        lambda lib, z: lib.distributions.ContinuousBernoulli(logits=z), (LOC,), UNIT, 1e-10),
    "LogitRelaxedBernoulli": (  # torch.distributions.relaxed_bernoulli's
        lambda lib, z: getattr(lib.distributions, "derived", None).LogitRelaxedBernoulli(
            lib.tensor(0.7, dtype=lib.float64), logits=z) if lib is pargraph else
        lib.distributions.relaxed_bernoulli.LogitRelaxedBernoulli(
            lib.tensor(0.7, dtype=lib.float64), logits=z), (LOC,), LOC[::-1].copy(), 1e-10),
}


def _scores(lib, make, parameters, value):
    params = [lib.tensor(p, requires_grad=True) for p in parameters]
    d = make(lib, *params)
    out = {"log_prob": d.log_prob(lib.tensor(value))}
    for what in ("mean", "variance", "mode", "entropy", "cdf"):
        try:
            out[what] = d.cdf(lib.tensor(value)) if what == "cdf" else (
                d.entropy() if what == "entropy" else getattr(d, what))
        except (NotImplementedError, AttributeError):
            continue
    # (cdf's gradient in a gamma's concentration is not implemented, in PyTorch either)
    finite = [(v * (k + 1)).sum() for k, (what, v) in enumerate(out.items())
              if what != "cdf" and v.requires_grad and bool(v.isfinite().all())]
    grads = lib.autograd.grad(sum(finite), params, allow_unused=True) if finite else ()
    return ({k: v.detach().numpy() for k, v in out.items()},
            [None if g is None else g.numpy() for g in grads])


@pytest.mark.parametrize("name", list(CASES))
def test_scores_moments_and_gradients_as_pytorchs(name):
    make, parameters, value, rtol = CASES[name]
    (ours, our_grads), (theirs, their_grads) = (_scores(lib, make, parameters, value)
                                                for lib in (pargraph, torch))
    assert ours.keys() == theirs.keys()
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=1e-12, err_msg=key)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=max(rtol, 1e-8), atol=1e-12)


@pytest.mark.parametrize("name", ["Weibull", "Pareto", "InverseGamma", "Kumaraswamy",
                                  "NegativeBinomial", "VonMises", "RelaxedBernoulli",
                                  "FisherSnedecor", "ContinuousBernoulli"])
def test_samples_have_the_moments(name):
    make, parameters, _, _ = CASES[name]
    pargraph.manual_seed(0)
    d = make(pargraph, *[pargraph.tensor(p) for p in parameters])
    draws = d.sample((40000,)).numpy()
    assert draws.shape == (40000, 4)
    if name == "RelaxedBernoulli":  # no mean; above 1/2 exactly as often as probs says
        assert np.all((draws > 0) & (draws < 1))
        np.testing.assert_allclose((draws > 0.5).mean(0), parameters[0], atol=0.02)
        return
    if name == "VonMises":  # a circular mean: the angle of the mean direction
        assert np.all((draws >= -np.pi) & (draws < np.pi))
        found = np.angle(np.exp(1j * draws).mean(0))
        np.testing.assert_allclose(found, d.mean.numpy(), atol=0.05)
        return
    np.testing.assert_allclose(draws.mean(0), d.mean.numpy(), rtol=0.05, atol=0.01)


def test_reparameterized_samples_carry_gradients():
    for make in (lambda p: pargraph.distributions.Weibull(p, p + 1),
                 lambda p: pargraph.distributions.Kumaraswamy(p + 1, p + 1),
                 lambda p: pargraph.distributions.InverseGamma(p + 2, p),
                 lambda p: pargraph.distributions.RelaxedBernoulli(pargraph.tensor(0.5),
                                                                   probs=p / 2),
                 lambda p: pargraph.distributions.RelaxedOneHotCategorical(
                     pargraph.tensor(0.5), probs=p.softmax(-1))):
        p = pargraph.tensor([0.5, 1.0], requires_grad=True)
        d = make(p)
        assert d.has_rsample
        (g,) = pargraph.autograd.grad(d.rsample((3,)).sum(), [p])
        assert np.all(np.isfinite(g.numpy())) and np.any(g.numpy() != 0)


def test_relaxed_one_hot_categorical_and_straight_through_as_pytorchs():
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    value = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])

    def scores(lib):
        p = lib.tensor(probs, requires_grad=True)
        d = lib.distributions.RelaxedOneHotCategorical(lib.tensor(0.6, dtype=lib.float64),
                                                       probs=p)
        log_prob = d.log_prob(lib.tensor(value))
        (g,) = lib.autograd.grad(log_prob.sum(), [p])
        st = lib.distributions.OneHotCategoricalStraightThrough(probs=p)
        draw = st.rsample()
        (g_st,) = lib.autograd.grad((draw * lib.tensor([1.0, 2.0, 3.0],
                                                       dtype=lib.float64)).sum(), [p])
        return log_prob.detach().numpy(), g.numpy(), g_st.numpy(), draw.detach().sum(-1).numpy()

    for a, b in zip(scores(pargraph), scores(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    pargraph.manual_seed(0)
    d = pargraph.distributions.RelaxedOneHotCategorical(pargraph.tensor(0.3),
                                                        probs=pargraph.tensor(probs[0]))
    draws = d.sample((2000,)).numpy()
    np.testing.assert_allclose(draws.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.bincount(draws.argmax(-1), minlength=3) / 2000, probs[0],
                               atol=0.04)


@pytest.mark.parametrize("event", [False, True])
def test_mixture_same_family_as_pytorchs(event):
    def scores(lib):
        logits = lib.tensor(np.array([[0.2, -0.4, 1.0], [0.0, 0.3, -0.1]]), requires_grad=True)
        loc = lib.tensor(RNG_FIXED[:, :, :2] if event else RNG_FIXED[:, :, 0],
                         requires_grad=True)
        component = lib.distributions.Normal(loc, 0.5 + loc.detach().abs())
        if event:
            component = lib.distributions.Independent(component, 1)
        d = lib.distributions.MixtureSameFamily(lib.distributions.Categorical(logits=logits),
                                                component)
        x = lib.tensor(X_FIXED if event else X_FIXED[..., 0])
        out = [d.log_prob(x), d.mean, d.variance]
        if not event:
            out.append(d.cdf(x))
        grads = lib.autograd.grad(sum(o.sum() for o in out), [logits, loc])
        return [o.detach().numpy() for o in out] + [g.numpy() for g in grads], \
            tuple(d.batch_shape), tuple(d.event_shape)

    ours, theirs = scores(pargraph), scores(torch)
    assert ours[1:] == theirs[1:]
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    pargraph.manual_seed(0)
    mix = pargraph.distributions.MixtureSameFamily(
        pargraph.distributions.Categorical(probs=pargraph.tensor([0.25, 0.75])),
        pargraph.distributions.Normal(pargraph.tensor([-4.0, 4.0]), pargraph.tensor(0.1)))
    draws = mix.sample((4000,)).numpy()
    assert draws.shape == (4000,)
    np.testing.assert_allclose((draws > 0).mean(), 0.75, atol=0.03)
    with pytest.raises(ValueError, match="does not equal"):
        pargraph.distributions.MixtureSameFamily(
            pargraph.distributions.Categorical(probs=pargraph.tensor([0.5, 0.5])),
            pargraph.distributions.Normal(pargraph.zeros(3), 1.0))


RNG_FIXED = np.random.default_rng(3).standard_normal((2, 3, 2))
X_FIXED = np.random.default_rng(4).standard_normal((5, 2, 2))


@pytest.mark.parametrize("name", ["StickBreakingTransform", "SoftmaxTransform",
                                  "LowerCholeskyTransform", "IndependentTransform"])
def test_vector_transforms_as_pytorchs(name):
    x = np.random.default_rng(5).standard_normal((3, 4) if name != "LowerCholeskyTransform"
                                                 else (2, 3, 3))

    def run(lib):
        t = getattr(lib.distributions.transforms, name)
        t = t(lib.distributions.transforms.ExpTransform(), 1) \
            if name == "IndependentTransform" else t()
        xt = lib.tensor(x, requires_grad=True)
        y = t(xt)
        out = [y, t.inv(y)]
        if name in ("StickBreakingTransform", "IndependentTransform"):
            out.append(t.log_abs_det_jacobian(xt, y))
        (g,) = lib.autograd.grad(sum((o * (k + 1)).sum() for k, o in enumerate(out)), [xt])
        return [o.detach().numpy() for o in out] + [g.numpy()], t.event_dim

    (ours, our_dim), (theirs, their_dim) = run(pargraph), run(torch)
    assert our_dim == their_dim
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_a_dirichlet_shaped_flow_through_stick_breaking_as_pytorchs():
    def run(lib):
        base = lib.distributions.Normal(lib.zeros(3, dtype=lib.float64),
                                        lib.ones(3, dtype=lib.float64))
        d = lib.distributions.TransformedDistribution(
            lib.distributions.Independent(base, 1),
            [lib.distributions.transforms.StickBreakingTransform()])
        value = lib.tensor([0.1, 0.2, 0.3, 0.4], dtype=lib.float64)
        return tuple(d.event_shape), d.log_prob(value).item()

    ours, theirs = run(pargraph), run(torch)
    assert ours[0] == theirs[0] == (4,)
    assert ours[1] == pytest.approx(theirs[1], rel=1e-10)


def test_a_cached_tanh_transform_inverts_its_own_samples_exactly():
    """``TanhTransform(cache_size=1)``: the log-probability of a squashed sample uses the
    sample's own pre-image (``atanh`` of a value near 1 loses it), as PyTorch's."""
    base = pargraph.distributions.Normal(pargraph.tensor([0.0, 20.0]), pargraph.tensor(0.1))
    cached = pargraph.distributions.TransformedDistribution(
        base, [pargraph.distributions.transforms.TanhTransform(cache_size=1)])
    plain = pargraph.distributions.TransformedDistribution(
        base, [pargraph.distributions.transforms.TanhTransform()])
    pargraph.manual_seed(0)
    action = cached.rsample()
    x = action.detach().atanh()  # what the plain one recovers: tanh(20) is 1 in float32
    assert not np.isfinite(x.numpy()[1])
    assert np.all(np.isfinite(cached.log_prob(action).detach().numpy()))
    assert not np.all(np.isfinite(plain.log_prob(action).detach().numpy()))
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        pargraph.distributions.transforms.TanhTransform(cache_size=2)


def test_logistic_normal_samples_lie_on_the_simplex_and_carry_gradients():
    loc = pargraph.tensor(LOC, requires_grad=True)
    d = pargraph.distributions.LogisticNormal(loc, pargraph.tensor(SCALE))
    draws = d.rsample((2000,))
    values = draws.detach().numpy()
    assert values.shape == (2000, 5) and np.all(values > 0)
    np.testing.assert_allclose(values.sum(-1), 1.0, rtol=1e-12)
    draws[:, 0].mean().backward()
    assert loc.grad is not None and float(loc.grad[0]) > 0  # more mass to the first stick
    assert tuple(pargraph.distributions.LogisticNormal(0.0, 1.0).event_shape) == (2,)


def test_a_cdf_follows_the_sign_of_composed_transforms_and_refuses_a_non_monotonic_one():
    found = []
    for lib in (pargraph, torch):
        D, T = lib.distributions, lib.distributions.transforms
        base = D.Normal(lib.tensor(LOC, dtype=lib.float64), lib.tensor(SCALE, dtype=lib.float64))
        flipped = D.TransformedDistribution(base, T.ComposeTransform(
            [T.AffineTransform(0.0, -2.0), T.ExpTransform()]))
        found.append(flipped.cdf(lib.tensor(POSITIVE, dtype=lib.float64)).numpy())
        with pytest.raises(NotImplementedError):
            D.LogisticNormal(lib.zeros(2), lib.ones(2)).cdf(lib.tensor([0.2, 0.3, 0.5]))
    np.testing.assert_allclose(found[0], found[1], rtol=1e-12)
