"""Loss layers, one per ``torch.nn.functional`` loss."""

from __future__ import annotations

import warnings

from pargraph._tensor import Tensor
from pargraph.nn import functional as F
from pargraph.nn.functional.loss import _legacy_reduction
from pargraph.nn.module import Module


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or "
                             f"'none', got {reduction!r}")
        self.reduction = reduction


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

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction))
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (stable), with PyTorch's ``weight`` and ``pos_weight``.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.BCEWithLogitsLoss()(pargraph.zeros(1), pargraph.ones(1))
    >>> round(loss.item(), 4)
    0.6931
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction))
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class _ClassLoss(_Loss):
    """A loss over class indices: per-class ``weight`` (a buffer, as in PyTorch) and an
    ``ignore_index`` whose targets count for nothing."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction))
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


class NLLLoss2d(NLLLoss):
    """:class:`NLLLoss` under its old name, deprecated as in PyTorch (it warns once made).

    Examples
    --------
    >>> import pargraph, warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     loss = pargraph.nn.NLLLoss2d()
    >>> loss(pargraph.tensor([[-0.5, -1.5]]), pargraph.tensor([1]))
    tensor(1.5000)
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None,
                 ignore_index: int = -100, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a "
                      "drop-in replacement and see https://pytorch.org/docs/main/nn.html"
                      "#torch.nn.NLLLoss for more details.", FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class _Configured(_Loss):
    """A loss whose functional form takes the module's ``options`` as keywords."""

    options: tuple[str, ...] = ()

    def __init__(self, reduction: str = "mean", **options) -> None:
        super().__init__("mean" if reduction == "batchmean" else reduction)
        self.reduction = reduction
        for name in self.options:
            setattr(self, name, options[name])

    def _keywords(self) -> dict:
        return {name: getattr(self, name) for name in self.options}


class KLDivLoss(_Configured):
    """:func:`~pargraph.nn.functional.kl_div` as a module.

    Examples
    --------
    >>> import pargraph
    >>> p = pargraph.tensor([[0.5, 0.5]])
    >>> pargraph.nn.KLDivLoss(reduction="batchmean")(p.log(), p).item()
    0.0
    """

    options = ("log_target",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction),
                         log_target=log_target)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, **self._keywords())


class HuberLoss(_Configured):
    """:func:`~pargraph.nn.functional.huber_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.HuberLoss()(pargraph.tensor([3.0]), pargraph.zeros(1)).item()
    2.5
    """

    options = ("delta",)

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction, delta=delta)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, self.reduction, **self._keywords())


class SoftMarginLoss(_Configured):
    """:func:`~pargraph.nn.functional.soft_margin_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> round(pargraph.nn.SoftMarginLoss()(pargraph.zeros(1), pargraph.ones(1)).item(), 4)
    0.6931
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, self.reduction)


class HingeEmbeddingLoss(_Configured):
    """:func:`~pargraph.nn.functional.hinge_embedding_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.HingeEmbeddingLoss()(pargraph.tensor([2.0]), pargraph.tensor([-1.0])).item()
    0.0
    """

    options = ("margin",)

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction), margin=margin)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, reduction=self.reduction,
                                      **self._keywords())


class MultiLabelSoftMarginLoss(_Configured):
    """:func:`~pargraph.nn.functional.multilabel_soft_margin_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.MultiLabelSoftMarginLoss()(pargraph.zeros(1, 2), pargraph.ones(1, 2))
    >>> round(loss.item(), 4)
    0.6931
    """

    options = ("weight",)

    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction), weight=weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, reduction=self.reduction,
                                             **self._keywords())


class MarginRankingLoss(_Configured):
    """:func:`~pargraph.nn.functional.margin_ranking_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> one = pargraph.ones(1)
    >>> pargraph.nn.MarginRankingLoss(margin=0.5)(one, one, one).item()
    0.5
    """

    options = ("margin",)

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction), margin=margin)

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, reduction=self.reduction,
                                     **self._keywords())


class CosineEmbeddingLoss(_Configured):
    """:func:`~pargraph.nn.functional.cosine_embedding_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> x = pargraph.ones(1, 2)
    >>> pargraph.nn.CosineEmbeddingLoss()(x, x, pargraph.tensor([1.0])).item()
    0.0
    """

    options = ("margin",)

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction), margin=margin)

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, reduction=self.reduction,
                                       **self._keywords())


class TripletMarginLoss(_Configured):
    """:func:`~pargraph.nn.functional.triplet_margin_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> a = pargraph.zeros(1, 2)
    >>> round(pargraph.nn.TripletMarginLoss()(a, a, a + 3).item(), 4)
    0.0
    """

    options = ("margin", "p", "eps", "swap")

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction), margin=margin,
                         p=p, eps=eps, swap=swap)

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, reduction=self.reduction,
                                     **self._keywords())


class PoissonNLLLoss(_Configured):
    """:func:`~pargraph.nn.functional.poisson_nll_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.PoissonNLLLoss()(pargraph.zeros(1), pargraph.zeros(1)).item()
    1.0
    """

    options = ("log_input", "full", "eps")

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None,
                 eps: float = 1e-8, reduce=None, reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction),
                         log_input=log_input, full=full, eps=eps)

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, reduction=self.reduction,
                                  **self._keywords())


class GaussianNLLLoss(_Configured):
    """:func:`~pargraph.nn.functional.gaussian_nll_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.nn.GaussianNLLLoss()(pargraph.zeros(2), pargraph.zeros(2), pargraph.ones(2)).item()
    0.0
    """

    options = ("full", "eps")

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(reduction, full=full, eps=eps)

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, reduction=self.reduction,
                                   **self._keywords())


class MultiMarginLoss(_Configured):
    """:func:`~pargraph.nn.functional.multi_margin_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.MultiMarginLoss()
    >>> loss(pargraph.tensor([[0.1, 0.2, 0.4, 0.8]]), pargraph.tensor([3])).item()
    0.32499998807907104
    """

    options = ("p", "margin")

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        super().__init__(_legacy_reduction(size_average, reduce, reduction), p=p,
                         margin=margin)
        self.register_buffer("weight", weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, weight=self.weight, reduction=self.reduction,
                                   **self._keywords())


class MultiLabelMarginLoss(_Loss):
    """:func:`~pargraph.nn.functional.multilabel_margin_loss` as a module.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.MultiLabelMarginLoss()
    >>> loss(pargraph.tensor([[0.1, 0.2, 0.4, 0.8]]), pargraph.tensor([[3, 0, -1, 1]])).item()
    0.8500000238418579
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(_legacy_reduction(size_average, reduce, reduction))

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """:func:`~pargraph.nn.functional.triplet_margin_with_distance_loss` as a module (the
    default distance is a :class:`~pargraph.nn.PairwiseDistance` submodule, as PyTorch's).

    Examples
    --------
    >>> import pargraph
    >>> a = pargraph.zeros(1, 2)
    >>> pargraph.nn.TripletMarginWithDistanceLoss()(a, a, a + 3).item()
    0.0
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        from pargraph.nn.modules.distance import PairwiseDistance

        self.distance_function = distance_function if distance_function is not None \
            else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """The connectionist temporal classification loss (``F.ctc_loss``): a sequence model's
    log probabilities against label sequences without an alignment.

    Examples
    --------
    >>> import pargraph
    >>> loss = pargraph.nn.CTCLoss(reduction="sum")
    >>> round(loss(pargraph.zeros(3, 1, 2).log_softmax(2), pargraph.tensor([[1]]), (3,),
    ...            (1,)).item(), 4)
    0.2877
    """

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Tensor,
                target_lengths: Tensor) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
