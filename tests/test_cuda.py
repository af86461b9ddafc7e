"""`pargraph.cuda`: what needs CUDA imports and behaves as PyTorch's does on a machine without
it: autocast disables itself, a CUDA grad scaler does nothing."""

import warnings

import numpy as np

import pargraph


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
