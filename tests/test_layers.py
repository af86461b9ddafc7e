"""Layers real PyTorch programs use (#13): convolution and pooling, normalization, embeddings,
attention; checked against direct numpy references (the ops' gradients are in the op table)."""

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.nn import functional as F
from tests.op_table import _conv_ref

R = np.random.default_rng(7)


def test_conv2d_module_matches_a_direct_convolution_and_pytorch_init_bounds():
    layer = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, groups=2).double()
    x = R.standard_normal((3, 4, 7, 5))
    expected = _conv_ref(x, layer.weight.detach().numpy(), layer.bias.detach().numpy(),
                         stride=(2, 1), padding=(1, 1), dilation=(1, 1), groups=2)
    np.testing.assert_allclose(layer(pargraph.tensor(x)).detach().numpy(), expected, atol=1e-12)
    assert layer.weight.shape == (6, 2, 3, 2) and layer.bias.shape == (6,)
    bound = 1 / np.sqrt(2 * 3 * 2)  # kaiming_uniform(a=sqrt(5)) on fan_in = 12
    assert np.abs(layer.weight.detach().numpy()).max() <= bound
    assert repr(layer) == ("Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), "
                           "groups=2)")


@pytest.mark.parametrize("mode, numpy_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                              ("circular", "wrap")])
def test_conv_padding_modes_pad_the_input_like_numpy(mode, numpy_mode):
    layer = nn.Conv1d(2, 3, 3, padding=2, padding_mode=mode, bias=False).double()
    x = R.standard_normal((2, 2, 6))
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2)), mode=numpy_mode)
    expected = _conv_ref(padded[..., None], layer.weight.detach().numpy()[..., None], None,
                         stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)[..., 0]
    np.testing.assert_allclose(layer(pargraph.tensor(x)).detach().numpy(), expected, atol=1e-12)


def test_conv_and_pool_errors_name_the_layer_and_the_sizes():
    conv = nn.Sequential(nn.Conv2d(3, 4, 3))
    with pytest.raises(RuntimeError, match=r"Conv2d\(3, 4, .*\) at '0': expected input of shape "
                                           r"\(N, 3, \.\.\., \.\.\.\) with 3 channels"):
        conv(pargraph.ones(2, 2, 8, 8))
    with pytest.raises(RuntimeError, match=r"conv: calculated output size \(0, 0\) is too small"):
        conv(pargraph.ones(2, 3, 2, 2))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(pargraph.ones(1, 1, 4, 4), pargraph.ones(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
        F.max_pool2d(pargraph.ones(1, 1, 4, 4), 2, padding=2)
    with pytest.raises(NotImplementedError, match="pad: mode='wrap'"):
        F.pad(pargraph.ones(2, 2), (1, 1), mode="wrap")


def test_max_pool_indices_are_flat_positions_in_the_unpadded_plane():
    x = R.permutation(30).astype(float).reshape(1, 1, 5, 6)
    values, indices = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)(
        pargraph.tensor(x))
    flat = x.reshape(-1)
    np.testing.assert_array_equal(flat[indices.numpy().reshape(-1)], values.numpy().reshape(-1))
    assert values.shape == (1, 1, 3, 3) and indices.dtype == np.int64


def test_pooling_modules_and_unbatched_input():
    x = pargraph.tensor(R.standard_normal((3, 8, 8)))  # (C, H, W): one unbatched sample
    assert nn.MaxPool2d(2)(x).shape == (3, 4, 4)
    assert nn.AvgPool2d(2, stride=1)(x).shape == (3, 7, 7)
    pooled = nn.AdaptiveAvgPool2d(1)(x)
    np.testing.assert_allclose(pooled.numpy()[:, 0, 0], x.numpy().mean((1, 2)), atol=1e-12)
    assert nn.AvgPool1d(2)(pargraph.ones(2, 3, 6)).shape == (2, 3, 3)
    assert nn.MaxPool1d(3, stride=1)(pargraph.ones(2, 3, 6)).shape == (2, 3, 4)


def test_a_small_convnet_learns_and_its_gradients_match_finite_differences():
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(3, 2, 2), nn.Flatten(), nn.Linear(2, 2)).double()
    x = pargraph.tensor(R.standard_normal((4, 1, 4, 4)))
    y = pargraph.tensor([0, 1, 1, 0])
    params = list(model.parameters())
    assert pargraph.autograd.gradcheck(
        lambda *ps: F.cross_entropy(_with(model, ps)(x), y), params, atol=1e-5)
    optimizer = pargraph.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def _with(model, params):
    """The model with its parameters swapped for ``params`` (for gradcheck)."""
    def run(x):
        saved = list(model.parameters())
        for (module, name), p in zip(_slots(model), params):
            module._parameters[name] = p
        try:
            return model(x)
        finally:
            for (module, name), p in zip(_slots(model), saved):
                module._parameters[name] = p
    return run


def _slots(model):
    return [(m, n) for m in model.modules() for n, p in m._parameters.items() if p is not None]


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_running_statistics_follow_pytorch_formulas(momentum):
    layer = nn.BatchNorm2d(3, momentum=momentum).double()
    batches = [R.standard_normal((4, 3, 2, 2)) * 3 + 1 for _ in range(3)]
    mean, var = np.zeros(3), np.ones(3)
    for k, x in enumerate(batches, start=1):
        out = layer(pargraph.tensor(x))
        m = 1 / k if momentum is None else momentum
        mean = (1 - m) * mean + m * x.mean((0, 2, 3))
        var = (1 - m) * var + m * x.var((0, 2, 3), ddof=1)  # unbiased, as PyTorch keeps it
        expected = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(
            x.var((0, 2, 3), keepdims=True) + 1e-5)
        np.testing.assert_allclose(out.detach().numpy(), expected, atol=1e-12)
        out.sum().item()  # the step's run computes the deferred statistics too
        assert layer.running_mean._node.value is not None
    state = layer.state_dict()
    np.testing.assert_allclose(state["running_mean"].numpy(), mean, atol=1e-12)
    np.testing.assert_allclose(state["running_var"].numpy(), var, atol=1e-12)
    assert state["num_batches_tracked"].item() == 3
    layer.eval()
    x = R.standard_normal((2, 3, 2, 2))
    expected = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    np.testing.assert_allclose(layer(pargraph.tensor(x)).detach().numpy(), expected, atol=1e-12)
    assert layer.num_batches_tracked.item() == 3  # evaluation leaves the statistics alone


def test_batch_norm_errors_and_untracked_statistics():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(3)(pargraph.ones(1, 3))
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3, .*\): expected 2 or 3-D input with 3 "
                                         r"channels"):
        nn.BatchNorm1d(3)(pargraph.ones(4, 2))
    free = nn.BatchNorm1d(2, affine=False, track_running_stats=False).eval()
    assert free.running_mean is None and not list(free.parameters())
    x = R.standard_normal((5, 2))  # no running statistics: batch statistics even in eval
    np.testing.assert_allclose(free(pargraph.tensor(x)).numpy(),
                               (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), atol=1e-6)


def test_layer_norm_and_embedding_modules():
    layer = nn.LayerNorm([2, 3])
    assert layer.weight.shape == (2, 3) and layer.bias.shape == (2, 3)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[2, 3\], expected input with "
                                           r"shape \[\*, 2, 3\], but got input of size\[4, 3\]"):
        layer(pargraph.ones(4, 3))
    table = nn.Embedding(5, 3, padding_idx=-1)
    assert table.padding_idx == 4 and table.weight[4].tolist() == [0.0, 0.0, 0.0]
    table(pargraph.tensor([[4, 1], [1, 0]])).sum().backward()
    np.testing.assert_array_equal(table.weight.grad.numpy()[:, 0], [1.0, 2.0, 0.0, 0.0, 0.0])
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar"):
        table(pargraph.ones(2))
    with pytest.raises(NotImplementedError, match="embedding: sparse=True"):
        F.embedding(pargraph.tensor([0]), table.weight, sparse=True)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_multihead_attention_matches_a_numpy_reference_with_masks():
    mha = nn.MultiheadAttention(8, 2).double()  # sequence first, PyTorch's default
    x, y = R.standard_normal((5, 3, 8)), R.standard_normal((6, 3, 8))
    padding = np.zeros((3, 6), dtype=bool)
    padding[:, -2:] = True  # the last two keys of every sample are padding
    out, weights = mha(pargraph.tensor(x), pargraph.tensor(y), pargraph.tensor(y),
                       key_padding_mask=pargraph.tensor(padding))
    w, b = mha.in_proj_weight.detach().numpy(), mha.in_proj_bias.detach().numpy()
    q, k, v = (t.transpose(1, 0, 2) @ w[i * 8:(i + 1) * 8].T + b[i * 8:(i + 1) * 8]
               for i, t in enumerate((x, y, y)))
    heads, probs = [], []
    for h in range(2):
        part = slice(4 * h, 4 * h + 4)
        scores = q[..., part] @ k[..., part].transpose(0, 2, 1) / 2.0
        p = _softmax(np.where(padding[:, None, :], -np.inf, scores))
        heads.append(p @ v[..., part])
        probs.append(p)
    expected = np.concatenate(heads, -1) @ mha.out_proj.weight.detach().numpy().T
    expected = (expected + mha.out_proj.bias.detach().numpy()).transpose(1, 0, 2)
    np.testing.assert_allclose(out.detach().numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(weights.detach().numpy(), np.mean(probs, 0), atol=1e-12)
    assert np.all(weights.detach().numpy()[..., -2:] == 0)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(pargraph.tensor(x), pargraph.tensor(x), pargraph.tensor(x), is_causal=True)


def test_attention_heads_are_independent_branches_that_the_trace_sees_in_parallel():
    pargraph.manual_seed(0)
    mha = nn.MultiheadAttention(256, 4, batch_first=True)
    x = pargraph.randn(16, 64, 256)
    with pargraph.trace() as t:
        out, _ = mha(x, x, x, need_weights=False)
        out.sum().backward()
    softmaxes = [n for n in pargraph.graph.toposort([out._node]) if n.op.name == "softmax"]
    assert len(softmaxes) == 4
    for a in softmaxes:  # no head's softmax depends on another's
        ancestors = set(map(id, pargraph.graph.toposort([a])))
        assert not any(id(b) in ancestors for b in softmaxes if b is not a)
    assert {r.key for r in t.nodes() if r.op == "softmax"} == {n.key for n in softmaxes}


def test_transformer_encoder_layers_are_copies_and_train():
    pargraph.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2)
    first, second = encoder.layers[0].linear1.weight, encoder.layers[1].linear1.weight
    assert first is not second
    np.testing.assert_array_equal(first.detach().numpy(), second.detach().numpy())
    x, target = pargraph.randn(4, 3, 8), pargraph.randn(4, 3, 8)
    optimizer = pargraph.optim.Adam(encoder.parameters(), lr=0.01)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = F.mse_loss(encoder(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_selection_methods_check_their_input_like_pytorch():
    x = pargraph.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dim"):
        x.gather(1, pargraph.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"Size does not match at dimension 0 expected index "
                                           r"\[4, 1\] to be smaller than self \[3, 4\]"):
        x.gather(1, pargraph.zeros(4, 1, dtype=pargraph.int64))
    with pytest.raises(RuntimeError, match="Expected dtype int64 for index"):
        x.index_select(0, pargraph.tensor([0.0]))
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(5)
    with pytest.raises(RuntimeError, match="either add or multiply"):
        x.scatter(1, pargraph.tensor([[0]]), 2.0, reduce="max")
    values, indices = pargraph.tensor([1.0, 3.0, 1.0, 2.0]).sort(stable=True)
    assert indices.tolist() == [0, 2, 3, 1]  # ties keep their order
    one_hot = pargraph.zeros(2, 3).scatter_(1, pargraph.tensor([[2], [0]]), 1.0)
    assert one_hot.tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    counts = pargraph.zeros(3).scatter_add_(0, pargraph.tensor([0, 0, 2]), pargraph.ones(3))
    assert counts.tolist() == [2.0, 0.0, 1.0]
    assert pargraph.topk(pargraph.tensor([1.0, 4.0, 2.0]), 1).indices.tolist() == [1]


@pytest.mark.parametrize("options", [{"kdim": 6, "vdim": 4}, {"add_bias_kv": True},
                                     {"add_zero_attn": True, "kdim": 6, "vdim": 4},
                                     {"add_bias_kv": True, "add_zero_attn": True,
                                      "bias": False}])
def test_multihead_attention_options_equal_pytorchs(options):
    """Keys and values of their own sizes (separate projections), learned extra keys and
    values (``add_bias_kv``) and a zero one (``add_zero_attn``), with both masks: PyTorch's
    parameters, names and results, and its gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    query = rng.standard_normal((2, 5, 8))
    key = rng.standard_normal((2, 7, options.get("kdim", 8)))
    value = rng.standard_normal((2, 7, options.get("vdim", 8)))
    padding = np.zeros((2, 7), dtype=bool)
    padding[1, 5:] = True
    causal = np.triu(np.full((5, 7), -np.inf), 3)
    seen = []
    for library in (torch, pargraph):  # torch's parameters are loaded into pargraph's
        torch.manual_seed(0)
        mha = library.nn.MultiheadAttention(8, 2, batch_first=True, **options).double()
        if library is torch:
            state = {k: v.detach().numpy().copy() for k, v in mha.state_dict().items()}
        else:
            mha.load_state_dict({k: pargraph.tensor(v) for k, v in state.items()})
        inputs = [library.tensor(a, requires_grad=True) for a in (query, key, value)]
        out, weights = mha(*inputs, key_padding_mask=library.tensor(padding),
                           attn_mask=library.tensor(causal), average_attn_weights=False)
        (out * library.tensor(np.sin(np.arange(out.numel())).reshape(out.shape))).sum() \
            .backward()
        seen.append((out.detach().numpy(), weights.detach().numpy(),
                     [t.grad.numpy() for t in inputs],
                     [(n, tuple(p.shape)) for n, p in mha.named_parameters()]))
    assert seen[0][3] == seen[1][3]
    np.testing.assert_allclose(seen[0][0], seen[1][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(seen[0][1], seen[1][1], rtol=1e-10, atol=1e-12)
    for ours, theirs in zip(seen[0][2], seen[1][2]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,shape", [("max_pool1d", (1, 1, 9)), ("max_pool2d", (1, 1, 7, 7)),
                                        ("max_pool3d", (1, 1, 7, 7, 7))])
@pytest.mark.parametrize("padding,dilation", [(2, 2), (2, 1), (1, 3)])
def test_max_pooling_refuses_padding_over_half_its_kernel_as_pytorch_does(name, shape, padding,
                                                                          dilation):
    """PyTorch compares the padding with half the dilated kernel (2-d and 3-d), then with
    half the kernel itself, and says so in words of its own per dimension."""
    torch = pytest.importorskip("torch")
    outcomes = []
    for lib in (pargraph, torch):
        try:
            getattr(lib.nn.functional, name)(lib.ones(*shape), 3, padding=padding,
                                             dilation=dilation)
            outcomes.append("ok")
        except RuntimeError as error:
            outcomes.append(str(error))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("name", ["max_pool1d", "max_pool2d", "avg_pool2d", "conv1d", "conv2d",
                                  "conv_transpose2d"])
def test_an_empty_batch_passes_through_as_pytorchs(name):
    """No samples: PyTorch's shapes forward and back, on every path that reshapes planes."""
    torch = pytest.importorskip("torch")
    found = []
    for lib in (pargraph, torch):
        F = lib.nn.functional
        spatial = (7,) if name.endswith("1d") else (7, 7)
        x = lib.zeros(0, 2, *spatial, requires_grad=True)
        if name.startswith("conv"):
            y = getattr(F, name)(x, lib.ones(2, 2, *(3,) * len(spatial), requires_grad=True))
        else:
            y = getattr(F, name)(x, 2)
        y.sum().backward()
        found.append((tuple(y.shape), tuple(x.grad.shape)))
    assert found[0] == found[1]
