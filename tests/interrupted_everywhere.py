"""A Ctrl-C at every point of a training step where Python could raise one, one run per point:
after each, parameters and optimizer state must be all old or all new, the ``.grad`` tensors all
set or all unset, grad mode on, the recording context, the SIGINT handler and the GIL switch
interval as before. Run by
tests/test_interrupts.py in a process of its own (with a stride: every k-th point); prints one
JSON line.

Usage: python interrupted_everywhere.py MODE SCHEDULER [STRIDE [PROGRAM]]

MODE is eager, capture (a compiled step's capturing calls: its first two, the second seeing
Adam's state), replay (a compiled step's replays) or save (``pargraph.save`` over a checkpoint:
the old or the new one must be there, no temporary file, and a ``KeyboardInterrupt`` out of it);
SCHEDULER is sync, threads, threads-split (the step as many tasks, run on pargraph's threads)
or distributed (an in-process cluster). PROGRAM is mlp-adam (an MLP
trained by Adam) or bn-sgd (with BatchNorm, SGD with Nesterov momentum and weight decay;
compiled only: an eager step changes buffers in its forward and parameters in ``opt.step()``,
two statements).
"""

import json
import os
import signal
import sys
import tempfile

import dask
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pargraph  # noqa: E402
from pargraph import graph, nn, optim  # noqa: E402
from tests.ctrl_c import CtrlCAt  # noqa: E402

signal.signal(signal.SIGINT, signal.default_int_handler)
MODE, SCHEDULER = sys.argv[1], sys.argv[2]
STRIDE = int(sys.argv[3]) if len(sys.argv) > 3 else 1
PROGRAM = sys.argv[4] if len(sys.argv) > 4 else "mlp-adam"
if PROGRAM == "bn-sgd" and MODE == "eager":  # its forward changes buffers, its step parameters
    sys.exit("bn-sgd runs compiled: an eager step changes its state in several statements")
if SCHEDULER == "distributed":  # an in-process cluster: one worker of two threads
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                           dashboard_address=None, worker_dashboard_address="127.0.0.1:0",
                           scheduler_kwargs={"dashboard_address": "127.0.0.1:0",
                                             "dashboard": False})
    dask.config.set(scheduler=Client(cluster, set_as_default=False))
elif SCHEDULER == "threads-split":  # the small step as many tasks, on pargraph's threads
    dask.config.set({"scheduler": "threads", "pargraph.single-task-below": 0,
                     "pargraph.task-grain": 0, "pargraph.adaptive": "threads"})
else:
    dask.config.set(scheduler=SCHEDULER)
x, y = pargraph.ones(5, 3), pargraph.zeros(5, 2)


def make():
    pargraph.manual_seed(0)
    if PROGRAM == "bn-sgd":  # more state: buffers, momentum buffers
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                        weight_decay=1e-3)
    else:
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        opt = optim.Adam(model.parameters(), lr=0.1)

    def train_step():
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    state = (model, opt)
    return state, pargraph.compile(train_step) if MODE != "eager" else train_step


def snapshot(state):
    """Everything the step changes, flat: the model's parameters and buffers, the optimizer's
    state and hyperparameters."""
    model, opt = state
    return _flat([model.state_dict(), opt.state_dict()])


def _flat(value):
    if isinstance(value, pargraph.Tensor):
        return [value.detach().numpy().copy()]
    if isinstance(value, dict):
        return [part for k in sorted(value, key=str) for part in [k, *_flat(value[k])]]
    if isinstance(value, (list, tuple)):
        return [part for v in value for part in _flat(v)]
    return [value]


def same(a, b):
    return len(a) == len(b) and all(
        np.array_equal(u, v) if isinstance(u, np.ndarray) or isinstance(v, np.ndarray)
        else u == v for u, v in zip(a, b))


def main() -> None:
    ref_state, ref_step = make()
    reference = [snapshot(ref_state)]

    def expected(j):  # the state after j uninterrupted steps
        while len(reference) <= j:
            ref_step()
            reference.append(snapshot(ref_state))
        return reference[j]

    report = {"points": 0, "runs": 0, "interrupted": 0, "torn": [], "grad_mode_off": [],
              "context_left": [], "grads_torn": [], "handler_left": [], "interval_left": []}
    interval = sys.getswitchinterval()  # a run on threads lowers it while it runs
    state, step = make()
    model = state[0]
    at = 2 if MODE == "replay" else 0  # the number of steps the state has taken
    for _ in range(at):
        step()
    n = 1
    while True:
        probe = CtrlCAt(n)
        try:
            with probe:
                step()
        except KeyboardInterrupt:
            report["interrupted"] += 1
        report["runs"] += 1
        now = snapshot(state)
        where = next((j for j in (at, at + 1) if same(now, expected(j))), None)
        if where is None:
            report["torn"].append([n, probe.where])
            break
        at = where
        if not pargraph.is_grad_enabled():
            report["grad_mode_off"].append([n, probe.where])
            graph.grad_mode.enabled = True
        if (graph.naming_state.phase, graph.naming_state.scope, graph.grad_mode.site) != \
                (graph.FORWARD, "", None):
            report["context_left"].append([n, probe.where])
            graph.naming_state.phase, graph.naming_state.scope = graph.FORWARD, ""
            graph.grad_mode.site = None
        if len({p.grad is None for p in model.parameters()}) > 1:
            report["grads_torn"].append([n, probe.where])
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            report["handler_left"].append([n, probe.where])
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if sys.getswitchinterval() != interval:
            report["interval_left"].append([n, probe.where])
            sys.setswitchinterval(interval)
        if MODE == "capture" and at >= 2:
            break  # both captures done: later calls replay
        if not probe.sent:  # the step ended before its n-th point
            break
        report["points"] = n
        n += STRIDE
    print(json.dumps(report))


def save() -> None:
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "state.npz")
    old, new = {"w": pargraph.ones(3), "epoch": 1}, {"w": pargraph.zeros(3), "epoch": 2}
    pargraph.save(old, path)
    report = {"points": 0, "runs": 0, "interrupted": 0, "bad": [], "other_errors": []}
    n = 1
    while True:
        probe = CtrlCAt(n)
        try:
            with probe:
                pargraph.save(new, path)
        except KeyboardInterrupt:
            report["interrupted"] += 1
        except Exception as error:  # noqa: BLE001 (what came out instead of the interrupt)
            report["other_errors"].append([n, repr(error)])
        report["runs"] += 1
        saved = pargraph.load(path)
        if os.listdir(folder) != ["state.npz"] or \
                signal.getsignal(signal.SIGINT) is not signal.default_int_handler or \
                (saved["epoch"], saved["w"].tolist()) not in ((1, [1.0] * 3), (2, [0.0] * 3)):
            report["bad"].append([n, probe.where, os.listdir(folder)])
            break
        if saved["epoch"] == 2:
            pargraph.save(old, path)
        if not probe.sent:
            break
        report["points"] = n
        n += STRIDE
    print(json.dumps(report))


if __name__ == "__main__":
    save() if MODE == "save" else main()
