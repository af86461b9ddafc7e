"""F.ctc_loss and nn.CTCLoss against torch 2.13: losses and float64 gradients through the
log-softmax for every reduction, padded and concatenated targets, zero_infinity, unbatched
input; PyTorch's errors; a small recognizer trained eager and compiled."""

import numpy as np
import pytest

import pargraph
from pargraph.nn import functional as F

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
TF = torch.nn.functional

RNG = np.random.default_rng(0)
T, N, C = 12, 4, 5
LOGITS = RNG.standard_normal((T, N, C))
TARGETS = np.array([[1, 2, 2, 4], [3, 3, 0, 0], [1, 4, 2, 3], [2, 0, 0, 0]])
INPUT_LENGTHS, TARGET_LENGTHS = np.array([12, 9, 10, 3]), np.array([4, 2, 4, 1])


def _both(input_lengths, reduction, zero_infinity, concatenated):
    targets = np.concatenate([TARGETS[n, :TARGET_LENGTHS[n]] for n in range(N)]) \
        if concatenated else TARGETS
    results = []
    for lib, functional in ((pargraph, F), (torch, TF)):
        logits = lib.tensor(LOGITS, requires_grad=True)
        loss = functional.ctc_loss(logits.log_softmax(2), lib.tensor(targets),
                                   lib.tensor(input_lengths), lib.tensor(TARGET_LENGTHS),
                                   reduction=reduction, zero_infinity=zero_infinity)
        loss.sum().backward()
        results.append((loss.detach().numpy(), logits.grad.numpy()))
    return results


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_and_its_gradient_as_pytorchs(reduction, zero_infinity, concatenated):
    (ours, ours_grad), (theirs, theirs_grad) = _both(INPUT_LENGTHS, reduction, zero_infinity,
                                                     concatenated)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    np.testing.assert_allclose(ours_grad, theirs_grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_an_impossible_alignment_as_pytorchs(zero_infinity):
    """Four labels in two steps: an infinite loss (NaN gradients), or zero and none."""
    (ours, ours_grad), (theirs, theirs_grad) = _both(np.array([2, 9, 10, 3]), "none",
                                                     zero_infinity, False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    np.testing.assert_array_equal(np.isnan(ours_grad), np.isnan(theirs_grad))
    np.testing.assert_allclose(np.nan_to_num(ours_grad), np.nan_to_num(theirs_grad),
                               rtol=1e-8, atol=1e-10)


def test_unbatched_input_and_the_module_as_pytorchs():
    ours = pargraph.nn.CTCLoss(reduction="sum")(
        pargraph.tensor(LOGITS[:, 0]).log_softmax(1), pargraph.tensor(TARGETS[0]),
        pargraph.tensor(12), pargraph.tensor(4))
    theirs = torch.nn.CTCLoss(reduction="sum")(
        torch.tensor(LOGITS[:, 0]).log_softmax(1), torch.tensor(TARGETS[0]),
        torch.tensor(12), torch.tensor(4))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)
    assert repr(pargraph.nn.CTCLoss()) == repr(torch.nn.CTCLoss())


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.tensor([[1, 2], [1, 1]]),
                                           lib.tensor([5, 6]), lib.tensor([2, 2])),
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.tensor([[1, 2], [1, 1]]),
                                           lib.tensor([5, 5]), lib.tensor([2, 3])),
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.tensor([[1, 2], [1, 1]]),
                                           lib.tensor([5, 5, 5]), lib.tensor([2, 2])),
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.tensor([[1, 2], [1, 1]]),
                                           lib.tensor([5, 5]), lib.tensor([2, 2]), blank=4),
])
def test_errors_as_pytorchs(call):
    messages = []
    for lib in (pargraph, torch):
        with pytest.raises(RuntimeError) as caught:
            call(lib).numpy()
        messages.append(str(caught.value).splitlines()[0])
    # A value found wrong in the task names the op first, as every task error does.
    assert messages[0].removeprefix("ctc_loss: ") == messages[1]


@pytest.mark.parametrize("compiled", [False, True])
def test_a_recognizer_trains_as_pytorchs(compiled):
    """A GRU over feature frames, a linear layer to classes, CTC: three Adam steps give
    PyTorch's losses and parameters."""
    def make(lib):
        class Recognizer(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = lib.nn.GRU(3, 6)
                self.out = lib.nn.Linear(6, C)

            def forward(self, frames):
                return self.out(self.rnn(frames)[0]).log_softmax(2)
        return Recognizer().double()

    theirs, ours = make(torch), make(pargraph)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    frames = RNG.standard_normal((T, N, 3))
    ours_opt = pargraph.optim.Adam(ours.parameters(), lr=0.05)
    theirs_opt = torch.optim.Adam(theirs.parameters(), lr=0.05)
    loss_of = pargraph.nn.CTCLoss()

    def step(x, targets, input_lengths, target_lengths):
        ours_opt.zero_grad()
        loss = loss_of(ours(x), targets, input_lengths, target_lengths)
        loss.backward()
        ours_opt.step()
        return loss

    run = pargraph.compile(step) if compiled else step
    for _ in range(3):
        loss = run(pargraph.tensor(frames), pargraph.tensor(TARGETS),
                   pargraph.tensor(INPUT_LENGTHS), pargraph.tensor(TARGET_LENGTHS))
        theirs_opt.zero_grad()
        expected = torch.nn.CTCLoss()(theirs(torch.tensor(frames)), torch.tensor(TARGETS),
                                      torch.tensor(INPUT_LENGTHS), torch.tensor(TARGET_LENGTHS))
        expected.backward()
        theirs_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-9)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-7,
                                   atol=1e-9)
