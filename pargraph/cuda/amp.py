"""``torch.cuda.amp``'s path to :mod:`pargraph.amp` (``GradScaler``, ``autocast``)."""

from typing import Any

from pargraph import amp
from pargraph.amp import GradScaler, custom_bwd, custom_fwd
from pargraph.ops import HALF


class autocast(amp.autocast):  # noqa: N801  (PyTorch's name)
    """``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)``: ``autocast("cuda")``,
    which warns and does nothing without CUDA."""

    def __init__(self, enabled: bool = True, dtype: Any = HALF,
                 cache_enabled: bool = True) -> None:
        super().__init__("cuda", dtype, enabled, cache_enabled)


__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]
