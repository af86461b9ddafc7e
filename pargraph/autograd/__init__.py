"""``pargraph.autograd``: everything about gradients, in one layer.

- :mod:`~pargraph.autograd.mode` — grad mode: ``no_grad``, ``enable_grad``,
  ``set_grad_enabled``, ``inference_mode`` (the per-thread flag they switch lives with the
  other recording context in :mod:`pargraph.graph`, where ops read it);
- :mod:`~pargraph.autograd.backward_graph` — the backward graph: vjp nodes, ``add_n`` fan-in
  nodes, templates reused for a forward structure seen before;
- :mod:`~pargraph.autograd.engine` — the driver: seeds, ``.grad`` accumulation, deferring the
  run (``Tensor.backward`` and the functions call it);
- :mod:`~pargraph.autograd.functional` — ``backward``, ``grad``, ``gradcheck`` and
  ``gradgradcheck``;
- :mod:`~pargraph.autograd.function` — ``Function``: a user's op with its own backward;
- :mod:`~pargraph.autograd.graph` — PyTorch's saved-tensor hooks (``save_on_cpu``).
"""

from pargraph.autograd import graph
from pargraph.autograd.anomaly import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from pargraph.autograd.function import Function, FunctionCtx, once_differentiable
from pargraph.autograd.functional import (
    GradcheckError,
    Variable,
    backward,
    grad,
    gradcheck,
    gradgradcheck,
)
from pargraph.autograd.mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

__all__ = ["graph", "backward", "grad", "gradcheck", "gradgradcheck", "GradcheckError", "no_grad",
           "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "Function", "FunctionCtx",
           "once_differentiable", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "Variable"]
