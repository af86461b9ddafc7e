"""Sparse COO tensors (pargraph.sparse) against PyTorch: construction, coalescing, dense and
sparse forms, and products with dense matrices, values and gradients on generated cases; a
graph convolutional network written for PyTorch trains the same through python -m pargraph."""

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pargraph

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _cases(count=12):
    """Generated sparse matrices: 1-9 rows and columns, nnz from none to more than the
    matrix holds (duplicates), float32 and float64, and a dense operand of 1-5 columns."""
    rng = np.random.default_rng(11)
    for k in range(count):
        n, m = (int(v) for v in rng.integers(1, 10, 2))
        nnz = int(rng.choice([0, 1, 3, n * m + 2]))
        indices = np.stack([rng.integers(0, n, nnz), rng.integers(0, m, nnz)]).astype(np.int64)
        dtype = np.float32 if k % 2 else np.float64
        values = rng.standard_normal(nnz).astype(dtype)
        dense = rng.standard_normal((m, int(rng.integers(1, 6)))).astype(dtype)
        yield indices, values, (n, m), dense


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: f"{c[2]}-nnz{c[0].shape[1]}")
def test_sparse_products_and_forms_equal_pytorch(case):
    indices, values, size, dense = case
    found = []
    for lib in (pargraph, torch):
        v = lib.tensor(values, requires_grad=True)
        d = lib.tensor(dense, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(indices), v, size)
        product = lib.sparse.mm(s, d)
        (product * product.tanh()).sum().backward()
        c = s.coalesce()
        found.append([product.detach().numpy(), v.grad.numpy(), d.grad.numpy(),
                      s.to_dense().detach().numpy(), c.indices().numpy(),
                      c.values().detach().numpy(), np.array(c._nnz()),
                      lib.spmm(s, d).detach().numpy(), (s @ d).detach().numpy(),
                      s.t().to_dense().detach().numpy(),
                      lib.sparse.sum(s).detach().numpy()])
    tolerance = 1e-5 if values.dtype == np.float32 else 1e-12
    for ours, theirs in zip(*found):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("shape,sparse_dim", [((3, 4), None), ((2, 3, 2), 2), ((4,), None),
                                              ((2, 2), 1)])
def test_to_sparse_of_a_dense_tensor_equals_pytorch_and_passes_gradients(shape, sparse_dim):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape) * (rng.random(shape) < 0.5)
    found = []
    for lib in (pargraph, torch):
        t = lib.tensor(x, requires_grad=True)
        s = t.to_sparse() if sparse_dim is None else t.to_sparse(sparse_dim)
        (s.values() * s.values()).sum().backward()
        coo = t.to_sparse_coo() if sparse_dim is None else s
        found.append([s.indices().numpy(), s.values().detach().numpy(), t.grad.numpy(),
                      np.array(s.is_sparse), np.array(s.sparse_dim()),
                      coo.to_dense().detach().numpy()])
    for ours, theirs in zip(*found):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_bad_sparse_input_raises_as_pytorch_does():
    """An index out of the size is refused at once (PyTorch checks it with
    ``check_invariants=True``; pargraph always does, with PyTorch's message)."""
    for lib in (pargraph, torch):
        with pytest.raises(RuntimeError, match="size is inconsistent with indices: for dim 0, "
                                               "size is 3 but found index 3"):
            lib.sparse_coo_tensor(lib.tensor([[0, 3]]), lib.tensor([1.0, 2.0]), (3,),
                                  check_invariants=True)
        with pytest.raises(RuntimeError, match=r"len\(size\) = 1, sparse_dim = 2, "
                                               r"dense_dim = 0"):
            lib.sparse_coo_tensor(lib.tensor([[0, 1], [1, 0]]), lib.tensor([1.0, 2.0]), (2,))
        s = lib.sparse_coo_tensor(lib.tensor([[0, 0], [1, 1]]), lib.tensor([1.0, 2.0]), (2, 2))
        with pytest.raises(RuntimeError, match="uncoalesced"):
            s.indices()
        with pytest.raises(RuntimeError):  # shapes that do not multiply
            lib.sparse.mm(s, lib.ones(3, 1, dtype=lib.float32))


GCN = """
import math
import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


def sparse_mx_to_torch_sparse_tensor(sparse_mx):  # as pygcn's utils.py writes it
    sparse_mx = sparse_mx.tocoo().astype(np.float32)
    indices = torch.from_numpy(np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data)
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, rng):
        super().__init__()
        stdv = 1.0 / math.sqrt(out_features)
        self.weight = nn.Parameter(torch.from_numpy(
            rng.uniform(-stdv, stdv, (in_features, out_features)).astype(np.float32)))
        self.bias = nn.Parameter(torch.from_numpy(
            rng.uniform(-stdv, stdv, out_features).astype(np.float32)))

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        return torch.spmm(adj, support) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, rng):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid, rng)
        self.gc2 = GraphConvolution(nhid, nclass, rng)

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        return F.log_softmax(self.gc2(x, adj), dim=1)


rng = np.random.default_rng(0)
nodes, classes = 60, 3
labels_np = rng.integers(0, classes, nodes)
features_np = (rng.random((nodes, 12)) + np.eye(classes)[labels_np] @ rng.random((classes, 12)))
edges = rng.integers(0, nodes, (2, 150))
adj = sp.coo_matrix((np.ones(150), (edges[0], edges[1])), shape=(nodes, nodes))
adj = adj + adj.T + sp.eye(nodes)
adj = sp.diags(1.0 / np.asarray(adj.sum(1)).ravel()) @ adj  # row-normalized, as pygcn
adj = sparse_mx_to_torch_sparse_tensor(adj)
features = torch.FloatTensor(features_np.astype(np.float32))
labels = torch.LongTensor(labels_np)
model = GCN(12, 16, classes, rng)
optimizer = optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
for epoch in range(30):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss = F.nll_loss(output, labels)
    loss.backward()
    optimizer.step()
print(f"{loss.item():.6f}", adj.is_sparse, adj._nnz())
"""


def test_a_pytorch_graph_convolutional_network_trains_the_same_through_pargraph(tmp_path):
    (tmp_path / "gcn.py").write_text(textwrap.dedent(GCN))
    runs = {}
    for how in (["-m", "pargraph", "gcn.py"], ["gcn.py"]):
        done = subprocess.run([sys.executable, *how], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        runs[how[0]] = done.stdout.split()
    ours, theirs = runs["-m"], runs["gcn.py"]
    assert ours[1:] == theirs[1:] == ["True", theirs[2]]
    assert abs(float(ours[0]) - float(theirs[0])) < 1e-4, (ours, theirs)
    assert float(ours[0]) < 0.9  # it learned (log 3 = 1.10 at chance)


def test_a_compiled_step_binds_each_calls_sparse_argument():
    """A sparse argument is its indices and values, bound anew at each call of a compiled
    step (another matrix of the same nnz replays with its own numbers); another size or nnz
    is another structure or shape, a new capture."""
    w = pargraph.nn.Parameter(pargraph.ones(3, 2))
    opt = pargraph.optim.SGD([w], lr=0.1)

    def train(adj, x):
        opt.zero_grad()
        loss = pargraph.sparse.mm(adj, x @ w).square().mean()
        loss.backward()
        opt.step()
        return loss

    step = pargraph.compile(train)
    rng = np.random.default_rng(4)
    x = pargraph.tensor(rng.standard_normal((3, 3)).astype(np.float32))
    # the first matrix twice (the first call captures without a .grad, the second with
    # one), then another of the same nnz and size, then one of another nnz and one of
    # another size
    matrices = [([[0, 1], [1, 2]], [1.0, 2.0], (3, 3))] * 2 + [
        ([[2, 0], [0, 1]], [3.0, -1.0], (3, 3)), ([[0, 1, 2], [1, 2, 0]], [5.0, 5.0, 5.0], (3, 3)),
        ([[0, 3], [1, 2]], [1.0, 2.0], (4, 3))]
    eager_w = pargraph.nn.Parameter(pargraph.ones(3, 2))
    replayed = []
    for indices, values, size in matrices:
        adj = pargraph.sparse_coo_tensor(indices, values, size)
        before = step.replays
        loss = step(adj, x)
        replayed.append(step.replays - before)
        expected = pargraph.sparse.mm(adj, x @ eager_w).square().mean()
        expected.backward()
        with pargraph.no_grad():
            eager_w -= 0.1 * eager_w.grad
        eager_w.grad = None
        assert abs(loss.item() - expected.item()) < 1e-5
    np.testing.assert_allclose(w.detach().numpy(), eager_w.detach().numpy(), rtol=1e-5)
    assert replayed == [0, 0, 1, 0, 0]  # the third matrix replayed with its own numbers


class Holder:
    """An object a checkpoint can only pickle (a module-level class, so pickle finds it)."""


def test_a_sparse_tensor_stays_sparse_through_pickle_deepcopy_and_checkpoints(tmp_path):
    """Copies and checkpoints keep the indices, values, size and coalescing (a dense tensor
    came back before), and the values' requires_grad."""
    import copy
    import pickle

    values = pargraph.tensor([2.0, 3.0, 4.0], requires_grad=True)
    s = pargraph.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], values, (2, 3))
    pargraph.save({"adj": s, "coalesced": s.coalesce()}, tmp_path / "graph.pt")
    loaded = pargraph.load(tmp_path / "graph.pt")

    holder = Holder()
    holder.adj = s
    pargraph.save(holder, tmp_path / "holder.pt")  # the pickled form of a checkpoint
    copies = {"pickle": pickle.loads(pickle.dumps(s)), "deepcopy": copy.deepcopy(s),
              "save": loaded["adj"],
              "pickled save": pargraph.load(tmp_path / "holder.pt", weights_only=False).adj}
    for how, copied in copies.items():
        assert copied.is_sparse and copied.layout is pargraph.sparse_coo, how
        assert tuple(copied.shape) == (2, 3) and copied._nnz() == 3, how
        np.testing.assert_array_equal(copied.to_dense().detach().numpy(),
                                      s.to_dense().detach().numpy())
    assert copies["pickle"].requires_grad and copies["deepcopy"].requires_grad
    assert loaded["coalesced"].is_coalesced()
    np.testing.assert_array_equal(loaded["coalesced"].indices().numpy(), [[0, 1, 1], [2, 0, 2]])
