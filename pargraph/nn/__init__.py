"""``pargraph.nn``: modules, layers, losses, ``functional`` and ``init``, with PyTorch's names."""

from pargraph.nn import functional, init
from pargraph.nn.layers import (
    DataParallel,
    Dropout,
    Flatten,
    Identity,
    Linear,
    ModuleDict,
    ModuleList,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from pargraph.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from pargraph.nn.module import Module, Parameter

__all__ = [
    "Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Softmax", "Dropout", "Flatten",
    "Identity", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss", "BCELoss",
    "BCEWithLogitsLoss", "CrossEntropyLoss", "NLLLoss", "SmoothL1Loss", "functional", "init",
    "DataParallel",
]
