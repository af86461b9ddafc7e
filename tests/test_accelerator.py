"""``pargraph.accelerator``: none, as PyTorch's CPU build answers, and nothing asks for one."""

import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def test_no_accelerator_is_available_as_on_pytorchs_cpu_build():
    assert pargraph.accelerator.is_available() is torch.accelerator.is_available() is False
    assert pargraph.accelerator.current_accelerator() is None
    assert torch.accelerator.current_accelerator() is None
    assert pargraph.cuda.is_available() is torch.cuda.is_available()


def test_a_program_that_picks_the_accelerator_if_any_runs_on_the_cpu():
    for library in (pargraph, torch):
        device = library.accelerator.current_accelerator() if \
            library.accelerator.is_available() else library.device("cpu")
        x = library.ones(2, 3, device=device)
        assert str(x.device) == "cpu" and x.sum().item() == 6.0
