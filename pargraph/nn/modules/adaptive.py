"""``AdaptiveLogSoftmaxWithLoss``."""

from __future__ import annotations

import itertools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module
from pargraph.nn.modules.container import ModuleList, Sequential
from pargraph.nn.modules.linear import Linear

#: What the module returns: each example's log-probability of its target, and the mean loss.
ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """PyTorch's adaptive softmax: ``cutoffs`` split the classes (sorted by frequency) into a
    shortlist the head scores directly and clusters scored by tail projections of size
    ``in_features // div_value ** (i + 1)``. ``forward(input, target)`` returns
    ``(output, loss)``; ``log_prob(input)`` the full log-distribution, ``predict(input)`` the
    likeliest class. Which rows go to which cluster depends on the targets' values: in a
    compiled step, a graph break, as in PyTorch.

    Examples
    --------
    >>> import pargraph
    >>> asm = pargraph.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])
    >>> out = asm(pargraph.randn(3, 8), pargraph.tensor([1, 5, 9]))
    >>> tuple(out.output.shape), out.loss.shape
    ((3,), pargraph.Size([]))
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Sequence[int],
                 div_value: float = 4.0, head_bias: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self) -> None:
        """Initialize the head and the tails again, as ``__init__`` did."""
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> ASMoutput:
        targ_dim = target_.dim()
        if targ_dim == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError("1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        elif targ_dim == 0:
            if input_.dim() != 1:
                raise RuntimeError("0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        used_rows = 0
        batch_size = target.size(0)
        output = input.new_zeros(batch_size)
        gather_inds = target.new_zeros(batch_size)
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            mask = (target >= low) & (target < high)
            rows = mask.nonzero().squeeze(-1)
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds = gather_inds.index_copy(0, rows, target[mask])
            else:
                relative = target[mask] - low
                cluster_output = self.tail[i - 1](input.index_select(0, rows))
                gather_inds = gather_inds.index_fill(0, rows, self.shortlist_size + i - 1)
                local = F.log_softmax(cluster_output, dim=1).gather(1, relative.unsqueeze(1))
                output = output.index_copy(0, rows, local.squeeze(1))
            used_rows += rows.numel()
        if used_rows != batch_size:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{target.min().item()}, "
                               f"{target.max().item()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, _ in enumerate(itertools.pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob
                         + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        from pargraph.functions import cat

        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probability of every class, ``(N, n_classes)``.

        Examples
        --------
        >>> import pargraph
        >>> asm = pargraph.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])
        >>> round(asm.log_prob(pargraph.randn(2, 8)).exp().sum(1)[0].item(), 4)
        1.0
        """
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The likeliest class of each example (``log_prob(input).argmax(1)``).

        Examples
        --------
        >>> import pargraph
        >>> asm = pargraph.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4])
        >>> tuple(asm.predict(pargraph.randn(3, 8)).shape)
        (3,)
        """
        return self.log_prob(input).argmax(dim=1)
