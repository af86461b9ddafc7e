"""``torch.nn.modules.adaptive``: the same layer, from pargraph."""

from pargraph.nn import AdaptiveLogSoftmaxWithLoss  # noqa: F401
