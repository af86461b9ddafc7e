"""``pargraph.version``: what PyTorch programs read from ``torch.version`` (no CUDA here)."""

__version__ = "0.1.0"
#: The CUDA version pargraph was built with: none, it runs on the CPU.
cuda = None
hip = None
debug = False
