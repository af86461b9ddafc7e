"""pargraph: train neural networks by running their computational graphs as dask task graphs.

PyTorch-style tensors record a graph; ``backward()`` extends it with gradient nodes; dask runs
forward and backward together, independent branches at the same time.
"""

import numpy as np

from pargraph import (
    accelerator,
    amp,
    autograd,
    backends,
    cuda,
    distributions,
    func,
    jit,
    library,
    linalg,
    nn,
    onnx,
    optim,
    profiler,
    pytree,
    random,
    sparse,
    special,
    testing,
    utils,
    version,
)
from pargraph import dtypes as _dtypes
from pargraph._tensor import (
    Size,
    Tensor,
    bfloat16,
    float16,
    float32,
    float64,
    int32,
    int64,
)
from pargraph._tensor import bool_ as bool  # noqa: A001  (PyTorch's name for the dtype)
from pargraph.amp import (
    autocast,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from pargraph.autograd import (
    enable_grad,
    inference_mode,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from pargraph.backends import (
    are_deterministic_algorithms_enabled,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from pargraph.compiler import GraphBreak, compile  # noqa: A004  (PyTorch's name)
from pargraph.context import context
from pargraph.devices import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    device,
    layout,
    memory_format,
    preserve_format,
    set_default_device,
    sparse_coo,
    strided,
)
from pargraph.engine.modes import worker_threads
from pargraph.engine.threads import (
    get_num_interop_threads,
    get_num_threads,
    set_num_interop_threads,
    set_num_threads,
)
from pargraph.factories import (
    Generator,
    arange,
    as_tensor,
    bartlett_window,
    blackman_window,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_rng_state,
    hamming_window,
    hann_window,
    initial_seed,
    kaiser_window,
    linspace,
    logspace,
    manual_seed,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    seed,
    set_rng_state,
    tensor,
    tril_indices,
    triu_indices,
    zeros,
    zeros_like,
)
from pargraph.forecast import Forecast, forecast
from pargraph.functions import (
    METHOD_FUNCTIONS,
    allclose,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    bernoulli,
    bincount,
    binomial,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    bucketize,
    cartesian_prod,
    cat,
    cdist,
    chain_matmul,
    clip,
    column_stack,
    combinations,
    compute,
    concat,
    concatenate,
    cumulative_trapezoid,
    dstack,
    einsum,
    expand_copy,
    gradient,
    histogram,
    hstack,
    is_tensor,
    isin,
    logical_not,
    meshgrid,
    method_functions,
    pdist,
    poisson,
    polygamma,
    searchsorted,
    stack,
    take,
    tensordot,
    trapezoid,
    vander,
    vstack,
    where,
)
from pargraph.legacy import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from pargraph.linalg import lu_unpack
from pargraph.printing import set_printoptions
from pargraph.remote.connect import connect
from pargraph.remote.dashboard import dashboard
from pargraph.remote.recovery import ClusterLostError
from pargraph.serialization import CheckpointError, load, save
from pargraph.sparse import SparseTensor, sparse_coo_tensor, spmm
from pargraph.torch_alias import alias_torch
from pargraph.trace import Trace, trace
from pargraph.type_info import (
    can_cast,
    finfo,
    get_default_dtype,
    iinfo,
    promote_types,
    result_type,
    set_default_dtype,
)
from pargraph.viz import progress, visualize

__version__ = version.__version__
# PyTorch programs use ``torch.autograd.profiler.record_function``: the profiler, there too.
autograd.profiler = profiler

float = float32  # noqa: A001
double = float64
long = int64
half = float16
int = int32  # noqa: A001
int8, int16, uint8 = (_dtypes.dtype(t) for t in (np.int8, np.int16, np.uint8))
short = int16
complex64, complex128 = _dtypes.dtype(np.complex64), _dtypes.dtype(np.complex128)
cfloat, cdouble = complex64, complex128
dtype = _dtypes.dtype

globals().update(method_functions)  # pargraph.exp(x), pargraph.sum(x, dim), ...

#: The ``nn.functional`` functions PyTorch also has as ``torch.<name>`` with the same leading
#: arguments (not the losses, whose ``torch.*`` forms take an integer reduction, nor
#: ``batch_norm``/``embedding``/``instance_norm``, whose argument orders differ there).
FUNCTIONAL_AT_TOP = (
    "adaptive_avg_pool1d", "avg_pool1d", "celu", "conv1d", "conv2d", "conv_transpose1d",
    "conv_transpose2d", "cosine_similarity", "dropout", "group_norm", "hardshrink",
    "layer_norm", "max_pool1d", "max_pool2d", "pairwise_distance", "pixel_shuffle",
    "pixel_unshuffle", "prelu", "rms_norm", "rrelu", "selu", "threshold",
)
globals().update({name: getattr(nn.functional, name) for name in FUNCTIONAL_AT_TOP})
trapz = trapezoid  # PyTorch's older name

__all__ = [
    "alias_torch",
    "Tensor", "autograd", "nn", "optim", "utils", "save", "load", "CheckpointError", "compute",
    "ClusterLostError", "trace", "Trace", "forecast", "Forecast",
    "visualize", "progress", "worker_threads", "connect", "tensor", "context",
    "as_tensor", "from_numpy", "zeros", "ones", "full",
    "arange", "linspace", "logspace", "tril_indices", "triu_indices", "meshgrid",
    "cartesian_prod", "cdist", "searchsorted", "bucketize", "polygamma", "eye", "rand",
    "randn", "randint", "zeros_like", "ones_like",
    "full_like", "rand_like", "randn_like", "manual_seed", "cat", "stack", "where", "float32",
    "float64", "int64", "bool", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "is_inference_mode_enabled", "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "Size", "float16", "bfloat16", "int32", "half", "int", "device",
    "set_default_device", "memory_format", "layout", "strided", "contiguous_format",
    "channels_last", "channels_last_3d", "preserve_format", "cuda", "distributions",
    "accelerator", "linalg", "random", "is_tensor",
    "allclose", "Generator",
    "einsum", "randperm", "compile", "GraphBreak", "library", "profiler", "version", "special",
    "sparse", "sparse_coo", "sparse_coo_tensor", "spmm", "SparseTensor",
    "testing",
    "empty", "empty_like",
    "clip", "get_default_dtype", "set_default_dtype", "finfo", "iinfo", "hstack", "vstack", "take",
    "tensordot",
    "logical_not", "int8", "int16", "uint8", "short", "dtype", "complex64", "complex128",
    "cfloat", "cdouble", "dashboard", "normal",
    "randint_like", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor",
    "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor", "set_printoptions", "bernoulli",
    "broadcast_shapes", "broadcast_tensors", "expand_copy", "amp", "autocast", "backends",
    "is_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype", "is_autocast_cpu_enabled",
    "get_autocast_cpu_dtype", "set_autocast_enabled", "is_autocast_cache_enabled",
    "set_autocast_cache_enabled", "clear_autocast_cache",
    "onnx", "get_num_threads", "set_num_threads", "get_num_interop_threads",
    "set_num_interop_threads", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "initial_seed", "seed", "get_rng_state",
    "set_rng_state", "hann_window", "hamming_window", "bartlett_window", "blackman_window",
    "kaiser_window", "func", "jit", "pytree", "atleast_1d", "atleast_2d", "atleast_3d",
    "column_stack", "dstack", "block_diag", "bincount", "histogram", "trapezoid", "trapz",
    "cumulative_trapezoid", "gradient", "combinations", "pdist", "vander", "chain_matmul",
    "promote_types", "result_type", "can_cast", "isin", "lu_unpack", "concat", "concatenate",
    "binomial", "poisson", *FUNCTIONAL_AT_TOP,
    *METHOD_FUNCTIONS,
]

# Last: what importing made lives as long as the process (see CollectorPause).
context.execution.collector.freeze_imports()
