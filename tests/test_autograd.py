"""Autograd behaves as PyTorch's does: leaves, .grad accumulation, freeing, grad modes, grad()."""

import inspect
import threading

import numpy as np
import pytest

import pargraph


def test_requires_grad_propagates_and_leaves_are_leaves():
    w = pargraph.ones(3, requires_grad=True)
    x = pargraph.ones(3)
    y = w * x
    assert w.is_leaf and x.is_leaf and not y.is_leaf
    assert y.requires_grad and not (x * 2).requires_grad
    assert w.grad_fn is None and y.grad_fn.name() == "MulBackward0"
    assert (y + 1).grad_fn.name() == "AddBackward0"
    assert (x ** 2).grad_fn is None


def test_grad_fn_next_functions_reach_the_leaves():
    w = pargraph.ones(3, requires_grad=True)
    y = (w * 2).sum()
    (mul_fn, _), = y.grad_fn.next_functions
    assert mul_fn.name() == "MulBackward0"
    (leaf_fn, _), = mul_fn.next_functions
    assert leaf_fn.name() == "torch::autograd::AccumulateGrad" and leaf_fn.variable is w
    x = pargraph.ones(3)
    assert (w * x).grad_fn.next_functions[1][0] is None


def test_grad_accumulates_across_backward_calls_and_zero_resets():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    grad = x.grad
    x.grad.zero_()
    assert grad.tolist() == [0.0, 0.0]


def test_grad_accumulates_into_the_same_tensor_object():
    x = pargraph.tensor([1.0], requires_grad=True)
    (x * 2).sum().backward()
    first = x.grad
    (x * 2).sum().backward()
    assert x.grad is first and first.tolist() == [4.0]


def test_unused_leaf_keeps_grad_none():
    a = pargraph.ones(2, requires_grad=True)
    b = pargraph.ones(2, requires_grad=True)
    (a * 2).sum().backward()
    assert b.grad is None and a.grad is not None


def test_non_leaf_has_no_grad_unless_retained():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    k = x * 4
    k.retain_grad()
    (h * k).sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):  # PyTorch's warning
        assert h.grad is None
    assert k.retains_grad and k.grad.tolist() == [3.0, 6.0]


def test_fan_in_sums_gradient_contributions():
    x = pargraph.tensor(2.0, requires_grad=True)
    y = x * x + x.exp() + 3 * x  # x feeds three consumers
    y.backward()
    assert x.grad.item() == pytest.approx(4 + np.exp(2) + 3)


def test_second_backward_raises_and_mentions_retain_graph():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()


def test_retain_graph_allows_a_second_backward():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)


def test_graph_values_are_freed_after_backward():
    x = pargraph.randn(100, requires_grad=True)
    hidden = [x.tanh()]
    for _ in range(3):
        hidden.append(hidden[-1].sin() * 2)
    loss = hidden[-1].sum()
    loss.item()  # realize the forward first: intermediates are saved for backward
    intermediate_nodes = [h._node for h in hidden]
    del hidden
    assert all(n.value is not None for n in intermediate_nodes)
    loss.backward()
    assert all(n.freed for n in intermediate_nodes)  # at once: a second backward would raise
    x.grad.numpy()  # the deferred backward runs; then the saved values are dropped
    assert all(n.value is None for n in intermediate_nodes)
    assert loss.item() == pytest.approx(loss.item())  # the loss itself is still readable


def test_backward_on_non_scalar_needs_gradient():
    x = pargraph.ones(3, requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        y.backward()
    y.backward(pargraph.tensor([1.0, 0.0, 2.0]))
    assert x.grad.tolist() == [2.0, 0.0, 4.0]


def test_backward_gradient_shape_mismatch():
    y = pargraph.ones(3, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape"):
        y.backward(pargraph.ones(2))


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        (pargraph.ones(2) * 2).sum().backward()


def test_detach_shares_value_and_leaves_graph():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d.tolist() == [2.0, 4.0]
    realized = pargraph.tensor([5.0])
    assert realized.detach().numpy() is realized.numpy()  # same array, no copy
    (d * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]  # nothing flowed through d


def test_python_control_flow_on_item():
    x = pargraph.tensor(3.0, requires_grad=True)
    y = x * 2
    while y.item() < 100:
        y = y * 2
    y.backward()
    assert y.item() == 192.0 and x.grad.item() == 64.0


def test_create_graph_gives_differentiable_gradients():
    x = pargraph.tensor(2.0, requires_grad=True)
    y = x ** 3
    y.backward(create_graph=True)
    assert x.grad.item() == 12.0 and x.grad.requires_grad
    (g2,) = pargraph.autograd.grad(x.grad, x)
    assert g2.item() == 12.0


def test_autograd_grad_leaves_dot_grad_untouched():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    (gx, gh) = pargraph.autograd.grad(h.sum() * 2, [x, h])
    assert gx.tolist() == [4.0, 8.0] and gh.tolist() == [2.0, 2.0]
    assert x.grad is None


def test_autograd_grad_unused_inputs():
    x = pargraph.ones(2, requires_grad=True)
    z = pargraph.ones(2, requires_grad=True)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        pargraph.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = pargraph.autograd.grad(y, [x, z], allow_unused=True)
    assert gz is None and gx.tolist() == [2.0, 2.0]


def test_autograd_grad_with_grad_outputs():
    x = pargraph.ones(3, requires_grad=True)
    (g,) = pargraph.autograd.grad(x * 5, x, grad_outputs=pargraph.tensor([1.0, 2.0, 3.0]))
    assert g.tolist() == [5.0, 10.0, 15.0]


def test_no_grad_and_friends():
    w = pargraph.ones(2, requires_grad=True)
    with pargraph.no_grad():
        assert not (w * 2).requires_grad and not pargraph.is_grad_enabled()
        with pargraph.enable_grad():
            assert (w * 2).requires_grad
    assert pargraph.is_grad_enabled()
    with pargraph.inference_mode():
        assert not (w * 2).requires_grad
    with pargraph.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert pargraph.is_grad_enabled()
    pargraph.set_grad_enabled(False)
    assert not pargraph.is_grad_enabled()
    pargraph.set_grad_enabled(True)
    assert pargraph.is_grad_enabled()


def test_grad_modes_as_decorators():
    w = pargraph.ones(2, requires_grad=True)

    @pargraph.no_grad()
    def double(t):
        return t * 2

    @pargraph.no_grad
    def triple(t):
        return t * 3

    @pargraph.inference_mode()
    def quadruple(t):
        return t * 4

    @pargraph.set_grad_enabled(False)
    def quintuple(t):
        return t * 5

    assert pargraph.is_grad_enabled()
    for fn in (double, triple, quadruple, quintuple):
        assert not fn(w).requires_grad
    assert (w * 2).requires_grad


def test_requires_grad_is_refused_on_integer_tensors():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        pargraph.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        pargraph.arange(3).requires_grad_()


def test_requires_grad_can_only_change_on_leaves():
    y = pargraph.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)


def test_in_place_on_leaf_requiring_grad_is_refused_unless_no_grad():
    w = pargraph.ones(2, requires_grad=True)
    for method, arg in (("add_", 1.0), ("sub_", 1.0), ("mul_", 2.0), ("copy_", [3.0, 4.0])):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            getattr(w, method)(arg)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.zero_()
    with pargraph.no_grad():
        w.sub_(pargraph.tensor([0.5, 1.0]), alpha=2)
    assert w.tolist() == [0.0, -1.0]
    assert w.is_leaf and w.requires_grad  # an updated parameter is still a parameter
    (w * w).sum().backward()
    assert w.grad.tolist() == [0.0, -2.0]


def test_in_place_ops_on_plain_tensors():
    x = pargraph.ones(3)
    assert x.add_(2).mul_(3).sub_(pargraph.tensor([1.0, 2.0, 3.0])).tolist() == [8.0, 7.0, 6.0]
    x.copy_(pargraph.tensor([9.0]))
    assert x.tolist() == [9.0, 9.0, 9.0]
    x.zero_()
    assert x.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.add_(pargraph.ones(2, 3))
    ints = pargraph.arange(3)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        ints.mul_(1.5)


def test_in_place_on_non_leaf_keeps_gradients_correct():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.mul_(3)  # h = 6x
    assert h.grad_fn.name() == "MulBackward0"
    h.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_a_saved_value_changed_in_place_fails_backward_like_pytorch():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.mul_(h)  # mul saved h, and the same op overwrote it
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*one of its inputs"):
        h.sum().backward()
    out = x.exp()  # exp's vjp uses its output
    out.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*its output"):
        out.sum().backward()


@pytest.mark.parametrize("change, fails", [
    (lambda t, h, v: h.mul_(v), False), (lambda t, h, v: h.clamp_(-1.0, 3.0), False),
    (lambda t, h, v: h.pow_(2), False), (lambda t, h, v: h.add_(h), False),
    (lambda t, h, v: h.sub_(v, alpha=2), False),
    (lambda t, h, v: t.nn.functional.silu(h, inplace=True), False),
    (lambda t, h, v: t.nn.functional.hardswish(h, inplace=True), False),
    (lambda t, h, v: h.mul_(h), True), (lambda t, h, v: h.div_(h), True),
    (lambda t, h, v: h.add_(h * v), True),
])
def test_an_in_place_op_may_use_the_value_it_replaces_as_pytorchs_do(change, fails):
    """PyTorch keeps the original for an in-place op's own backward (``a.mul_(v)``, a
    composite such as silu's), but not an operand that is the changed tensor itself
    (``h.mul_(h)``) or was computed from it before (``h.add_(h * v)``)."""
    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    grads = []
    for module in (pargraph, torch):
        x = module.tensor([0.5, -2.0], requires_grad=True)
        v = module.tensor([3.0, 4.0], requires_grad=True)
        h = x * 2
        change(module, h, v)
        if fails:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                h.sum().backward()
            continue
        h.sum().backward()
        grads.append((x.grad.numpy(), v.grad.numpy() if v.grad is not None else None))
    if not fails:
        (ours_x, ours_v), (theirs_x, theirs_v) = grads
        np.testing.assert_allclose(ours_x, theirs_x, rtol=1e-6)
        assert (ours_v is None) == (theirs_v is None)
        if ours_v is not None:
            np.testing.assert_allclose(ours_v, theirs_v, rtol=1e-6)


def test_steps_with_in_place_activations_replay_their_backward_and_keep_the_check():
    """A model with ``nn.ReLU(inplace=True)`` changes values in place every step: its backward
    graph is still made once and replayed (the check decides the same on the same
    structure), and a structure whose check fails raises at every step."""
    model = pargraph.nn.Sequential(pargraph.nn.Linear(8, 8), pargraph.nn.ReLU(inplace=True),
                                   pargraph.nn.Linear(8, 2), pargraph.nn.ReLU(inplace=True))
    x = pargraph.randn(4, 8)
    losses, grads = [], []
    with pargraph.trace() as tr:
        for _ in range(4):
            model.zero_grad()
            loss = model(x).sum()
            loss.backward()
            losses.append(loss.item())
            grads.append(model[0].weight.grad.numpy().copy())
    assert tr.summary(print_it=False).backward_hits >= 3
    plain = pargraph.nn.Sequential(model[0], pargraph.nn.ReLU(), model[2], pargraph.nn.ReLU())
    model.zero_grad()
    plain(x).sum().backward()
    np.testing.assert_array_equal(model[0].weight.grad.numpy(), grads[-1])
    for _ in range(3):
        h = pargraph.tensor([1.0, 2.0], requires_grad=True) * 2
        h.mul_(h)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            h.sum().backward()


def test_changing_a_weight_between_forward_and_backward_fails_like_pytorch():
    model = pargraph.nn.Linear(3, 2)
    loss = model(pargraph.ones(4, 3)).sum()
    with pargraph.no_grad():
        model.weight -= 0.1  # only the input's gradient needs the old weight: none asked
    loss.backward()
    x = pargraph.ones(4, 3, requires_grad=True)
    loss = model(x).sum()
    with pargraph.no_grad():
        model.weight -= 0.1
    with pytest.raises(RuntimeError, match=r"\[float32 \[2, 3\]\], one of its inputs"):
        loss.backward()
    unsaved = pargraph.ones(3, requires_grad=True)
    y = (unsaved + 1).sum()  # add saves nothing: changing its input is fine
    with pargraph.no_grad():
        unsaved.mul_(5)
    y.backward()
    assert unsaved.grad.tolist() == [1.0, 1.0, 1.0]


def test_gradcheck_reports_a_wrong_vjp():
    from pargraph import ops

    x = pargraph.randn(3, dtype=pargraph.float64, requires_grad=True)
    original = ops.sin.vjps
    ops.sin.defvjp(lambda g, out, x: ops.mul(g, ops.sin(x)))  # deliberately wrong
    try:
        with pytest.raises(pargraph.autograd.GradcheckError, match="Jacobian mismatch"):
            pargraph.autograd.gradcheck(lambda t: t.sin(), (x,))
        assert not pargraph.autograd.gradcheck(lambda t: t.sin(), (x,), raise_exception=False)
    finally:
        ops.sin.vjps = original


def test_gradcheck_needs_float64():
    with pytest.raises(ValueError, match="float64"):
        pargraph.autograd.gradcheck(lambda t: t * 2, (pargraph.ones(2, requires_grad=True),))


def test_backward_runs_with_the_next_realization(record_runs, unfused):
    w = pargraph.ones(3, requires_grad=True)
    opt = pargraph.optim.SGD([w], lr=0.5)
    loss = (w.exp() * w).sum()
    loss.backward()
    assert record_runs == [] and w.grad.shape == (3,)
    opt.step()  # forward, backward and the update: one dask graph
    assert len(record_runs) == 1
    keys = " ".join(record_runs[0])
    assert "exp-" in keys and "_backward-" in keys and "sgd_update-" in keys
    assert w.tolist() == pytest.approx([1 - 0.5 * 2 * np.e] * 3)
    assert loss.item() == pytest.approx(3 * np.e) and len(record_runs) == 1


def test_compute_without_arguments_runs_deferred_work():
    x = pargraph.ones(2, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad._node.value is None
    pargraph.compute()
    assert x.grad._node.value is not None and x.grad.tolist() == [3.0, 3.0]


def _failing_backward():
    """A backward() whose deferred run raises (the index is out of range); returns the line."""
    x = pargraph.ones(3, requires_grad=True)
    loss = x[pargraph.tensor([7])].sum()
    loss.backward(); return inspect.currentframe().f_lineno  # noqa: E702


def test_deferred_backward_work_belongs_to_the_thread_that_called_backward():
    outcome = {}

    def other_thread():
        outcome["item"] = (pargraph.ones(2) * 2).sum().item()

    line = _failing_backward()
    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert outcome["item"] == 4.0  # thread B's realization did not run (or fail on) A's work
    with pytest.raises(IndexError) as error:
        pargraph.compute()
    message = str(error.value)
    assert "index 7 is out of bounds" in message
    assert f'deferred by the backward() called at: File "{__file__}", line {line}' in message
    pargraph.compute()  # the failed work is gone: nothing left to raise


# --- backward graphs instantiated from a template (backprop.BackwardTemplate) ---------------

def _model_step(const):
    """A step with fan-in, broadcasting, an index tensor, a non-grad transposed constant
    (whose vjp reaches past the history region) and a cross entropy."""
    pargraph.manual_seed(3)
    w = pargraph.randn(4, 5, requires_grad=True)
    b = pargraph.zeros(5, requires_grad=True)
    x = pargraph.randn(6, 4)
    h = (x @ w + b).relu()
    logits = h @ const.T + h[pargraph.tensor([0, 2, 1, 1, 0, 3])] * 0.5
    loss = pargraph.nn.functional.cross_entropy(logits, pargraph.tensor([0, 1, 2, 0, 1, 2]))
    return loss, [w, b]


def _backward_graph(loss):
    from pargraph import ops
    from pargraph.autograd.backward_graph import gradients
    from pargraph.graph import toposort

    seed = ops.constant(np.ones((), dtype=np.float32))
    grads, _ = gradients([loss._node], [seed])
    nodes = toposort([g for _, g in grads])
    position = {id(n): k for k, n in enumerate(nodes)}
    return [(n.op.name, n.shape, n.dtype, n.attrs, n.phase, n.key_prefix(), n.scope,
             n.site, tuple(position.get(id(i), repr(i)) for i in n.inputs)) for n in nodes]


def test_a_cached_backward_graph_equals_a_generated_one():
    from pargraph.autograd.backward_graph import BackwardTemplate

    const = pargraph.randn(5, 5)
    BackwardTemplate.cache.clear()
    generated = _backward_graph(_model_step(const)[0])
    hits = BackwardTemplate.cache.hits
    instantiated = _backward_graph(_model_step(const)[0])
    assert BackwardTemplate.cache.hits == hits + 1
    assert instantiated == generated  # ops, attrs, names, scopes, source lines, wiring


def test_cached_backward_gives_the_gradients_of_fresh_generation():
    from pargraph.autograd.backward_graph import BackwardTemplate

    const = pargraph.randn(5, 5)
    results = []
    for clear in (True, False, False):
        if clear:
            BackwardTemplate.cache.clear()
        loss, params = _model_step(const)
        loss.backward()
        results.append([p.grad.numpy() for p in params])
    for later in results[1:]:
        for a, b in zip(results[0], later):
            np.testing.assert_array_equal(a, b)


def test_a_step_that_slices_reuses_its_backward_and_another_slice_does_not():
    from pargraph.autograd.backward_graph import BackwardTemplate

    x = pargraph.arange(12.0).reshape(6, 2)
    w = pargraph.ones(2, requires_grad=True)
    BackwardTemplate.cache.clear()
    for rows, hit in ((slice(0, 3), False), (slice(0, 3), True), (slice(3, 6), False)):
        hits = BackwardTemplate.cache.hits
        w.grad = None
        (x[rows] * w).sum().backward()  # an index with a slice: a DataParallel shard
        assert BackwardTemplate.cache.hits == hits + hit, rows
        np.testing.assert_array_equal(w.grad.numpy(), x.numpy()[rows].sum(0))


def test_a_different_scalar_is_a_different_backward_structure():
    w = pargraph.ones(3, requires_grad=True)
    for factor in (2.0, 3.0, 2.0):
        w.grad = None
        (w * factor).sum().backward()
        assert w.grad.tolist() == [factor] * 3


def test_autograd_backward_takes_several_outputs_and_their_seeds():
    x = pargraph.tensor([1.0, 2.0], requires_grad=True)
    a, b = x * 3, (x * x).sum()
    pargraph.autograd.backward([a, b], [pargraph.tensor([1.0, 0.5]), None])
    assert x.grad.tolist() == [3.0 + 2.0, 1.5 + 4.0]
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        pargraph.autograd.backward([x * 2])


@pytest.mark.parametrize("forward, function", [
    (lambda x: (x.sqrt() * 0).sum(), "SqrtBackward0"),
    (lambda x: (x.log() * 0).sum(), "LogBackward0"),
    (lambda x: (x / x).sum(), "DivBackward0"),
])
def test_detect_anomaly_raises_at_backward_naming_the_function_as_pytorch(forward, function):
    """A backward that computes NaN raises from ``backward()`` under ``detect_anomaly``, with
    PyTorch's message and the user's line; without it, the NaN lands in ``.grad``."""
    import warnings

    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    values = np.array([0.0, 1.0], np.float32)
    theirs = torch.tensor(values, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly(), pytest.raises(RuntimeError) as expected:
            forward(theirs).backward()
        ours = pargraph.tensor(values, requires_grad=True)
        with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"), \
                pargraph.autograd.detect_anomaly():
            loss = forward(ours)
            with pytest.raises(RuntimeError) as error:
                loss.backward()
    assert function in str(expected.value)
    assert f"Function '{function}' returned nan values in its 0th output." in str(error.value)
    assert "test_autograd.py" in str(error.value)  # the line that recorded the forward op
    assert not pargraph.is_anomaly_enabled()
    ours = pargraph.tensor(values, requires_grad=True)
    forward(ours).backward()
    assert np.isnan(ours.grad.numpy()).any()  # off: no check, as in PyTorch


def test_set_detect_anomaly_as_a_call_and_as_a_block():
    assert not pargraph.is_anomaly_enabled() and pargraph.is_anomaly_check_nan_enabled()
    pargraph.autograd.set_detect_anomaly(True)
    try:
        assert pargraph.is_anomaly_enabled()
        with pargraph.autograd.set_detect_anomaly(True, check_nan=False):
            assert not pargraph.is_anomaly_check_nan_enabled()
            x = pargraph.tensor([0.0], requires_grad=True)
            (x.sqrt() * 0).sum().backward()  # NaN not checked
            assert np.isnan(x.grad.numpy()).all()
        assert pargraph.is_anomaly_check_nan_enabled()
    finally:
        pargraph.autograd.set_detect_anomaly(False)
    assert not pargraph.is_anomaly_enabled()


def test_detect_anomaly_checks_a_compiled_step_too():
    import warnings

    model = pargraph.nn.Linear(2, 1)
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)

    @pargraph.compile
    def step(x):
        opt.zero_grad()
        loss = model(x).sqrt().sum() * 0
        loss.backward()
        opt.step()
        return loss

    with pargraph.no_grad():
        model.weight.fill_(0.0), model.bias.fill_(0.0)
    step(pargraph.ones(1, 2))  # captured, then replayed below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pargraph.autograd.detect_anomaly(), pytest.raises(RuntimeError,
                                                               match="SqrtBackward0"):
            step(pargraph.ones(1, 2))


def _slab_cases(count=24):
    """Generated slices of one dimension of 1-4-d tensors: partitions of the dimension into
    1-4 slabs (tiling it, or with a gap or an overlap), spelled with ``...``, with explicit
    ``:`` or with negative bounds."""
    rng = np.random.default_rng(17)
    for k in range(count):
        shape = tuple(int(n) for n in rng.integers(1, 5, int(rng.integers(1, 5))))
        d = int(rng.integers(0, len(shape)))
        n = shape[d] + int(rng.integers(1, 4))
        shape = shape[:d] + (n,) + shape[d + 1:]
        cuts = sorted(set(int(c) for c in rng.integers(1, n, int(rng.integers(0, 3)))))
        bounds = list(zip([0] + cuts, cuts + [n]))
        kind = ("tiling", "gap", "overlap")[k % 3]
        if kind == "gap" and len(bounds) > 1:
            bounds = bounds[1:]
        elif kind == "overlap":
            bounds.append((0, n))
        yield shape, d, bounds, k % 2


def _slab_spec(ndim, d, start, stop, ellipsis, n):
    if ellipsis and d == ndim - 1:
        return (Ellipsis, slice(start - n, stop - n if stop < n else None))
    return (slice(None),) * d + (slice(start, stop),)


def test_gradients_of_slabs_that_tile_a_dimension_are_one_concatenation():
    """The gradients of ``x[..., a:b]`` for slices tiling one dimension (attention's heads)
    are joined by one ``cat``, no scatter into zeros per slab; slabs with a gap or an overlap
    keep their scatters. Both against the gradient worked out in numpy."""
    from pargraph.graph import toposort

    rng = np.random.default_rng(3)
    for shape, d, bounds, ellipsis in _slab_cases():
        x = rng.standard_normal(shape)
        xt = pargraph.tensor(x, requires_grad=True)
        weights = [rng.standard_normal(shape[:d] + (b - a,) + shape[d + 1:]) for a, b in bounds]
        loss = sum(((xt[_slab_spec(len(shape), d, a, b, ellipsis, shape[d])] ** 2)
                    * pargraph.tensor(w)).sum() for (a, b), w in zip(bounds, weights))
        loss.backward()
        expected = np.zeros(shape)
        for (a, b), w in zip(bounds, weights):
            part = (slice(None),) * d + (slice(a, b),)
            expected[part] += 2 * x[part] * w
        backward_ops = [node.op.name for node in toposort([xt.grad._node])]
        np.testing.assert_allclose(xt.grad.numpy(), expected, rtol=1e-12)
        tiles = len(bounds) > 1 and bounds[0][0] == 0 and bounds[-1][1] == shape[d] and all(
            p[1] == q[0] for p, q in zip(bounds, bounds[1:]))
        assert ("index_add" not in backward_ops and "cat" in backward_ops) is tiles, \
            (shape, d, bounds, backward_ops)
