"""What a compiled step's capture saw, as data: the call's argument guards, grad mode and
autocast, the modules it called and their constants, the numbers and tensors it read, and what
it wrote (tensors rebound, ``.grad``, optimizers' state, buffers, module attributes).
:class:`~pargraph.compiler.capture.Capture` fills it while the call runs; the guards, the
writes and the program read it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

from pargraph import amp
from pargraph._tensor import Tensor
from pargraph.capturing import Symbol, SymbolTable
from pargraph.graph import Node, grad_mode
from pargraph.nn.module import Module


class Compiling(Protocol):
    """What a capture asks of what is compiled (a function, or a module's forward)."""

    fn: Callable[..., Any]
    fullgraph: bool


class Record:
    """What one capturing call saw (see the module's docstring)."""

    def __init__(self, compiled: Compiling) -> None:
        self.compiled = compiled
        self.symbols = SymbolTable()
        self.readers: dict[Any, Callable[[], Any]] = {}  # symbol leaf key -> its reader
        self.sharing: dict[tuple, list[Tensor]] = {}  # a state number's key -> its parameters
        self.argument_guards: list[tuple] = []
        self.queued: list[Node] = []  # realize() targets, run at the end
        self.state_nodes: list[Node] = []  # what is training state (copied on a cluster)
        self.rebinds: dict[int, tuple[Tensor, Node]] = {}  # id -> (tensor, node before)
        self.grads: dict[int, tuple[Tensor, Tensor | None, Node | None]] = {}
        #: Nodes recorded with symbols among their inputs or attributes, which they keep
        #: while the capture lasts (a vjp reading them makes symbolic nodes in turn).
        self.symbolic: dict[int, Node] = {}
        self.draws: dict[int, tuple[Node, Callable]] = {}
        self.modules: dict[int, tuple[Module, bool]] = {}
        #: The plain attributes of the modules called (``negative_slope``, ``momentum``, a
        #: Dropout's ``p``), as the call began: the capture holds them as constants.
        self.module_constants: dict[int, tuple[Module, dict]] = {}
        self.buffers: dict[tuple[int, str], tuple[Module, str, Tensor | None]] = {}
        #: Tensors the call set as plain module attributes (a pruning hook's ``weight``, a
        #: kept activation), with what was there (``guards.ABSENT``: nothing).
        self.module_attributes: dict[tuple[int, str], tuple[Module, str, Any]] = {}
        self.optimizers: dict[int, OptimizerRecord] = {}
        self.grad_mode = grad_mode.enabled
        self.autocast = amp.state.cpu
        self.argument_nodes: dict[int, int] = {}  # an argument's node id -> its position
        self.mark = 0  # node uids from here on were made by the call
        #: The arguments' nesting (``pytree.flatten``'s spec: containers, dict keys, a
        #: sparse tensor's size), set as the call starts.
        self.argument_spec: Any = None


class OptimizerRecord:
    """What a capture learned of one optimizer: the state it reads (by parameter and name)
    and writes, the numbers of its state a replay sets, which parameters had gradients."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.version = optimizer._state_version
        self.settings = settings_of(optimizer)
        self.before = (defaultdict(dict, optimizer.state), optimizer._step_count)
        self.stepped = 0
        self.reads: dict[int, tuple[Node, Tensor, str]] = {}
        self.writes: dict[tuple[int, str], tuple[Tensor, str]] = {}
        self.scalars: list[tuple[Tensor, str, Symbol]] = []
        self.grads: dict[int, bool] = {}

    def restore(self) -> None:
        """The optimizer as it was before the capture stepped it."""
        optimizer = self.optimizer
        optimizer.state, optimizer._step_count = self.before
        optimizer._state_version = self.version

    def settle(self) -> None:
        """The capture has ended and cannot be rolled back: the tensors the optimizer held
        before take the new state, as an eager step's commit does (a program holding
        ``state[p]["exp_avg"]``, or a loaded state dict's tensors, sees it); then drop the
        state from before it and the nodes it read, which would otherwise keep a second copy
        of the optimizer's state alive for as long as the program."""
        optimizer, before = self.optimizer, self.before[0]
        for p, new in list(optimizer.state.items()):
            old = before.get(p)
            if old is not None and old is not new:
                optimizer.state[p] = old
                optimizer._commit_state(p, new, True)
        self.before = None
        self.reads = {}


def settings_of(optimizer: Any) -> list:
    """The values of an optimizer's groups that decide which formulas a step records
    (``nesterov``, ``amsgrad``, ``maximize``...): a capture holds them as they were, where
    it reads its numbers (``lr``) anew at each call."""
    return [[(name, value) for name, value in group.items()
             if value is None or type(value) in (bool, str)] for group in optimizer.param_groups]
