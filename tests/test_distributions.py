"""pargraph.distributions against torch.distributions (float64): densities, entropies,
moments, KL divergences, errors; gradients through log_prob and rsample against finite
differences; samples against their moments."""

import numpy as np
import pytest

import pargraph
from pargraph import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(0)
LOC, SCALE = RNG.standard_normal((2, 3)), RNG.uniform(0.5, 2.0, (2, 3))
PROBS = RNG.uniform(0.05, 0.95, (2, 3))
WEIGHTS = RNG.uniform(0.1, 1.0, (2, 4))
A = RNG.standard_normal((2, 3, 3))
COV = A @ np.swapaxes(A, -1, -2) + 3 * np.eye(3)


def both(make):
    """The distribution ``make(lib, module)`` builds, in pargraph and in PyTorch."""
    return make(pargraph, D), make(torch, TD)


def t(lib, array, **kwargs):
    return lib.tensor(np.ascontiguousarray(array), **kwargs)


CASES = {
    "normal": (lambda lib, d: d.Normal(t(lib, LOC), t(lib, SCALE)), RNG.standard_normal((2, 3))),
    "uniform": (lambda lib, d: d.Uniform(t(lib, LOC - 1), t(lib, LOC + 2)), LOC + 0.5),
    "bernoulli_probs": (lambda lib, d: d.Bernoulli(probs=t(lib, PROBS)),
                        (PROBS > 0.5).astype(float)),
    "bernoulli_logits": (lambda lib, d: d.Bernoulli(logits=t(lib, LOC)),
                         (LOC > 0).astype(float)),
    "categorical_probs": (lambda lib, d: d.Categorical(probs=t(lib, WEIGHTS)),
                          np.array([3, 1])),
    "categorical_logits": (lambda lib, d: d.Categorical(logits=t(lib, LOC)), np.array([0, 2])),
    "mvn_covariance": (lambda lib, d: d.MultivariateNormal(t(lib, LOC), t(lib, COV)), LOC * 2),
    "mvn_scale_tril": (lambda lib, d: d.MultivariateNormal(
        t(lib, LOC[0]), scale_tril=t(lib, np.linalg.cholesky(COV))), LOC),
    "mvn_precision": (lambda lib, d: d.MultivariateNormal(
        t(lib, LOC), precision_matrix=t(lib, np.linalg.inv(COV))), -LOC),
    "independent_normal": (lambda lib, d: d.Independent(
        d.Normal(t(lib, LOC), t(lib, SCALE)), 1), LOC * 0.5),
}


@pytest.mark.parametrize("name", CASES)
def test_densities_entropies_and_moments_are_pytorchs(name):
    make, value = CASES[name]
    ours, theirs = both(make)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    np.testing.assert_allclose(ours.log_prob(t(pargraph, value)).numpy(),
                               theirs.log_prob(t(torch, value)).numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours.entropy().numpy(), theirs.entropy().numpy(), rtol=1e-10)
    for moment in ("mean", "variance", "stddev"):
        np.testing.assert_allclose(getattr(ours, moment).numpy(),
                                   getattr(theirs, moment).numpy(), rtol=1e-10)
    shape = tuple(ours.sample((5,)).shape)
    assert shape == tuple(theirs.sample((5,)).shape)
    if theirs.has_rsample:
        assert ours.has_rsample and tuple(ours.rsample((2, 1)).shape) == \
            tuple(theirs.rsample((2, 1)).shape)
    if name.startswith(("normal", "uniform")):
        np.testing.assert_allclose(ours.cdf(t(pargraph, value)).numpy(),
                                   theirs.cdf(t(torch, value)).numpy(), rtol=1e-10)


@pytest.mark.parametrize("pair", [
    ("normal", lambda lib, d: d.Normal(t(lib, LOC * 0.3), t(lib, SCALE[::-1]))),
    ("uniform", lambda lib, d: d.Uniform(t(lib, LOC - 2), t(lib, LOC + 3))),
    ("bernoulli_probs", lambda lib, d: d.Bernoulli(probs=t(lib, PROBS[::-1]))),
    ("categorical_probs", lambda lib, d: d.Categorical(logits=t(lib, WEIGHTS * 3))),
    ("mvn_covariance", lambda lib, d: d.MultivariateNormal(t(lib, -LOC), t(lib, COV[::-1]))),
    ("independent_normal", lambda lib, d: d.Independent(
        d.Normal(t(lib, LOC * 2), t(lib, SCALE + 1)), 1)),
], ids=lambda pair: pair[0] if isinstance(pair, tuple) else None)
def test_kl_divergences_are_pytorchs(pair):
    name, other = pair
    p_ours, p_theirs = both(CASES[name][0])
    q_ours, q_theirs = both(other)
    np.testing.assert_allclose(D.kl_divergence(p_ours, q_ours).numpy(),
                               TD.kl_divergence(p_theirs, q_theirs).numpy(), rtol=1e-9)
    np.testing.assert_allclose(D.kl_divergence(p_ours, p_ours).numpy(), 0.0, atol=1e-9)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(p_ours, D.Normal(0.0, 1.0) if "normal" not in name
                        else D.Bernoulli(probs=0.5))


def test_log_prob_and_rsample_gradients_match_finite_differences():
    loc, scale = (pargraph.tensor(a, requires_grad=True) for a in (LOC, SCALE))
    value = pargraph.tensor(LOC * 0.7)
    assert pargraph.autograd.gradcheck(
        lambda m, s: D.Normal(m, s).log_prob(value), (loc, scale))

    def reparameterized(m, s):  # one noise draw: rsample is a function of the parameters
        pargraph.manual_seed(3)
        return D.Normal(m, s).rsample((4,))

    assert pargraph.autograd.gradcheck(reparameterized, (loc, scale))
    cov = pargraph.tensor(A[0], requires_grad=True)
    mean = pargraph.tensor(LOC[0], requires_grad=True)
    assert pargraph.autograd.gradcheck(
        lambda m, a: D.MultivariateNormal(m, a @ a.mT + 3 * pargraph.eye(3, dtype=a.dtype))
        .log_prob(value[0]), (mean, cov))
    logits = pargraph.tensor(LOC, requires_grad=True)
    assert pargraph.autograd.gradcheck(
        lambda z: D.Categorical(logits=z).entropy() + D.Categorical(logits=z).log_prob(
            pargraph.tensor([1, 2])), (logits,))


def test_samples_have_the_distributions_moments():
    pargraph.manual_seed(0)
    n = 40000
    for dist in (D.Normal(pargraph.tensor(LOC), pargraph.tensor(SCALE)),
                 D.Uniform(pargraph.tensor(LOC), pargraph.tensor(LOC + 2)),
                 D.Bernoulli(probs=pargraph.tensor(PROBS)),
                 D.MultivariateNormal(pargraph.tensor(LOC), pargraph.tensor(COV))):
        draws = dist.sample((n,)).numpy()
        np.testing.assert_allclose(draws.mean(0), dist.mean.numpy(),
                                   atol=5 * np.sqrt(dist.variance.numpy().max() / n))
        np.testing.assert_allclose(draws.var(0), dist.variance.numpy(), rtol=0.05)
    counts = np.bincount(D.Categorical(probs=pargraph.tensor([1.0, 2.0, 5.0])).sample(
        (n,)).numpy(), minlength=3) / n
    np.testing.assert_allclose(counts, [0.125, 0.25, 0.625], atol=0.01)


@pytest.mark.parametrize("make", [
    lambda lib, d: d.Normal(0.0, -1.0),
    lambda lib, d: d.Normal(lib.zeros(3), lib.tensor([1.0, -1.0, 2.0])),
    lambda lib, d: d.Uniform(1.0, 0.0),
    lambda lib, d: d.Uniform(0.0, 1.0).log_prob(lib.tensor(2.0)),
    lambda lib, d: d.Bernoulli(probs=1.5),
    lambda lib, d: d.Bernoulli(probs=0.5, logits=0.0),
    lambda lib, d: d.Bernoulli(0.5).log_prob(lib.tensor(0.5)),
    lambda lib, d: d.Categorical(probs=lib.tensor([0.5, -0.1])),
    lambda lib, d: d.Categorical(lib.tensor([1.0, 1.0])).log_prob(lib.tensor(2)),
    lambda lib, d: d.Normal(0.0, 1.0).log_prob(lib.tensor(float("nan"))),
    lambda lib, d: d.MultivariateNormal(lib.zeros(2)),
])
def test_invalid_arguments_and_values_raise_pytorchs_errors(make):
    def error_of(lib, module):
        try:
            make(lib, module)
        except Exception as error:  # noqa: BLE001 - compared below
            return type(error).__name__, str(error).replace("torch.Size", "pargraph.Size")
        return None

    assert error_of(pargraph, D) == error_of(torch, TD) is not None


def test_a_computed_parameter_is_checked_where_it_is_computed():
    scale = pargraph.tensor([1.0, -1.0], requires_grad=True) * 1.0  # not computed yet
    log_prob = D.Normal(0.0, scale).log_prob(pargraph.tensor(0.0))
    with pytest.raises(ValueError, match="to satisfy the constraint GreaterThan"):
        log_prob.detach().numpy()
    quiet = D.Normal(0.0, scale, validate_args=False).log_prob(pargraph.tensor(0.0))
    assert np.isnan(quiet.detach().numpy()[1])


def test_reinforce_step_gradients_are_pytorchs():
    """A policy gradient step as REINFORCE programs write it."""
    weights = RNG.standard_normal((4, 3))
    states, actions = RNG.standard_normal((5, 4)), np.array([0, 2, 1, 1, 0])
    returns = RNG.standard_normal(5)
    grads = []
    for lib, module in ((pargraph, D), (torch, TD)):
        w = lib.tensor(weights, requires_grad=True)
        policy = module.Categorical(logits=lib.tensor(states) @ w)
        loss = -(policy.log_prob(lib.tensor(actions)) * lib.tensor(returns)).sum() \
            - 0.01 * policy.entropy().sum()
        loss.backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


def test_distributions_is_an_attribute_after_import_pargraph_as_torchs_is():
    """``torch.distributions.Categorical(...)`` after a plain ``import torch`` (RL programs):
    in a fresh process, where no test imported the subpackage first."""
    import subprocess
    import sys

    code = ("import pargraph as torch\n"
            "d = torch.distributions.Categorical(logits=torch.zeros(3))\n"
            "print(d.log_prob(torch.tensor(1)).item(), torch.utils.data.DataLoader.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [repr(float(-np.log(np.float32(3)))), "DataLoader"]
