"""What cannot run here still imports and behaves as PyTorch does on a machine without it:
CUDA's autocast, GradScaler, backend flags, ONNX export, PyTorch's module paths."""

import warnings

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")


def test_cuda_autocast_disables_itself_as_pytorchs_does_without_cuda():
    x = pargraph.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pargraph.cuda.amp.autocast():
            inside = x @ x.T
    assert inside.dtype == pargraph.float32 and "Disabling autocast" in str(caught[0].message)
    np.testing.assert_allclose(inside.numpy(), (x @ x.T).numpy())


def test_a_grad_scaler_for_cuda_disables_itself_as_pytorchs_does():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = pargraph.cuda.amp.GradScaler()
    assert not ours.is_enabled() and "Disabling" in str(caught[0].message)
    assert ours.get_scale() == 1.0
    model = pargraph.nn.Linear(3, 1)
    opt = pargraph.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().numpy().copy()
    loss = model(pargraph.ones(2, 3)).sum()
    assert ours.scale(loss) is loss
    loss.backward()
    ours.step(opt)
    ours.update()
    assert not np.allclose(model.weight.detach().numpy(), before)


def test_a_cpu_grad_scaler_scales_skips_and_backs_off_as_pytorchs():
    torch.manual_seed(0)
    weights = np.array([[0.5, -1.0, 2.0]])
    scales, steps = [], []
    for lib in (pargraph, torch):
        model = lib.nn.Linear(3, 1, bias=False)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(weights, dtype=lib.float32))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        trace = []
        for x in ([1.0, 2.0, 3.0], [float("inf"), 1.0, 0.0], [0.5, 0.5, 0.5], [1.0, 0.0, 1.0]):
            opt.zero_grad()
            scaler.scale(model(lib.tensor([x])).sum()).backward()
            scaler.step(opt)
            scaler.update()
            trace.append(scaler.get_scale())
        scales.append(trace)
        steps.append(model.weight.detach().numpy())
    assert scales[0] == scales[1]
    np.testing.assert_allclose(steps[0], steps[1], rtol=1e-6)


def test_backend_flags_keep_what_programs_set():
    pargraph.backends.cudnn.benchmark = True
    pargraph.backends.cudnn.deterministic = True
    assert pargraph.backends.cudnn.benchmark and pargraph.backends.cudnn.deterministic
    assert not pargraph.backends.cudnn.is_available() and not pargraph.backends.mps.is_available()
    pargraph.backends.cuda.matmul.allow_tf32 = True
    assert pargraph.backends.cuda.matmul.allow_tf32
    pargraph.backends.cudnn.benchmark = pargraph.backends.cudnn.deterministic = False


def test_global_numeric_flags_keep_and_refuse_what_pytorchs_do():
    before = (torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        for precision in ("high", "low", "medium", "HIGH", "highest"):
            with warnings.catch_warnings(record=True) as theirs:
                warnings.simplefilter("always")
                torch.set_float32_matmul_precision(precision)
            with warnings.catch_warnings(record=True) as ours:
                warnings.simplefilter("always")
                pargraph.set_float32_matmul_precision(precision)
            # Theirs adds where in PyTorch's C++ it was raised.
            assert [str(w.message) for w in ours] == \
                [str(w.message).split(" (Triggered internally")[0] for w in theirs]
            assert pargraph.get_float32_matmul_precision() == \
                torch.get_float32_matmul_precision()
        for mode, warn_only in ((True, False), (True, True), (False, True), (False, False)):
            torch.use_deterministic_algorithms(mode, warn_only=warn_only)
            pargraph.use_deterministic_algorithms(mode, warn_only=warn_only)
            assert (pargraph.are_deterministic_algorithms_enabled(),
                    pargraph.is_deterministic_algorithms_warn_only_enabled()) == \
                (torch.are_deterministic_algorithms_enabled(),
                 torch.is_deterministic_algorithms_warn_only_enabled())
        for args, keywords in (((1,), {}), (("yes",), {}), ((None,), {}),
                               ((True,), {"warn_only": 1})):
            with pytest.raises(TypeError) as theirs:
                torch.use_deterministic_algorithms(*args, **keywords)
            with pytest.raises(TypeError) as ours:
                pargraph.use_deterministic_algorithms(*args, **keywords)
            assert str(ours.value).split("(): ")[1] == str(theirs.value).split("(): ")[1]
        # A seeding helper's lines: PyTorch ignores them without CUDA, and so does pargraph.
        assert pargraph.cuda.manual_seed(0) is None and pargraph.cuda.manual_seed_all(0) is None
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.use_deterministic_algorithms(before[1], warn_only=before[2])
        pargraph.set_float32_matmul_precision("highest")
        pargraph.use_deterministic_algorithms(False)


def test_onnx_export_says_what_to_do_instead():
    with pytest.raises(NotImplementedError, match=r"pargraph.save\(model.state_dict\(\)"):
        pargraph.onnx.export(pargraph.nn.Linear(2, 2), pargraph.ones(1, 2), "model.onnx")
    assert not pargraph.onnx.is_in_onnx_export()


def test_pytorchs_module_paths_import_the_same_classes():
    from pargraph.nn.modules.batchnorm import _BatchNorm
    from pargraph.nn.modules.conv import Conv2d
    from pargraph.nn.modules.loss import _Loss
    from pargraph.nn.modules.module import Module
    from pargraph.nn.parameter import Parameter

    assert Conv2d is pargraph.nn.Conv2d and Module is pargraph.nn.Module
    assert Parameter is pargraph.nn.Parameter
    assert issubclass(pargraph.nn.BatchNorm1d, _BatchNorm)
    assert issubclass(pargraph.nn.MSELoss, _Loss)
    import importlib

    import torch.nn.modules as theirs

    for name in ("activation", "adaptive", "batchnorm", "container", "conv", "dropout", "linear",
                 "loss", "normalization", "pooling", "rnn", "sparse", "transformer"):
        ours = importlib.import_module(f"pargraph.nn.modules.{name}")
        wanted = [n for n in importlib.import_module(f"torch.nn.modules.{name}").__all__
                  if hasattr(pargraph.nn, n)]
        assert wanted and all(getattr(ours, n) is getattr(pargraph.nn, n) for n in wanted)
    assert theirs is not None

