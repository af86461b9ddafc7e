"""pargraph: train neural networks by running their computational graphs as dask task graphs.

PyTorch-style tensors record a graph; ``backward()`` extends it with gradient nodes; dask runs
forward and backward together, independent branches at the same time.
"""

from pargraph import autograd, nn, optim, utils
from pargraph._tensor import (
    Tensor,
    arange,
    as_tensor,
    cat,
    compute,
    connect,
    eye,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    int64,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    stack,
    tensor,
    where,
    worker_threads,
    zeros,
    zeros_like,
)
from pargraph._tensor import bool_ as bool  # noqa: A001  (PyTorch's name for the dtype)
from pargraph.autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from pargraph.execution import ClusterLostError
from pargraph.serialization import CheckpointError, load, save
from pargraph.trace import Trace, trace
from pargraph.viz import progress, visualize

__version__ = "0.1.0"

float = float32  # noqa: A001
double = float64
long = int64


def _method_function(name: str):
    def function(input: Tensor, *args, **kwargs):
        return getattr(as_tensor(input), name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"Function form of :meth:`Tensor.{name}`: ``pargraph.{name}(x, ...)`` is "
        f"``x.{name}(...)``.\n\n"
        "Examples\n--------\n>>> import pargraph\n"
        f">>> pargraph.{name} is not None\nTrue\n"
    )
    return function


_METHODS = (
    "exp log sqrt abs sin cos tanh sigmoid relu sign clamp maximum minimum sum mean prod max min "
    "amax amin argmax argmin var std softmax log_softmax logsumexp matmul reshape flatten "
    "transpose permute squeeze unsqueeze split chunk add sub mul div pow neg eq ne lt le gt ge "
    "detach clone numel"
).split()
for _name in _METHODS:
    globals()[_name] = _method_function(_name)
del _name

__all__ = [
    "Tensor", "autograd", "nn", "optim", "utils", "save", "load", "CheckpointError", "compute",
    "ClusterLostError", "trace", "Trace",
    "visualize", "progress", "worker_threads", "connect", "tensor",
    "as_tensor", "from_numpy", "zeros", "ones", "full",
    "arange", "linspace", "eye", "rand", "randn", "randint", "zeros_like", "ones_like",
    "full_like", "rand_like", "randn_like", "manual_seed", "cat", "stack", "where", "float32",
    "float64", "int64", "bool", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", *_METHODS,
]
