"""Loss modules: thin wrappers over ``pargraph.nn.functional``."""

from __future__ import annotations

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.module import Module


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """Mean squared error.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.MSELoss()(pargraph.tensor([2.0]), pargraph.tensor([0.0]))
    tensor(4.)
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """Mean absolute error.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.L1Loss()(pargraph.tensor([2.0]), pargraph.tensor([0.0]))
    tensor(2.)
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 (Huber-like) loss with threshold ``beta``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.SmoothL1Loss()(pargraph.tensor([3.0]), pargraph.tensor([0.0]))
    tensor(2.5000)
    """

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities.

    Examples
    --------
    >>> import pargraph
    >>> round(pargraph.nn.BCELoss()(pargraph.tensor([0.5]), pargraph.tensor([0.0])).item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (stable).

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.BCEWithLogitsLoss()(pargraph.zeros(1), pargraph.ones(1))
    >>> round(loss.item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.reduction)


class _ClassLoss(_Loss):
    """A loss over class indices: per-class ``weight`` (a buffer, as in PyTorch) and an
    ``ignore_index`` whose targets count for nothing."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index


class CrossEntropyLoss(_ClassLoss):
    """Cross-entropy of logits against class indices or class probabilities.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.CrossEntropyLoss()(pargraph.zeros(2, 4), pargraph.tensor([0, 3]))
    >>> round(loss.item(), 4)
    1.3863
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_ClassLoss):
    """Negative log-likelihood of class indices, given log-probabilities.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.NLLLoss()(pargraph.tensor([[-0.5, -1.5]]), pargraph.tensor([1]))
    tensor(1.5000)
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)
