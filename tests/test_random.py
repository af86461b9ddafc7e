"""``pargraph.random``: the generator's state saved, put back and refused as PyTorch's."""

import pytest

import pargraph as torch


def test_the_generators_state_is_saved_and_put_back_as_pytorchs(tmp_path):
    torch.manual_seed(11)
    assert torch.initial_seed() == 11
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    state = torch.get_rng_state()
    assert state.dtype == torch.uint8 and state.dim() == 1
    # A checkpoint keeps it: what followed it follows again after loading, dropout included.
    torch.save({"rng": state}, tmp_path / "rng.pt")
    x = torch.ones(8, 4)
    first = (torch.rand(5).tolist(), model(x).tolist(), torch.randperm(9).tolist())
    torch.set_rng_state(torch.load(tmp_path / "rng.pt")["rng"])
    assert (torch.rand(5).tolist(), model(x).tolist(), torch.randperm(9).tolist()) == first
    drawn = torch.seed()
    assert torch.initial_seed() == drawn
    torch.manual_seed(drawn)
    again = torch.rand(3).tolist()
    torch.manual_seed(drawn)
    assert torch.rand(3).tolist() == again


def test_a_wrong_rng_state_is_refused_as_pytorch_refuses_it():
    real = pytest.importorskip("torch")
    ours, theirs = torch.get_rng_state(), real.get_rng_state()
    for make_ours, make_theirs in ((lambda s: s.float(), lambda s: s.float()),
                                   (lambda s: [1, 2], lambda s: [1, 2]),
                                   (lambda s: s[:10], lambda s: s[:10])):
        with pytest.raises((TypeError, RuntimeError)) as raised_theirs:
            real.set_rng_state(make_theirs(theirs))
        with pytest.raises(raised_theirs.type) as raised_ours:
            torch.set_rng_state(make_ours(ours))
        # The same words; the sizes are each library's own.
        assert str(raised_ours.value).split(" of size")[0] == \
            str(raised_theirs.value).split(" of size")[0]
    broken = ours.numpy().copy()
    broken[32] = 7
    with pytest.raises(RuntimeError, match="not a state get_rng_state gave"):
        torch.set_rng_state(torch.from_numpy(broken))
    torch.set_rng_state(ours)  # the generator is as it was
