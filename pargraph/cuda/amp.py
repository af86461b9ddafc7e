"""``torch.cuda.amp``'s path to :mod:`pargraph.amp` (``GradScaler``, ``autocast``)."""

from pargraph.amp import GradScaler, autocast, custom_bwd, custom_fwd

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]
