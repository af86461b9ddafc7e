"""``pargraph.backends``: PyTorch's backend flags, which programs set before training. None of
them changes what pargraph computes (there is no cuDNN, CUDA, MPS or TF32 here); they keep
their values so that programs that read them back see what they set."""

from __future__ import annotations


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


cudnn = CudnnFlags()
cuda = CudaFlags()
mps = Unavailable()
mkldnn = Unavailable()
openmp = Unavailable()
