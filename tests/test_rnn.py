"""Recurrent layers against PyTorch: the same weights (a PyTorch state_dict loads as it is)
give the same outputs, final states and gradients, for every mode and option."""

import numpy as np
import pytest

import pargraph
from pargraph.nn.utils.rnn import (
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
)

torch = pytest.importorskip("torch")  # the test extra installs the CPU build


def _twins(kind, *args, **kwargs):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(*args, **kwargs).double()
    ours = getattr(pargraph.nn, kind)(*args, **kwargs).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _compare(ours_out, theirs_out, ours_params, theirs_params, inputs):
    ours_flat = _flat(ours_out)
    theirs_flat = _flat(theirs_out)
    for a, b in zip(ours_flat, theirs_flat):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7,
                                   atol=1e-9)
    sum(o.sum() for o in ours_flat).backward()
    sum(o.sum() * 1.0 for o in theirs_flat).backward()
    for (name, p), (_, q) in zip(ours_params, theirs_params):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-9,
                                   err_msg=name)
    for a, b in inputs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-9)


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat(v)]
    return [] if value is None else [value]


@pytest.mark.parametrize("kind,options", [
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3, "batch_first": True}),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
    ("GRU", {"bias": False}),
])
def test_layers_equal_pytorch_with_the_same_weights(kind, options):
    ours, theirs = _twins(kind, 4, 5, **options)
    shape = (3, 6, 4) if options.get("batch_first") else (6, 3, 4)
    x = np.random.default_rng(1).standard_normal(shape)
    a = pargraph.tensor(x, requires_grad=True)
    b = torch.tensor(x, requires_grad=True)
    _compare(ours(a), theirs(b), ours.named_parameters(), theirs.named_parameters(),
             [(a, b)])


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_initial_states_and_unbatched_input_equal_pytorch(kind):
    ours, theirs = _twins(kind, 4, 5, num_layers=2)
    rng = np.random.default_rng(2)
    x, h = rng.standard_normal((6, 4)), rng.standard_normal((2, 5))  # unbatched
    if kind == "LSTM":
        c = rng.standard_normal((2, 5))
        ours_out = ours(pargraph.tensor(x), (pargraph.tensor(h), pargraph.tensor(c)))
        theirs_out = theirs(torch.tensor(x), (torch.tensor(h), torch.tensor(c)))
    else:
        ours_out = ours(pargraph.tensor(x), pargraph.tensor(h))
        theirs_out = theirs(torch.tensor(x), torch.tensor(h))
    for a, b in zip(_flat(ours_out), _flat(theirs_out)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7,
                                   atol=1e-9)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_equal_pytorch(kind):
    ours, theirs = _twins(kind, 4, 5)
    x = np.random.default_rng(3).standard_normal((3, 4))
    a, b = pargraph.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_b = ours(a), theirs(b)
    out_a, out_b = ours(a, out_a), theirs(b, out_b)  # a second step from the first's state
    _compare(out_a, out_b, ours.named_parameters(), theirs.named_parameters(), [(a, b)])


def test_packed_variable_lengths_equal_pytorch_both_directions():
    ours, theirs = _twins("LSTM", 3, 4, bidirectional=True)
    rng = np.random.default_rng(4)
    lengths = [2, 5, 3]  # unsorted
    x = rng.standard_normal((5, 3, 3))
    a, b = pargraph.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    packed_a = pack_padded_sequence(a, lengths, enforce_sorted=False)
    packed_b = torch.nn.utils.rnn.pack_padded_sequence(b, lengths, enforce_sorted=False)
    np.testing.assert_array_equal(packed_a.batch_sizes.numpy(), packed_b.batch_sizes.numpy())
    out_a, (h_a, c_a) = ours(packed_a)
    out_b, (h_b, c_b) = theirs(packed_b)
    padded_a, len_a = pad_packed_sequence(out_a, batch_first=True)
    padded_b, len_b = torch.nn.utils.rnn.pad_packed_sequence(out_b, batch_first=True)
    assert len_a.tolist() == len_b.tolist() == lengths
    _compare([padded_a, h_a, c_a], [padded_b, h_b, c_b], ours.named_parameters(),
             theirs.named_parameters(), [(a, b)])


def test_sequence_utilities_equal_pytorch():
    seqs = [np.arange(k * 2, dtype=np.float64).reshape(k, 2) for k in (3, 1, 2)]
    ours = pad_sequence([pargraph.tensor(s) for s in seqs], batch_first=True,
                        padding_value=-1.0)
    theirs = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs],
                                             batch_first=True, padding_value=-1.0)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    packed = pack_sequence([pargraph.tensor(s) for s in seqs], enforce_sorted=False)
    back = unpack_sequence(packed)
    for s, t in zip(seqs, back):
        np.testing.assert_array_equal(t.numpy(), s)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_sequence([pargraph.tensor(s) for s in seqs])


def test_bad_arguments_raise_as_pytorch_does():
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        pargraph.nn.GRU(4, 5, proj_size=2)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        pargraph.nn.RNN(4, 5, nonlinearity="sigmoid")
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        pargraph.nn.LSTM(4, 5)(pargraph.randn(2, 3, 7))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        pargraph.nn.GRU(4, 5)(pargraph.randn(2, 3, 4), pargraph.zeros(1, 2, 5))


def _graph_size(layers, bidirectional):
    """(nodes, longest chain of dependent nodes) of an LSTM's forward and backward, counted
    from a trace's records (not timed: the machine's load does not decide it)."""
    import sys

    pargraph.manual_seed(0)
    lstm = pargraph.nn.LSTM(8, 16, num_layers=layers, bidirectional=bidirectional)
    x = pargraph.randn(16, 4, 8)
    with pargraph.trace() as trace:
        out, _ = lstm(x)
        out.sum().backward()
        pargraph.compute()
    records = {r.key: r for r in trace.nodes()}
    longest: dict[str, int] = {}

    def depth(key: str) -> int:
        if key not in longest:
            inputs = [i for i in records[key].inputs if i in records]
            longest[key] = 1 + max((depth(i) for i in inputs), default=0)
        return longest[key]

    # The depth recursion goes as deep as the longest chain; the limit goes back after it,
    # since other tests size their graphs by it.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return len(records), max(depth(key) for key in records)
    finally:
        sys.setrecursionlimit(limit)


def test_directions_are_parallel_branches_and_each_layer_projects_its_input_once():
    """A bidirectional layer's two directions are independent chains (twice the nodes, the
    same longest chain but the concatenation of their outputs); each layer projects its whole
    input sequence in one matrix product per direction (not one per step), and runs its
    recurrence as one node per direction and pass, so a deeper LSTM adds a few nodes per
    layer to the chain, whatever the sequence's length."""
    nodes, chain = _graph_size(1, False)
    both_nodes, both_chain = _graph_size(1, True)
    assert both_nodes >= 1.9 * nodes and both_chain <= chain + 1, (nodes, chain, both_nodes,
                                                                   both_chain)
    _, deep_chain = _graph_size(3, False)
    assert 2 * chain <= deep_chain <= 3 * chain, (chain, deep_chain)
    pargraph.manual_seed(0)
    lstm = pargraph.nn.LSTM(8, 16, num_layers=3, bidirectional=True)
    with pargraph.trace() as trace:
        lstm(pargraph.randn(16, 4, 8))[0].sum().item()
    assert sum(r.op == "linear" for r in trace.nodes()) == 3 * 2


def _generated_layers(count=12):
    """Recurrent layers of generated kinds and options, their inputs of generated lengths
    (one step too), float32 and float64."""
    rng = np.random.default_rng(7)
    for k in range(count):
        kind = ["RNN", "LSTM", "GRU"][k % 3]
        options = {"num_layers": int(rng.integers(1, 4)), "bidirectional": bool(k % 2),
                   "batch_first": bool(rng.integers(2)), "bias": bool(rng.integers(2))}
        if kind == "RNN" and rng.integers(2):
            options["nonlinearity"] = "relu"
        sizes = (int(rng.integers(1, 6)), int(rng.integers(1, 9)))  # features, hidden
        steps, batch = int(rng.choice([1, 2, 9])), int(rng.integers(1, 4))
        yield kind, options, sizes, steps, batch, ["float32", "float64"][k % 2]


@pytest.mark.parametrize("case", list(_generated_layers()), ids=str)
def test_whole_sequence_recurrences_equal_pytorch_on_generated_layers(case):
    """Over whole sequences a direction's recurrence is one node (ops.lstm_sequence,
    ops.rnn_sequence) and one for its gradient: outputs, final states and every gradient
    equal PyTorch's, under a loss that weighs each output and state differently."""
    kind, options, (features, hidden), steps, batch, dtype = case
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(features, hidden, **options).to(getattr(torch, dtype))
    ours = getattr(pargraph.nn, kind)(features, hidden, **options).to(getattr(pargraph, dtype))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(steps * 10 + batch)
    x = rng.standard_normal((batch, steps, features) if options["batch_first"]
                            else (steps, batch, features)).astype(dtype)
    results = []
    for lib, model in ((pargraph, ours), (torch, theirs)):
        inputs = lib.tensor(x, requires_grad=True)
        output, states = model(inputs)
        flat = [output] + _flat(states)
        weights = [lib.tensor(np.random.default_rng(k).standard_normal(tuple(t.shape))
                              .astype(dtype)) for k, t in enumerate(flat)]
        sum((t * w).sum() for t, w in zip(flat, weights)).backward()
        results.append([t.detach().numpy() for t in flat] + [inputs.grad.numpy()]
                       + [p.grad.numpy() for p in model.parameters()])
    tolerance = 2e-5 if dtype == "float32" else 1e-10
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance)
    with pargraph.trace() as trace:
        ours(pargraph.tensor(x))[0].sum().item()
    names = {"LSTM": "lstm_sequence"}.get(kind, "rnn_sequence")
    directions = (1 + options["bidirectional"]) * options["num_layers"]
    assert sum(r.op == names for r in trace.nodes()) == directions
