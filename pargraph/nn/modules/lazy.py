"""``torch.nn.modules.lazy``: the lazy modules' mixin, from pargraph."""

from pargraph.nn.lazy import LazyModuleMixin  # noqa: F401
