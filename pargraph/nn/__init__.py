"""``pargraph.nn``: modules, layers, losses, ``functional`` and ``init``, with PyTorch's names."""

from pargraph.nn import functional, init, utils
from pargraph.nn.activation import (
    CELU,
    ELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    RReLU,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from pargraph.nn.attention import (
    MultiheadAttention,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from pargraph.nn.conv import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    MaxPool1d,
    MaxPool2d,
)
from pargraph.nn.distance import CosineSimilarity, PairwiseDistance
from pargraph.nn.layers import (
    DataParallel,
    Dropout,
    Flatten,
    Identity,
    LeakyReLU,
    Linear,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from pargraph.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelSoftMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from pargraph.nn.module import Module, Parameter
from pargraph.nn.normalization import GELU, BatchNorm1d, BatchNorm2d, Embedding, LayerNorm
from pargraph.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase

__all__ = [
    "Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Softmax", "Dropout", "Flatten",
    "Identity", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss", "BCELoss",
    "BCEWithLogitsLoss", "CrossEntropyLoss", "NLLLoss", "SmoothL1Loss", "functional", "init",
    "DataParallel", "LeakyReLU", "SiLU", "Softplus", "LogSoftmax", "utils", "Conv1d", "Conv2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "GELU", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "Embedding", "MultiheadAttention",
    "TransformerEncoderLayer", "TransformerEncoder", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell",
    "GRUCell", "RNNBase", "RNNCellBase", "CELU", "ELU", "GLU", "SELU", "Hardshrink",
    "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "Mish", "PReLU", "ReLU6", "RReLU",
    "Softmin", "Softshrink", "Softsign", "Tanhshrink", "Threshold", "CosineSimilarity",
    "PairwiseDistance", "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss",
    "HuberLoss", "KLDivLoss", "MarginRankingLoss", "MultiLabelSoftMarginLoss", "PoissonNLLLoss",
    "SoftMarginLoss", "TripletMarginLoss",
]
