"""Custom ops (pargraph.library): a numpy or scipy function as one node of the graph, with a
fake for shapes, a registered backward, a declared cost, errors at the user's line, and
workers that run it."""

import subprocess
import sys
import textwrap
import time

import dask
import numpy as np
import pytest

import pargraph
from pargraph.engine import modes


def scipy_fftconvolve(x, kernel, mode: str = "same"):
    """scipy's fftconvolve, imported when called: importing ``scipy.signal`` would be a large
    part of the collection in every test process that collects this file."""
    from scipy import signal

    return signal.fftconvolve(x, kernel, mode)


@pargraph.library.custom_op("test::fftconvolve", mutates_args=())
def fftconvolve(x, kernel):
    return scipy_fftconvolve(x, kernel, mode="same")


@fftconvolve.register_fake
def _(x, kernel):
    return pargraph.empty_like(x)


def _convolve_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _convolve_backward(ctx, grad):
    x, kernel = ctx.saved_tensors
    # d/dx of a "same" convolution (odd kernel) is the "same" convolution with the flipped
    # kernel.
    return fftconvolve(grad, kernel.flip(0)), None


fftconvolve.register_autograd(_convolve_backward, setup_context=_convolve_setup)


@pargraph.library.custom_op("test::cube", mutates_args=())
def cube(x, power=3):
    return x ** power


@cube.register_fake
def _(x, power=3):
    return pargraph.empty_like(x)


def _cube_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * ctx.power * x ** (ctx.power - 1), None  # tensor ops: differentiable again


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.power = inputs[1]


cube.register_autograd(_cube_backward, setup_context=_cube_setup)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_custom_op_runs_in_the_graph_and_its_gradient_matches_finite_differences(scheduler):
    rng = np.random.default_rng(0)
    x0, k0 = rng.standard_normal(17), np.array([0.25, 0.5, -0.1])  # odd: "same" is centred
    with dask.config.set(scheduler=scheduler):
        x = pargraph.tensor(x0, requires_grad=True)
        out = fftconvolve(x, pargraph.tensor(k0))
        assert out._node.value is None  # recorded, not run: its shape came from the fake
        assert out.shape == (17,) and out.grad_fn is not None
        np.testing.assert_allclose(out.detach().numpy(), scipy_fftconvolve(x0, k0, "same"))
        weights = rng.standard_normal(17)
        (out * pargraph.tensor(weights)).sum().backward()
        numeric = np.zeros(17)
        for i in range(17):
            step = np.zeros(17)
            step[i] = 1e-6
            numeric[i] = ((scipy_fftconvolve(x0 + step, k0, "same") -
                           scipy_fftconvolve(x0 - step, k0, "same")) @ weights) / 2e-6
        np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("saves", ["inputs", "output"])
def test_a_custom_op_keeps_nothing_of_a_step_once_its_tensors_are_gone(saves):
    """The autograd context of a call goes with its node: kept by a weak dictionary keyed by
    the node, it held the node's tensor, so every call's node, context and saved tensors
    stayed for the life of the process (a training loop grew by all its calls)."""
    import gc
    import weakref

    @pargraph.library.custom_op(f"test::scaled_{saves}", mutates_args=())
    def scaled(x):
        return x * 2.0

    scaled.register_fake(lambda x: pargraph.empty_like(x))

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0] if saves == "inputs" else output)

    scaled.register_autograd(lambda ctx, grad: grad * 2.0, setup_context=setup)
    x = pargraph.ones(3, requires_grad=True)
    y = scaled(x * 1.0)
    node, context = weakref.ref(y._node), weakref.ref(y._node.context)
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    del y
    if saves == "inputs":  # nothing refers back to the node: gone at once, no collection
        assert node() is None and context() is None
    gc.collect()  # a context that holds the output is a cycle with its node, collectable
    assert node() is None and context() is None


def test_a_backward_of_tensor_ops_is_differentiable_again():
    x = pargraph.tensor([1.5, -2.0], dtype=pargraph.float64, requires_grad=True)
    (first,) = pargraph.autograd.grad(cube(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(first.detach().numpy(), 3 * np.array([1.5, -2.0]) ** 2)
    first.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([1.5, -2.0]))
    assert cube(x, 2).detach().tolist() == [2.25, 4.0]  # non-tensor arguments pass through


def test_shape_errors_raise_at_the_call_and_task_errors_name_the_op_and_line():
    @pargraph.library.custom_op("test::matvec", mutates_args=())
    def matvec(a, v):
        if not np.isfinite(v).all():
            raise ValueError("v must be finite")
        return a @ v

    @matvec.register_fake
    def _(a, v):
        return a @ v  # pargraph's shape rule checks the arguments at the call

    with pytest.raises(RuntimeError, match="matmul"):
        matvec(pargraph.ones(2, 3), pargraph.ones(4))
    bad = matvec(pargraph.ones(2, 3), pargraph.tensor([1.0, float("nan"), 0.0]))
    with pytest.raises(ValueError, match=r"(?s)test::matvec: v must be finite.*test_library"):
        bad.numpy()

    @pargraph.library.custom_op("test::liar", mutates_args=())
    def liar(x):
        return np.zeros(5)

    @liar.register_fake
    def _(x):
        return pargraph.empty_like(x)

    with pytest.raises(RuntimeError, match=r"test::liar: returned shape \[5\], but its fake "
                                           r"declared \[3\]"):
        liar(pargraph.ones(3)).numpy()
    # What holds no numbers is an error, not a NaN: None, strings, objects; with and without
    # a fake.
    def returning(value):
        return lambda x: value

    for returned in (None, np.array(["a", "b", "c"]), [object()] * 3):
        nothing = pargraph.library.custom_op("test::nothing", mutates_args=())(
            returning(returned))
        with pytest.raises(TypeError, match=r"test::nothing: returned \w+ \((object|<U1)\), "
                                            r"expected an array of numbers"):
            nothing(pargraph.ones(3))
        nothing.register_fake(lambda x: pargraph.empty_like(x))
        with pytest.raises(TypeError, match=r"(?s)test::nothing: returned \w+ \((object|<U1)\)"
                                            r", expected an array of numbers \(float32\)"
                                            r".*test_library"):
            nothing(pargraph.ones(3)).numpy()
    with pytest.raises(NotImplementedError, match="mutates_args"):
        pargraph.library.custom_op("test::inplace", mutates_args=("x",))(lambda x: x)
    with pytest.raises(ValueError, match="namespace::name"):
        pargraph.library.custom_op("plain", mutates_args=())(lambda x: x)


def test_without_a_fake_the_op_runs_when_called_as_eager_pytorch_would():
    @pargraph.library.custom_op("test::eager_square", mutates_args=())
    def square(x):
        return x * x

    out = square(pargraph.tensor([2.0, 3.0]) + 1)
    assert out._node.value is not None and out.tolist() == [9.0, 16.0]


def test_declared_costs_make_parallel_groups_named_after_the_op():
    @pargraph.library.custom_op("test::simulate", mutates_args=(), cost=0.02)
    def simulate(x):
        time.sleep(0.002)  # the GIL is free meanwhile, as in a solver's C code
        return x * 2

    @simulate.register_fake
    def _(x):
        return pargraph.empty_like(x)

    x = pargraph.ones(4)
    with dask.config.set(scheduler="threads"), pargraph.trace() as tr:
        total = pargraph.stack([simulate(x + k) for k in range(8)]).sum()
        total.item()
    assert total.item() == 2 * 8 * 4 + 2 * 4 * sum(range(8))
    names = [record.op for record in tr.records.values()]
    assert names.count("test::simulate") == 8
    # Eight branches in tasks of their own: both threads ran some (one task would be one lane).
    lanes = {record.lane for record in tr.records.values() if record.op == "test::simulate"}
    assert len(lanes) == 2


def test_a_custom_op_runs_on_a_cluster():
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(1)
    x0, k0 = rng.standard_normal(9), np.array([1.0, -1.0])
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster), \
            dask.config.set(scheduler=modes.choose_scheduler()):
        x = pargraph.tensor(x0, requires_grad=True)
        loss = fftconvolve(x, pargraph.tensor(k0)).pow(2).sum()
        loss.backward()
        np.testing.assert_allclose(loss.item(), (scipy_fftconvolve(x0, k0, "same") ** 2).sum())
        assert x.grad.shape == (9,)


def test_an_op_defined_in_main_runs_on_worker_processes(tmp_path):
    script = tmp_path / "main_op.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import pargraph
        from distributed import Client, LocalCluster

        @pargraph.library.custom_op("main::twice", mutates_args=())
        def twice(x):
            return np.asarray(x) * 2

        @twice.register_fake
        def _(x):
            return pargraph.empty_like(x)

        if __name__ == "__main__":
            with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address=None,
                              worker_dashboard_address="127.0.0.1:0") as cluster, \
                    Client(cluster):
                print(twice(pargraph.arange(3.0) + 1).tolist())
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[2.0, 4.0, 6.0]"


def test_the_fake_is_asked_once_per_shapes_dtypes_and_other_arguments():
    asked = []

    @pargraph.library.custom_op("test::scaled", mutates_args=())
    def scaled(x, factor):
        return x * factor

    @scaled.register_fake
    def _(x, factor):
        asked.append((tuple(x.shape), str(x.dtype).split(".")[-1], factor))
        if x.dim() != 1:
            raise ValueError("scaled takes vectors")
        return pargraph.empty_like(x)

    for _ in range(3):
        out = scaled(pargraph.ones(3), 2.0)
    assert out.tolist() == [2.0, 2.0, 2.0] and len(asked) == 1
    assert scaled(pargraph.ones(4), 2.0).shape == (4,)
    assert scaled(pargraph.ones(3, dtype=pargraph.float64), 2.0).dtype == pargraph.float64
    assert scaled(pargraph.ones(3), 3).tolist() == [3.0, 3.0, 3.0]
    assert scaled(x=pargraph.ones(3), factor=2.0).tolist() == [2.0, 2.0, 2.0]
    assert len(asked) == 4  # a new shape, dtype, factor; keywords bind to the same
    for _ in range(2):  # an error is not kept: raised at each call
        with pytest.raises(ValueError, match="vectors"):
            scaled(pargraph.ones(2, 2), 2.0)
    assert len(asked) == 6
    fresh = []
    scaled.register_fake(lambda x, factor: fresh.append(x.shape) or pargraph.empty_like(x))
    assert scaled(pargraph.ones(3), 2.0).shape == (3,) and fresh == [(3,)]  # asked anew

    @pargraph.library.custom_op("test::made", mutates_args=())
    def made(x):
        return np.zeros(3, dtype=pargraph.get_default_dtype())

    made.register_fake(lambda x: pargraph.empty(3))  # a factory: the default dtype
    assert made(pargraph.ones(1, dtype=pargraph.float32)).dtype == pargraph.float32
    pargraph.set_default_dtype(pargraph.float64)
    try:
        assert made(pargraph.ones(1, dtype=pargraph.float32)).dtype == pargraph.float64
    finally:
        pargraph.set_default_dtype(pargraph.float32)


def test_a_number_passed_to_a_custom_op_in_a_compiled_step_is_an_input():
    # The fake's cache must not hash a number the step binds anew at each call: that read as
    # "Python decided with its value", and every new number captured the step again.
    def run(compiled):
        pargraph.manual_seed(0)
        model = pargraph.nn.Linear(4, 4)
        opt = pargraph.optim.SGD(model.parameters(), lr=0.1)

        def step(x, power):
            opt.zero_grad()
            loss = cube(model(x), power).mean()
            loss.backward()
            opt.step()
            return loss

        run_step = pargraph.compile(step) if compiled else step
        x = pargraph.randn(3, 4)
        losses = [run_step(x, power).item() for power in (1.0, 2.0, 3.0, 4.0, 2.0)]
        return losses, model.weight.detach().numpy(), run_step
    eager, compiled = run(False), run(True)
    assert compiled[0] == eager[0] and np.array_equal(compiled[1], eager[1])
    assert compiled[2].captures == 2 and compiled[2].replays == 3  # 2nd: .grad exists now


def test_a_backward_through_an_op_without_a_formula_raises_as_pytorch_does():
    @pargraph.library.custom_op("test::no_formula", mutates_args=())
    def doubled(x):
        return x * 2

    doubled.register_fake(lambda x: pargraph.empty_like(x))
    x = pargraph.ones(3, requires_grad=True)
    out = doubled(x)
    assert out.requires_grad and out.grad_fn is not None
    assert doubled(pargraph.ones(3)).requires_grad is False
    with pytest.raises(RuntimeError, match="Trying to backward through test::no_formula but no "
                                           "autograd formula was registered"):
        out.sum().backward()
    assert out.tolist() == [2.0, 2.0, 2.0]  # its value is still there


@pargraph.library.custom_op("test::numpy_sin", mutates_args=())
def _numpy_sin(x: pargraph.Tensor) -> pargraph.Tensor:
    # Written as PyTorch's custom-op tutorial writes it: the argument is a tensor there.
    x_np = x.cpu().numpy()
    y_np = np.sin(x_np)
    return pargraph.from_numpy(y_np).to(device=x.device)


@_numpy_sin.register_fake
def _(x):
    return pargraph.empty_like(x)


def _sin_setup(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


_numpy_sin.register_autograd(lambda ctx, grad: grad * ctx.saved_tensors[0].cos(),
                             setup_context=_sin_setup)


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_function_written_for_pytorchs_tensors_runs_unchanged(scheduler):
    @pargraph.library.custom_op("test::numpy_mul", mutates_args=())
    def numpy_mul(x, y: float):
        assert x.detach() is x and x.contiguous() is x
        return pargraph.from_numpy(x.numpy(force=True) * y).to(x.device, x.dtype)

    numpy_mul.register_fake(lambda x, y: pargraph.empty_like(x))
    numpy_mul.register_autograd(lambda ctx, grad: (grad * ctx.y, None),
                                setup_context=lambda ctx, inputs, output:
                                setattr(ctx, "y", inputs[1]))
    values = np.linspace(-1.0, 1.0, 5)
    with dask.config.set(scheduler=scheduler):
        x = pargraph.tensor(values, requires_grad=True)
        y = numpy_mul(_numpy_sin(x), 2.0)
        y.sum().backward()
        assert np.allclose(y.detach().numpy(), 2 * np.sin(values))
        assert np.allclose(x.grad.numpy(), 2 * np.cos(values))
        assert numpy_mul(pargraph.ones(2), 3.0).to(pargraph.float64).tolist() == [3.0, 3.0]


def test_the_function_cannot_change_the_graphs_values():
    @pargraph.library.custom_op("test::scribbles", mutates_args=())
    def scribbles(x):
        x += 1  # the array is a parameter's value: changing it would corrupt the graph
        return x.copy()

    scribbles.register_fake(lambda x: pargraph.empty_like(x))
    weight = pargraph.nn.Parameter(pargraph.zeros(3))
    with pytest.raises(ValueError, match=r"(?s)test::scribbles: output array is read-only.*"
                                         r"test_library"):
        scribbles(weight).detach().numpy()
    assert weight.tolist() == [0.0, 0.0, 0.0]


def test_opcheck_reports_what_pytorchs_reports():
    @pargraph.library.custom_op("test::scaled_by", mutates_args=())
    def scaled_by(x, y: float):
        return pargraph.from_numpy(x.numpy(force=True) * y).to(x.device)

    scaled_by.register_fake(lambda x, y: pargraph.empty_like(x))
    scaled_by.register_autograd(lambda ctx, grad: (grad * ctx.y, None),
                                setup_context=lambda ctx, inputs, output:
                                setattr(ctx, "y", inputs[1]))
    passed = dict.fromkeys(pargraph.library.OPCHECK_TESTS, "SUCCESS")
    for args in [(pargraph.randn(3), 3.14), (pargraph.randn(1, 10, requires_grad=True), 1.234)]:
        assert pargraph.library.opcheck(scaled_by, args) == passed

    @pargraph.library.custom_op("test::same", mutates_args=())
    def same(x):
        return x

    @pargraph.library.custom_op("test::changes", mutates_args=())
    def changes(x):
        x += 1
        return x.clone()

    @pargraph.library.custom_op("test::summed", mutates_args=())
    def summed(x):
        return x.sum(0)

    for op in (same, changes, summed):
        op.register_fake(lambda x: pargraph.empty_like(x))
    x = pargraph.randn(3, 2)
    found = {op.name: pargraph.library.opcheck(op, (x.requires_grad_(op is summed),),
                                               raise_exception=False)
             for op in (same, changes, summed)}
    assert "argument 0 or a view of it" in str(found["test::same"]["test_schema"])
    assert "argument 0 was changed in place" in str(found["test::changes"]["test_schema"])
    assert "read-only" in str(found["test::changes"]["test_aot_dispatch_dynamic"])
    assert "the fake gives shape [3, 2]" in str(found["test::summed"]["test_faketensor"])
    assert "no autograd formula" in str(found["test::summed"]["test_aot_dispatch_dynamic"])
    assert found["test::summed"]["test_schema"] == "SUCCESS"
    with pytest.raises(pargraph.library.OpCheckError, match="test_schema failed"):
        pargraph.library.opcheck(same, (x,))
    with pytest.raises(ValueError, match="subset"):
        pargraph.library.opcheck(same, (x,), test_utils=("test_nothing",))


def _counted_op(name: str, backward, setup=None):
    """A custom op ``x * y`` whose backward is ``backward(ctx, grad)``, counting its calls;
    ``setup(ctx, inputs, output)`` adds to what its setup_context saves (both inputs)."""
    calls = []

    @pargraph.library.custom_op(name, mutates_args=())
    def product(x, y):
        return x * y

    product.register_fake(lambda x, y: pargraph.empty_like(x))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        if setup is not None:
            setup(ctx, inputs, output)

    def counted(ctx, grad):
        calls.append(1)
        return backward(ctx, grad)

    product.register_autograd(counted, setup_context=setup_context)
    return product, calls


def test_a_custom_ops_backward_is_called_once_per_structure_and_replayed_after():
    # PyTorch requires register_autograd's backward to read only ctx (it traces on fake
    # tensors): what it records is a function of the structure, kept in a template.
    from pargraph.autograd.backward_graph import BackwardTemplate

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y, grad * x

    product, calls = _counted_op("test::template_product", backward)
    rng = np.random.default_rng(0)
    w = pargraph.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    for step in range(3):
        x = pargraph.tensor(rng.standard_normal((5, 3)))
        hidden = x @ w
        hits = BackwardTemplate.cache.hits
        (product(hidden.tanh(), hidden) * 2).sum().backward()
        assert len(calls) == 1  # recorded at the first backward, replayed since
        assert BackwardTemplate.cache.hits == hits + (step > 0)
        h = x.numpy() @ w.detach().numpy()  # this step's values, not the first one's
        d_hidden = 2 * (h * (1 - np.tanh(h) ** 2) + np.tanh(h))
        np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ d_hidden, rtol=1e-10)
        w.grad = None


def test_a_custom_backward_reading_a_ctx_value_is_recorded_again_when_the_value_changes():
    def setup(ctx, inputs, output):
        ctx.scale, ctx.both = SCALES[len(seen)], len(seen) % 2 == 1
        seen.append(1)

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y * ctx.scale, (grad * x * ctx.scale if ctx.both else None)

    SCALES = [2.0, 3, 2.0, 3, 2.0, 2]  # 3 and 2 (ints) are other values than 3.0 and 2.0
    seen: list = []
    product, calls = _counted_op("test::scaled_product", backward, setup)
    for step in range(len(SCALES)):
        a = pargraph.tensor([1.0, 2.0], requires_grad=True)
        b = pargraph.tensor([3.0, 4.0], requires_grad=True)
        (product(a * 1.0, b * 1.0) * 3).sum().backward()
        assert a.grad.tolist() == [9.0 * SCALES[step], 12.0 * SCALES[step]]
        assert (b.grad.tolist() if b.grad is not None else None) == \
            ([3.0 * SCALES[step], 6.0 * SCALES[step]] if step % 2 else None)
    assert len(calls) == 3  # (2.0, False), (3, True), (2, True); the rest replayed


def test_a_custom_backward_reading_shapes_and_dtypes_from_ctx_is_replayed():
    def setup(ctx, inputs, output):
        ctx.dtype, ctx.shape = inputs[0].dtype, inputs[0].shape

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return (grad * y).to(ctx.dtype).reshape(ctx.shape), grad * x

    product, calls = _counted_op("test::typed_product", backward, setup)
    for step in range(3):
        a = pargraph.tensor([1.0, 2.0 + step], requires_grad=True)
        (product(a * 1.0, a * 2.0)).sum().backward()
        assert a.grad.tolist() == [4.0, 4.0 * (2.0 + step)]
    assert len(calls) == 1


@pytest.mark.parametrize("kept", ["a tensor computed in setup_context", "an object"])
def test_a_custom_backward_whose_ctx_holds_more_than_values_runs_at_every_backward(kept):
    class Options:
        both = False

    def setup(ctx, inputs, output):
        ctx.kept = inputs[0] * 2 if kept.startswith("a tensor") else Options()

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y, (grad * x if Options.both else None)

    product, calls = _counted_op(f"test::live_product_{len(kept)}", backward, setup)
    for step in range(4):
        Options.both = step >= 2  # read from outside ctx: seen because the backward runs
        a = pargraph.tensor([1.0, 2.0], requires_grad=True)
        b = pargraph.tensor([3.0, 4.0], requires_grad=True)
        (product(a * 1.0, b * 1.0) * 3).sum().backward()
        assert len(calls) == step + 1  # called once, also when the template no longer fits
        assert a.grad.tolist() == [9.0, 12.0]
        assert (b.grad.tolist() if b.grad is not None else None) == \
            ([3.0, 6.0] if Options.both else None)


def test_a_custom_backward_that_returns_its_gradient_as_it_is():
    product, calls = _counted_op("test::straight_through", lambda ctx, grad: (grad, grad))
    for _ in range(3):
        a = pargraph.tensor([1.0, 2.0], requires_grad=True)
        (product(a.exp(), a) * 2).sum().backward()
        assert len(calls) == 1
        np.testing.assert_allclose(a.grad.numpy(), 2 * np.exp([1.0, 2.0]) + 2, rtol=1e-6)
