"""nn: every layer and loss against a numpy formula; Module registration and state dicts."""

import math

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.graph import toposort
from pargraph.nn import functional as F
from pargraph.nn import init

R = np.random.default_rng(5)


def t(array, grad=False):
    return pargraph.tensor(np.asarray(array, dtype=np.float64), requires_grad=grad)


def test_linear_matches_formula_and_default_init():
    pargraph.manual_seed(0)
    layer = nn.Linear(20, 7)
    bound = 1 / math.sqrt(20)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert w.shape == (7, 20) and b.shape == (7,) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound  # spread over the whole range, not clustered
    x = R.standard_normal((4, 20)).astype(np.float32)
    np.testing.assert_allclose(layer(pargraph.tensor(x)).detach().numpy(), x @ w.T + b,
                               rtol=1e-5)
    assert nn.Linear(3, 2, bias=False).bias is None
    assert [n for n, _ in nn.Linear(3, 2, bias=False).named_parameters()] == ["weight"]


def test_linear_gradients():
    layer = nn.Linear(3, 2)
    x = t(R.standard_normal((4, 3)), grad=True)
    w = t(layer.weight.detach().numpy(), grad=True)
    b = t(layer.bias.detach().numpy(), grad=True)
    assert pargraph.autograd.gradcheck(F.linear, (x, w, b))


def test_linear_names_the_layer_and_both_sizes_on_bad_input():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=8, out_features=2, bias=True\) "
                                           r"at '2': expected input with last dimension 8 "
                                           r"\(in_features\), got input of shape "
                                           r"pargraph.Size\(\[5, 7\]\)"):
        model[2](pargraph.ones(5, 7))


@pytest.mark.parametrize("module, ref", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.Flatten(), lambda x: x.reshape(len(x), -1)),
    (nn.Identity(), lambda x: x),
])
def test_activation_layers(module, ref):
    x = R.standard_normal((3, 4))
    np.testing.assert_allclose(module(t(x)).numpy(), ref(x), rtol=1e-12)


def test_dropout_is_seeded_scaled_and_off_in_eval():
    layer = nn.Dropout(0.25)
    x = pargraph.ones(1000)
    pargraph.manual_seed(3)
    first = layer(x).numpy()
    pargraph.manual_seed(3)
    assert np.array_equal(layer(x).numpy(), first)
    assert set(np.unique(first)) == {0.0, np.float32(1 / 0.75)}
    assert 0.2 < (first == 0).mean() < 0.3
    layer.eval()
    assert layer(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def _log_softmax(x):
    shifted = x - x.max(1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(1, keepdims=True))


@pytest.mark.parametrize("reduction, reduce", [
    ("mean", np.mean), ("sum", np.sum), ("none", lambda v: v),
])
def test_losses_match_formulas(reduction, reduce):
    x = R.standard_normal((6, 4))
    y = R.standard_normal((6, 4))
    p = R.uniform(0.05, 0.95, (6, 4))
    target01 = (R.random((6, 4)) > 0.5).astype(float)
    labels = R.integers(0, 4, 6)
    sig = 1 / (1 + np.exp(-x))
    cases = [
        (nn.MSELoss(reduction), (t(x), t(y)), (x - y) ** 2),
        (nn.L1Loss(reduction), (t(x), t(y)), np.abs(x - y)),
        (nn.BCELoss(reduction=reduction), (t(p), t(target01)),
         -(target01 * np.log(p) + (1 - target01) * np.log(1 - p))),
        (nn.BCEWithLogitsLoss(reduction=reduction), (t(x), t(target01)),
         -(target01 * np.log(sig) + (1 - target01) * np.log(1 - sig))),
        (nn.CrossEntropyLoss(reduction=reduction), (t(x), pargraph.tensor(labels)),
         -_log_softmax(x)[np.arange(6), labels]),
        (nn.NLLLoss(reduction=reduction), (t(x), pargraph.tensor(labels)),
         -x[np.arange(6), labels]),
    ]
    for loss, args, expected in cases:
        np.testing.assert_allclose(loss(*args).numpy(), reduce(expected), rtol=1e-10,
                                   err_msg=type(loss).__name__)


def test_loss_gradients():
    labels = pargraph.tensor(R.integers(0, 3, 5))
    target = t((R.random((5, 3)) > 0.5).astype(float))
    x = t(R.standard_normal((5, 3)), grad=True)
    assert pargraph.autograd.gradcheck(lambda z: F.cross_entropy(z, labels), (x,))
    assert pargraph.autograd.gradcheck(lambda z: F.binary_cross_entropy_with_logits(z, target),
                                       (x,))
    assert pargraph.autograd.gradcheck(lambda z: F.binary_cross_entropy(z.sigmoid(), target),
                                       (x,))



def _smoothed_cross_entropy(x, labels, weight, ignore_index, smoothing, reduction):
    """PyTorch's formula, one sample at a time."""
    log_p, classes = _log_softmax(x), x.shape[1]
    nll, smooth, total_weight = [], [], 0.0
    for row, label in enumerate(labels):
        if label == ignore_index:
            nll.append(0.0)
            smooth.append(0.0)
            continue
        nll.append(-weight[label] * log_p[row, label])
        smooth.append(-(weight * log_p[row]).sum())
        total_weight += weight[label]
    nll, smooth = np.array(nll), np.array(smooth)
    if reduction == "mean":
        nll, smooth = nll.sum() / total_weight, smooth.sum() / total_weight
    elif reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    return (1 - smoothing) * nll + smoothing / classes * smooth


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_takes_weight_ignore_index_and_label_smoothing(reduction, smoothing):
    x, weight = R.standard_normal((6, 4)), R.uniform(0.5, 2.0, 4)
    labels = np.array([0, 3, -100, 1, 3, 2])
    loss = nn.CrossEntropyLoss(t(weight), reduction=reduction, label_smoothing=smoothing)
    np.testing.assert_allclose(
        loss(t(x), pargraph.tensor(labels)).numpy(),
        _smoothed_cross_entropy(x, labels, weight, -100, smoothing, reduction), rtol=1e-10)
    assert pargraph.autograd.gradcheck(
        lambda z: F.cross_entropy(z, pargraph.tensor(labels), t(weight), ignore_index=-100,
                                  reduction=reduction, label_smoothing=smoothing),
        (t(x, grad=True),))



def test_cross_entropy_backward_is_one_node_with_the_pairs_exact_gradient():
    x = R.standard_normal((6, 4))
    labels, weight = pargraph.tensor([0, 3, -100, 1, 3, 2]), t(R.uniform(0.5, 2.0, 4))
    fused = t(x, grad=True)
    F.cross_entropy(fused, labels, weight).backward()
    backward_ops = {node.op.name for node in toposort([fused.grad._node])}  # not run yet
    assert "nll_log_softmax_backward" in backward_ops
    assert not {"nll_loss_backward", "log_softmax_backward"} & backward_ops
    pair = t(x, grad=True)  # a differentiable gradient records nll_loss's and log_softmax's
    gradient, = pargraph.autograd.grad(F.cross_entropy(pair, labels, weight), [pair],
                                       create_graph=True)
    assert gradient.grad_fn.name() == "LogSoftmaxBackwardBackward0"
    np.testing.assert_array_equal(fused.grad.numpy(), gradient.detach().numpy())


def _assert_each_block_reads_itself(blocks, whole):
    """Each block's gradient (recorded, not run yet) reads that block and no other, and the
    blocks' gradients are the whole's, bit for bit."""
    for block in blocks:
        read = {id(n) for n in toposort([block.grad._node])}
        other, = [b for b in blocks if b is not block]
        assert id(other._node) not in read and id(block._node) in read
    np.testing.assert_array_equal(np.concatenate([b.grad.numpy() for b in blocks]),
                                  whole.grad.numpy())


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_of_row_blocks_has_each_blocks_gradient_from_its_own_logits(reduction):
    """DataParallel's logits are a cat of its shards'. Each shard's gradient is computed from
    that shard's logits and the whole target (for the mean's divisor): the same numbers as
    the whole batch's gradient, row by row, with no node reading the other shards."""
    x = R.standard_normal((7, 4))
    labels, weight = pargraph.tensor([0, 3, -100, 1, 3, 2, 2]), t(R.uniform(0.5, 2.0, 4))
    whole = t(x, grad=True)
    F.cross_entropy(whole, labels, weight, reduction=reduction).backward()
    blocks = [t(x[:3], grad=True), t(x[3:], grad=True)]
    loss = F.cross_entropy(pargraph.cat(blocks), labels, weight, reduction=reduction)
    loss.backward()
    _assert_each_block_reads_itself(blocks, whole)
    np.testing.assert_allclose(loss.item(), F.cross_entropy(t(x), labels, weight,
                                                            reduction=reduction).item())


@pytest.mark.parametrize("loss", ["mse", "l1", "relu then sum"])
def test_an_elementwise_loss_of_row_blocks_has_each_blocks_gradient_from_its_own_rows(loss):
    """The slice of a concatenation's gradient is computed from the concatenated part it
    comes from, through elementwise ops: with DataParallel and an elementwise loss each
    shard's backward reads that shard (and slices of the target), never the other shards."""
    x, target = R.standard_normal((7, 4)), t(R.standard_normal((7, 4)))

    def loss_of(z):
        if loss == "mse":
            return F.mse_loss(z, target)
        if loss == "l1":
            return F.l1_loss(z, target, reduction="sum")
        return ((z - target).relu() * 3.0).sum()

    whole = t(x, grad=True)
    loss_of(whole).backward()
    blocks = [t(x[:3], grad=True), t(x[3:], grad=True)]
    loss_of(pargraph.cat(blocks)).backward()
    _assert_each_block_reads_itself(blocks, whole)


def test_gradients_through_concatenations_along_any_dimension():
    a, b = t(R.standard_normal((3, 2)), grad=True), t(R.standard_normal((3, 4)), grad=True)
    w = t(R.standard_normal((3, 6)))
    assert pargraph.autograd.gradcheck(
        lambda a, b: ((pargraph.cat([a, b], dim=1) * w).tanh() - w).relu().sum(), (a, b))
    assert pargraph.autograd.gradcheck(
        lambda a, b: (pargraph.cat([a, b[:, 1:3]], dim=0).exp() * 2.0).sum(), (a, b))


def test_nll_loss_ignores_targets_and_weighs_classes_like_pytorch():
    log_p, weight = _log_softmax(R.standard_normal((5, 3))), np.array([0.5, 2.0, 1.5])
    labels = np.array([2, 1, 1, 0, 2])
    loss = nn.NLLLoss(weight=t(weight), ignore_index=1)
    kept = labels != 1
    expected = -(weight[labels] * log_p[np.arange(5), labels])[kept].sum() / \
        weight[labels][kept].sum()
    np.testing.assert_allclose(loss(t(log_p), pargraph.tensor(labels)).numpy(), expected,
                               rtol=1e-10)
    assert "weight" in loss.state_dict()  # a buffer, as in PyTorch
    every_target_ignored = F.nll_loss(t(log_p), pargraph.tensor(np.full(5, -100)))
    assert np.isnan(every_target_ignored.item())  # 0 / 0, as in PyTorch
    legacy = F.nll_loss(t(log_p), pargraph.tensor(labels), reduce=False)
    np.testing.assert_allclose(legacy.numpy(), -log_p[np.arange(5), labels], rtol=1e-12)


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_takes_class_probabilities(smoothing):
    x, weight = R.standard_normal((5, 3)), np.array([0.5, 2.0, 1.5])
    probabilities = R.dirichlet(np.ones(3), 5)
    smoothed = probabilities * (1 - smoothing) + smoothing / 3
    expected = -(_log_softmax(x) * smoothed * weight).sum(1).mean()
    loss = F.cross_entropy(t(x), t(probabilities), t(weight), label_smoothing=smoothing)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-10)
    assert pargraph.autograd.gradcheck(
        lambda z: F.cross_entropy(z, t(probabilities), label_smoothing=smoothing),
        (t(x, grad=True),))

def test_bce_with_logits_is_stable_for_large_logits():
    loss = F.binary_cross_entropy_with_logits(pargraph.tensor([1000.0, -1000.0]),
                                              pargraph.tensor([0.0, 1.0]), reduction="none")
    assert loss.tolist() == [1000.0, 1000.0]


def test_cross_entropy_rejects_out_of_range_classes():
    with pytest.raises(IndexError, match=r"cross_entropy: target 5 is out of bounds for 3 "
                                         r"classes \(expected class indices in \[0, 2\] or "
                                         r"ignore_index -100\)"):
        F.cross_entropy(pargraph.zeros(2, 3), pargraph.tensor([0, 5]))
    with pytest.raises(IndexError, match="target -100 is out of bounds"):
        F.cross_entropy(pargraph.zeros(2, 3), pargraph.tensor([0, -100]), ignore_index=1)
    with pytest.raises(RuntimeError, match=r"nll_loss: weight tensor should be defined either "
                                           r"for all 3 classes or no classes but got weight "
                                           r"tensor of shape \[2\]"):
        F.nll_loss(pargraph.zeros(2, 3), pargraph.tensor([0, 1]), pargraph.ones(2))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(pargraph.zeros(2, 3), pargraph.tensor([0, 1]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got "
                       "Float"):
        F.cross_entropy(pargraph.zeros(2, 3), pargraph.zeros(2))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target "
                       r"batch_size \(3\)"):
        F.cross_entropy(pargraph.zeros(2, 3), pargraph.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.mse_loss(pargraph.zeros(2), pargraph.zeros(2), reduction="avg")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.heads = nn.ModuleList([nn.Linear(4, 2), nn.Linear(4, 1)])
        self.blocks = nn.ModuleDict({"out": nn.Sequential(nn.Linear(3, 3), nn.Tanh())})
        self.scale = nn.Parameter(pargraph.ones(1))
        self.register_buffer("steps", pargraph.zeros(1))

    def forward(self, x):
        h = self.act(self.layer1(x))
        return self.heads[0](h).sum() + self.heads[1](h).sum() + self.blocks["out"](x).sum()


def test_module_registration_and_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "layer1.weight", "layer1.bias", "heads.0.weight", "heads.0.bias",
        "heads.1.weight", "heads.1.bias", "blocks.out.0.weight", "blocks.out.0.bias"]
    assert [type(m).__name__ for m in net.children()] == ["Linear", "ReLU", "ModuleList",
                                                           "ModuleDict"]
    assert len(list(net.modules())) == 10  # net, layer1, act, heads (+2), blocks, out (+2)
    # PyTorch's order: a module's own parameters and buffers, then its children's
    assert list(net.state_dict())[:3] == ["scale", "steps", "layer1.weight"]
    assert net.heads[1].path() == "heads.1"



def test_ops_are_scoped_by_the_modules_path_also_after_it_moves_into_a_model():
    layer = nn.Linear(3, 2)
    assert layer(pargraph.ones(1, 3))._node.scope == "Linear"
    model = nn.Sequential(nn.ReLU(), layer)  # the layer's path changes: its scope follows
    assert layer(pargraph.ones(1, 3))._node.scope == "1 (Linear)"
    outer = nn.ModuleDict({"body": model})  # so does a path above the layer's parent
    assert outer["body"](pargraph.ones(1, 3))._node.scope == "body.1 (Linear)"

def test_shared_parameters_are_listed_once():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, shared)
    assert len(list(model.parameters())) == 2


def test_train_eval_and_zero_grad():
    net = Net()
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net(pargraph.ones(2, 3)).backward()
    assert all(p.grad is not None for p in net.parameters() if p is not net.scale)
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip_with_tensors_and_numpy():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert np.array_equal(pa.detach().numpy(), pb.detach().numpy()), name
    c = Net()
    c.load_state_dict({k: v.numpy() for k, v in a.state_dict().items()})
    assert np.array_equal(c.layer1.weight.detach().numpy(), a.layer1.weight.detach().numpy())
    assert c.layer1.weight.requires_grad and c.layer1.weight.is_leaf


def test_load_state_dict_errors_name_the_key():
    net = Net()
    state = net.state_dict()
    del state["layer1.bias"]
    state["extra.weight"] = pargraph.ones(1)
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "layer1.bias"'):
        net.load_state_dict(state)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra.weight"'):
        net.load_state_dict(state)
    missing, unexpected = net.load_state_dict(state, strict=False)
    assert missing == ["layer1.bias"] and unexpected == ["extra.weight"]
    bad = net.state_dict()
    bad["heads.0.weight"] = pargraph.ones(3, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for heads.0.weight: copying a param "
                                           r"with shape pargraph.Size\(\[3, 3\]\) from "
                                           r"checkpoint, the shape in current model is "
                                           r"pargraph.Size\(\[2, 4\]\)"):
        net.load_state_dict(bad)


def test_containers():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2
    assert head(pargraph.ones(4, 2)).shape == (4, 3)
    assert seq(pargraph.ones(4, 2)).shape == (4, 1)
    layers = nn.ModuleList([nn.ReLU()]).extend([nn.Tanh()])
    assert len(layers) == 2 and len(layers[:1]) == 1
    blocks = nn.ModuleDict({"a": nn.ReLU()})
    blocks["b"] = nn.Linear(1, 1)
    assert "b" in blocks and list(blocks) == ["a", "b"] and len(list(blocks.parameters())) == 2


def test_repr_like_pytorch():
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=64, out_features=128, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        ")")
    assert repr(nn.Parameter(pargraph.zeros(1))) == ("Parameter containing:\n"
                                                      "tensor([0.], requires_grad=True)")


def test_init_functions():
    pargraph.manual_seed(0)
    w = nn.Parameter(pargraph.zeros(300, 200))
    init.xavier_uniform_(w)
    bound = math.sqrt(6 / 500)
    values = w.detach().numpy()
    assert np.abs(values).max() <= bound and values.std() == pytest.approx(bound / math.sqrt(3),
                                                                           rel=0.05)
    init.kaiming_uniform_(w, nonlinearity="relu")
    assert np.abs(w.detach().numpy()).max() <= math.sqrt(2) * math.sqrt(3 / 200)
    init.normal_(w, mean=2.0, std=0.5)
    assert w.detach().numpy().mean() == pytest.approx(2.0, abs=0.01)
    init.uniform_(w, -0.1, 0.1)
    assert np.abs(w.detach().numpy()).max() <= 0.1
    assert init.zeros_(w).detach().numpy().sum() == 0
    assert init.ones_(w).detach().numpy().mean() == 1
    assert w.requires_grad and w.is_leaf


def test_nodes_point_at_the_users_lines_through_layers_of_modules():
    """pargraph's own layers record the user's line that called the outermost of them; a
    user's forward records its own lines, even inside a Sequential."""
    class Scale(nn.Module):
        def forward(self, x):
            return x * 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3), Scale())

        def forward(self, x):
            return self.body(x).sum()

    net = Net()
    out = net(pargraph.ones(2, 3))
    nodes = {n.op.name: n for n in pargraph.graph.toposort([out._node])}
    forward_line = Net.forward.__code__.co_firstlineno + 1
    scale_line = Scale.forward.__code__.co_firstlineno + 1
    assert nodes["linear"].site[1] == forward_line  # the user's line calling the Sequential
    assert nodes["mul"].site[1] == scale_line and nodes["sum"].site[1] == forward_line


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
