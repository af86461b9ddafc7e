"""``pargraph.jit``: TorchScript's decorators give back what they are given, run as Python."""

import pytest

import pargraph


def test_jit_decorators_leave_the_python_to_run():
    @pargraph.jit.script
    def double(x):
        return x * 2

    layer = pargraph.nn.Linear(2, 1)
    assert pargraph.jit.trace(layer, pargraph.ones(1, 2)) is layer
    assert double(pargraph.ones(2)).tolist() == [2.0, 2.0]
    assert not pargraph.jit.is_scripting()
    with pytest.raises(NotImplementedError, match="TorchScript archives are not provided"):
        pargraph.jit.save(layer, "model.pt")
