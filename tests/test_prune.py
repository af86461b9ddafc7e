"""``nn.utils.prune`` against PyTorch: masks, state dicts, combined pruning, global pruning,
training through the mask, removal, and PyTorch's errors."""

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
pytest.importorskip("torch.nn.utils.prune")  # PyTorch loads it only when asked

WEIGHT = np.random.default_rng(0).permutation(np.arange(1, 25) * 0.1 - 1.25).reshape(4, 6)


def _layer(lib):
    layer = lib.nn.Linear(6, 4).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(WEIGHT))
        layer.bias.copy_(lib.tensor(np.linspace(-1, 1, 4)))
    return layer


STEPS = {
    "l1 fraction": lambda p, m: p.l1_unstructured(m, "weight", amount=0.3),
    "l1 count, then again": lambda p, m: p.l1_unstructured(
        p.l1_unstructured(m, "weight", amount=5), "weight", amount=0.25),
    "ln structured rows": lambda p, m: p.ln_structured(m, "weight", amount=0.5, n=2, dim=0),
    "ln structured columns, then l1": lambda p, m: p.l1_unstructured(
        p.ln_structured(m, "weight", amount=2, n=1, dim=1), "weight", amount=3),
    "l1, then ln structured": lambda p, m: p.ln_structured(
        p.l1_unstructured(m, "weight", amount=6), "weight", amount=1, n=float("inf"), dim=0),
    "custom mask on the bias": lambda p, m: p.custom_from_mask(
        m, "bias", mask=m.bias.new_tensor([1.0, 0.0, 1.0, 0.0])),
    "identity": lambda p, m: p.identity(m, "weight"),
}


@pytest.mark.parametrize("name", list(STEPS))
def test_pruning_masks_and_training_as_pytorchs(name):
    results = []
    for lib in (pargraph, torch):
        layer = _layer(lib)
        STEPS[name](lib.nn.utils.prune, layer)
        keys = list(layer.state_dict())
        mask = [v.detach().numpy() for k, v in layer.state_dict().items() if k.endswith("_mask")]
        opt = lib.optim.SGD(layer.parameters(), lr=0.1)
        x = lib.tensor(np.linspace(-1, 1, 18).reshape(3, 6))
        for _ in range(3):
            opt.zero_grad()
            (layer(x) ** 2).sum().backward()
            opt.step()
        pruned = layer(x).detach().numpy()
        assert lib.nn.utils.prune.is_pruned(layer)
        results.append((keys, mask, pruned, sorted(n for n, _ in layer.named_parameters())))
    ours, theirs = results
    assert ours[0] == theirs[0] and ours[3] == theirs[3]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)


def test_remove_makes_the_pruned_tensor_the_parameter_again():
    for lib in (pargraph, torch):
        prune = lib.nn.utils.prune
        layer = prune.l1_unstructured(_layer(lib), "weight", amount=0.5)
        prune.remove(layer, "weight")
        assert sorted(layer.state_dict()) == ["bias", "weight"]
        assert not prune.is_pruned(layer)
        assert int((layer.weight == 0).sum()) == 12
        assert isinstance(layer.weight, lib.nn.Parameter)
        with pytest.raises(ValueError, match="Parameter 'weight' of module .* has to be pruned "
                                             "before pruning can be removed"):
            prune.remove(layer, "weight")


def test_global_and_random_pruning_count_what_pytorchs_do():
    for lib in (pargraph, torch):
        prune = lib.nn.utils.prune
        a, b = _layer(lib), _layer(lib)
        with lib.no_grad():
            b.weight.mul_(3)
        prune.global_unstructured([(a, "weight"), (b, "weight")],
                                  pruning_method=prune.L1Unstructured, amount=0.5)
        assert int((a.weight == 0).sum()) == 18 and int((b.weight == 0).sum()) == 6
        c = prune.random_unstructured(_layer(lib), "weight", amount=7)
        assert int((c.weight == 0).sum()) == 7
        d = prune.random_structured(_layer(lib), "weight", amount=0.5, dim=1)
        assert int((d.weight.abs().sum(0) == 0).sum()) == 3


@pytest.mark.parametrize("call,error,message", [
    (lambda p, m: p.l1_unstructured(m, "weight", amount=1.5), ValueError,
     r"amount=1.5 should either be a float in the range \[0, 1\] or a non-negative integer"),
    (lambda p, m: p.l1_unstructured(m, "weight", amount=50), ValueError,
     "amount=50 should be smaller than the number of parameters to prune=24"),
    (lambda p, m: p.l1_unstructured(m, "weight", amount="half"), TypeError,
     "Invalid type for amount: half. Must be int or float."),
    (lambda p, m: p.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError,
     "Structured pruning can only be applied to multidimensional tensors"),
    (lambda p, m: p.ln_structured(m, "weight", amount=1, n=2, dim=3), IndexError,
     "Invalid index 3 for tensor of size"),
    (lambda p, m: p.global_unstructured([(m, "weight")], p.LnStructured, amount=1, n=2,
                                        dim=0), TypeError,
     'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`'),
])
def test_errors_are_pytorchs(call, error, message):
    for lib in (pargraph, torch):
        with pytest.raises(error, match=message):
            call(lib.nn.utils.prune, _layer(lib))


def test_a_pruned_model_trains_in_a_compiled_step_as_eagerly():
    runs = []
    for compiled in (False, True):
        pargraph.manual_seed(0)
        model = pargraph.nn.Sequential(pargraph.nn.Linear(6, 8), pargraph.nn.ReLU(),
                                       pargraph.nn.Linear(8, 1))
        pargraph.nn.utils.prune.l1_unstructured(model[0], "weight", amount=0.5)
        opt = pargraph.optim.SGD(model.parameters(), lr=0.05)
        x, y = pargraph.randn(16, 6), pargraph.randn(16, 1)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = pargraph.compile(step) if compiled else step
        losses = [run(x, y).item() for _ in range(6)]
        zeros = int((model[0].weight == 0).sum())
        runs.append((losses, zeros))
    assert runs[0] == runs[1] and runs[0][1] >= 24  # the pruned entries stay zero
