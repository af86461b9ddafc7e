"""``DataParallel``: a module's batch split into shards, each a branch of the graph (on a
cluster, on its own worker)."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.engine.modes import worker_threads
from pargraph.functions import cat
from pargraph.nn.module import Module


class DataParallel(Module):
    """Run ``module`` on shards of the batch as independent branches of one graph.

    The inputs are split along their first dimension into ``shards`` pieces (by default one per
    worker thread of the cluster, or of the local threaded scheduler); each shard's forward and
    backward pass is its own branch, and each parameter's gradient is accumulated at its fan-in
    across the shards. Outputs are concatenated, so losses and gradients equal those of the
    whole batch. Parameter names get the ``module.`` prefix, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> model = pargraph.nn.DataParallel(pargraph.nn.Linear(3, 2), shards=2)
    >>> model(pargraph.ones(8, 3)).shape
    pargraph.Size([8, 2])
    >>> [name for name, _ in model.named_parameters()]
    ['module.weight', 'module.bias']
    """

    def __init__(self, module: Module, shards: int | None = None) -> None:
        super().__init__()
        if shards is not None and shards < 1:
            raise ValueError(f"DataParallel: shards must be at least 1, got {shards}")
        self.module = module
        self.shards = shards

    def forward(self, *inputs: Tensor) -> Tensor:
        if not inputs or not inputs[0].shape:
            raise ValueError("DataParallel: expected inputs with a batch dimension")
        batch = inputs[0].shape[0]
        shards = min(self.shards or worker_threads(), batch)
        if shards <= 1:
            return self.module(*inputs)
        pieces = [x.chunk(shards) if isinstance(x, Tensor) else [x] * shards for x in inputs]
        return cat([self.module(*args) for args in zip(*pieces)])

    def extra_repr(self) -> str:
        return f"shards={self.shards or 'auto'}"
