"""``pargraph.backends``: PyTorch's backend flags, which programs set before training. None of
them changes what pargraph computes (there is no cuDNN, CUDA, MPS or TF32 here); they keep
their values so that programs that read them back see what they set."""

from __future__ import annotations

import warnings

from pargraph.context import context


class CudnnFlags:
    """``torch.backends.cudnn``: ``enabled``, ``benchmark``, ``deterministic``,
    ``allow_tf32`` are kept and have no effect; cuDNN is not available."""

    def __init__(self) -> None:
        self.enabled, self.benchmark, self.deterministic, self.allow_tf32 = True, False, False, \
            True

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def version() -> None:
        return None


class MatmulFlags:
    """``torch.backends.cuda.matmul``: ``allow_tf32`` and the reduced-precision flags, kept
    and without effect."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


class CudaFlags:
    """``torch.backends.cuda``: ``matmul`` flags; CUDA is not built."""

    def __init__(self) -> None:
        self.matmul = MatmulFlags()

    @staticmethod
    def is_built() -> bool:
        return False


class Unavailable:
    """A backend that is not here (``mps``, ``mkldnn``, ``openmp``...): ``is_available()``
    and ``is_built()`` are False."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


cudnn = context.register("cudnn_flags", CudnnFlags())
cuda = context.register("cuda_flags", CudaFlags())
mps = Unavailable()
mkldnn = Unavailable()
openmp = Unavailable()


class GlobalFlags:
    """PyTorch's process-wide numeric settings (``torch.set_float32_matmul_precision``,
    ``torch.use_deterministic_algorithms``): kept and read back. pargraph's float32 matrix
    products are always at full precision, which every setting allows, and every op it has
    gives the same bits on every run with the same thread counts."""

    def __init__(self) -> None:
        self.matmul_precision = "highest"
        self.deterministic = False
        self.warn_only = False


flags = context.register("backend_flags", GlobalFlags())
PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Keep ``precision`` (``"highest"``, ``"high"`` or ``"medium"``), as PyTorch does; an
    unknown one warns and changes nothing. pargraph computes at full precision whatever it is.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.set_float32_matmul_precision("high")
    >>> pargraph.get_float32_matmul_precision()
    'high'
    >>> pargraph.set_float32_matmul_precision("highest")
    """
    if precision not in PRECISIONS:
        # PyTorch's words, its missing space included.
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    flags.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The precision :func:`set_float32_matmul_precision` kept (``"highest"`` by default).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.get_float32_matmul_precision() in ("highest", "high", "medium")
    True
    """
    return flags.matmul_precision


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Keep the flag, as PyTorch does. On the CPU, every op pargraph has gives the same bits
    on every run with the same thread counts (a fan-in sums in a fixed order, and a run's BLAS
    threads come from its shapes, see ``modes.BlasThreads``), so no op refuses to run.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.use_deterministic_algorithms(True)
    >>> pargraph.are_deterministic_algorithms_enabled()
    True
    >>> pargraph.use_deterministic_algorithms(False)
    """
    for name, value, position in (("mode", mode, "position 1"), ("warn_only", warn_only, "")):
        if type(value) is not bool:
            where = f" ({position})" if position else ""
            raise TypeError(f"use_deterministic_algorithms(): argument '{name}'{where} must be "
                            f"bool, not {type(value).__name__}")
    flags.deterministic, flags.warn_only = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was last called with ``True``.

    Examples
    --------
    >>> import pargraph
    >>> pargraph.are_deterministic_algorithms_enabled() in (True, False)
    True
    """
    return flags.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was last called with ``warn_only=True``
    (kept whatever ``mode`` was, as PyTorch keeps it).

    Examples
    --------
    >>> import pargraph
    >>> pargraph.is_deterministic_algorithms_warn_only_enabled() in (True, False)
    True
    """
    return flags.warn_only
