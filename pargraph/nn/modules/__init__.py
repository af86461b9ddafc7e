"""``pargraph.nn.modules``: PyTorch's ``torch.nn.modules`` paths (``.linear``, ``.loss``,
``.conv``, ...) to pargraph's layers, for programs that import from them."""

from pargraph.nn import *  # noqa: F403  (PyTorch's torch.nn.modules holds every layer)
from pargraph.nn.modules import (  # noqa: F401
    activation,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    lazy,
    linear,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
)
