"""Ctrl-C at each point where Python could raise one: a real SIGINT sent at the n-th such point
a piece of code passes, for n = 1, 2, ... in turn, so that no landing point is left to chance.

CPython runs a signal's handler only at a few instructions: as a function starts (or resumes
after ``yield``), right after a call returns, and at a loop's backward jump. :class:`CtrlCAt`
follows the code with an opcode-level trace function and sends SIGINT there. A handler that
runs inside the trace function sees the same thread state (the exception being handled, the
frames below) as one that runs at that instruction.
"""

import dis
import signal
import sys

#: Instructions after which Python looks for signals (3.11: the call family and backward jumps).
_CHECKED_AFTER = {dis.opmap[name] for name in ("CALL", "CALL_FUNCTION_EX", "JUMP_BACKWARD",
                                               "CALL_FUNCTION", "CALL_METHOD", "JUMP_ABSOLUTE")
                  if name in dis.opmap}
_HANDLER_START = dis.opmap.get("PUSH_EXC_INFO")


class CtrlCAt:
    """Sends SIGINT at the ``n``-th signal check point after :meth:`arm` (armed at once unless
    ``armed=False``), counting in every frame the trace reaches; ``sent`` says whether the run
    got that far. A context manager: the trace is on inside the block."""

    def __init__(self, n: int, armed: bool = True) -> None:
        self.n, self.points, self.armed, self.sent = n, 0, armed, False
        self.where = None
        self._last: dict = {}

    def arm(self) -> None:
        self.armed = True

    def _point(self, frame) -> None:
        if self.armed and not self.sent:
            self.points += 1
            if self.points == self.n:
                self.sent = True
                self.where = (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
                signal.raise_signal(signal.SIGINT)

    def trace(self, frame, event, arg):
        if event == "call":
            frame.f_trace_opcodes = True
            self._last[id(frame)] = None
            self._point(frame)  # RESUME: a function starting, or a generator after yield
        elif event == "opcode":
            key, opcode = id(frame), frame.f_code.co_code[frame.f_lasti]
            if self._last.get(key) in _CHECKED_AFTER and opcode != _HANDLER_START:
                self._point(frame)  # (at a handler's start, the call raised: no check)
            self._last[key] = opcode
        elif event == "return":
            self._last.pop(id(frame), None)
        return self.trace

    def __enter__(self):
        sys.settrace(self.trace)
        sys._getframe(1).f_trace = None
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
