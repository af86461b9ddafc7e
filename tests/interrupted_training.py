"""Training under real Ctrl-Cs: a thread sends SIGINT to the main thread at random moments
while it trains (DataLoader, forward, backward, Adam step, a checkpoint every few steps); after
each interrupt the state must be one of an uninterrupted run's, and training resumed from it
must end where that run ends. Run by tests/test_interrupts.py in a process of its own (a stray
KeyboardInterrupt must not reach pytest); prints one JSON line.

Usage: python interrupted_training.py SCHEDULER STEPS SEED FOLDER [INTERRUPTS]

It trains STEPS steps, and on past them until INTERRUPTS interrupts have landed (default 0),
at most ``MOST_STEPS_PER_STEP`` times STEPS steps: how many land in a step depends on how fast
the machine runs a step against the sender's sleeps.

SCHEDULER is sync, threads or distributed; with ``-compiled`` after it (``threads-compiled``)
the interrupted run trains through ``pargraph.compile`` of its step: the interrupts then land
in captures and replays; with ``-in-place`` after that, every replay updates the parameters
and Adam's state in their own arrays (``pargraph.in-place-bytes`` 0; see pargraph.in_place).
"""

import json
import os
import random
import signal
import sys
import threading
import time

import dask
import numpy as np

import pargraph
from pargraph import graph, nn, optim
from pargraph._tensor import Tensor
from pargraph.compiler import capture, program
from pargraph.utils.data import DataLoader, TensorDataset

# Python's own handler, even when started with SIGINT ignored (a shell's background job).
signal.signal(signal.SIGINT, signal.default_int_handler)
SCHEDULER, STEPS, SEED, FOLDER = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
INTERRUPTS = int(sys.argv[5]) if len(sys.argv) > 5 else 0
MOST_STEPS_PER_STEP = 4
IN_PLACE = SCHEDULER.endswith("-in-place")
SCHEDULER = SCHEDULER.removesuffix("-in-place")
COMPILED = SCHEDULER.endswith("-compiled")
SCHEDULER = SCHEDULER.removesuffix("-compiled")
dask.config.set({"pargraph.in-place-bytes": 0 if IN_PLACE else None})
TOWERS, BATCH, CHECKPOINT_EVERY = 16, 32, 5


class Towers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.towers = nn.ModuleList(
            nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)) for _ in range(TOWERS))

    def forward(self, x):
        return pargraph.stack([tower(x) for tower in self.towers]).mean(0)


def make():
    pargraph.manual_seed(SEED)
    model = Towers()
    return model, optim.Adam(model.parameters(), lr=1e-2)


rng = np.random.default_rng(SEED)
data = TensorDataset(pargraph.tensor(rng.standard_normal((BATCH * 4, 16)).astype(np.float32)),
                     pargraph.tensor(rng.integers(0, 4, BATCH * 4)))
loader = DataLoader(data, batch_size=BATCH, shuffle=False)


def batch(k):
    for j, found in enumerate(loader):
        if j == k % len(loader):
            return found
    raise AssertionError("no such batch")


def attempt(model, opt, k, path=None, arm_at_step=None, compiled=None):
    """Step k of the training loop, as a user writes it (``arm_at_step``: called just before
    ``opt.step()``, where the interrupts of half the attempts start; with a ``compiled`` step,
    just before it)."""
    x, y = batch(k)
    if compiled is not None:
        if arm_at_step is not None:
            arm_at_step()
        compiled(x, y)
    else:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if arm_at_step is not None:
            arm_at_step()
        opt.step()
    if path is not None and (k + 1) % CHECKPOINT_EVERY == 0:
        pargraph.save({"model": model.state_dict(), "step": k + 1}, path)


def snapshot(model, opt):
    params = [p.detach().numpy().copy() for p in model.parameters()]
    moments = [(s["exp_avg"].numpy().copy(), s["exp_avg_sq"].numpy().copy(), s["step"])
               for s in (opt.state.get(p) for p in model.parameters()) if s]
    return params, moments


class Reference:
    """An uninterrupted run's state after each step, trained as far as it is asked for."""

    def __init__(self) -> None:
        self.model, self.opt = make()
        self.states = [snapshot(self.model, self.opt)]

    def __getitem__(self, k: int):
        while len(self.states) <= k:
            attempt(self.model, self.opt, len(self.states) - 1)
            self.states.append(snapshot(self.model, self.opt))
        return self.states[k]


def same(a, b):
    return len(a[0]) == len(b[0]) and len(a[1]) == len(b[1]) and \
        all(np.array_equal(x, y) for x, y in zip(a[0], b[0])) and \
        all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) and x[2] == y[2]
            for x, y in zip(a[1], b[1]))


class Sender:
    """Sends SIGINT to the main thread at random moments while armed.

    Its flags are plain attributes polled with sleeps, not Events: a KeyboardInterrupt raised
    inside ``Event.wait`` can leave the event's lock held, and the other thread waiting for
    it forever."""

    def __init__(self) -> None:
        self.armed = self.pause = self.paused = False
        self.done = False
        self.sent = 0
        self.random = random.Random(SEED)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done:
            if self.pause:
                self.paused = True
                time.sleep(1e-4)
                continue
            time.sleep(self.random.uniform(0, 0.004))
            if self.armed and not self.pause:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                self.sent += 1

    def drain(self) -> None:
        """Stop sending; a signal sent meanwhile is raised (and swallowed) while we wait."""
        while True:
            try:
                self.armed = self.paused = False
                self.pause = True
                while not self.paused:
                    time.sleep(1e-4)
                time.sleep(1e-3)  # a signal sent just before the pause lands here
                return
            except KeyboardInterrupt:
                continue

    def arm(self) -> None:
        self.pause = False
        self.armed = True


class Injector:
    """Sends SIGINT from inside the n-th call of a function that commits state (a tensor
    rebound to its new value, a node receiving its value): a Ctrl-C landing exactly there,
    where a random one lands rarely."""

    def __init__(self) -> None:
        self.countdown = 0
        self.calls = 0  # commits so far; a whole step's count bounds where one is interrupted
        self.per_step = 40 * TOWERS
        self.random = random.Random(SEED + 1)
        for owner, name in ((Tensor, "_rebind"), (graph.Node, "realize"),
                            (program, "land"), (capture, "land")):  # a replay's landings
            setattr(owner, name, self.wrapped(getattr(owner, name)))

    def wrapped(self, function):
        def commit(*args, **kwargs):
            self.calls += 1
            if self.countdown:
                self.countdown -= 1
                if not self.countdown:
                    signal.raise_signal(signal.SIGINT)
            return function(*args, **kwargs)
        return commit

    def arm(self) -> None:
        self.countdown = self.random.randint(1, self.per_step)


def main() -> None:
    if SCHEDULER == "distributed":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                               dashboard_address=None,
                               scheduler_kwargs={"dashboard_address": "127.0.0.1:0",
                                                 "dashboard": False},
                               worker_dashboard_address="127.0.0.1:0")
        dask.config.set(scheduler=Client(cluster, set_as_default=False))
    else:
        dask.config.set(scheduler=SCHEDULER)
    reference = Reference()
    reference[STEPS]  # trained before the interrupts start, as far as it surely goes
    model, opt = make()
    step = None
    if COMPILED:
        def train_step(x, y):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

        step = pargraph.compile(train_step)
    path = os.path.join(FOLDER, "checkpoint.npz")
    sender = Sender()
    injector = Injector()
    report = {"interrupts": 0, "torn": [], "grad_mode_off": 0, "context_left": 0,
              "grads_torn": 0, "bad_checkpoint": 0, "escaped": 0, "attempts": 0}
    committed = 0

    def wanted() -> bool:
        """Whether to train on: STEPS steps, then until enough interrupts have landed."""
        return committed < STEPS or (report["interrupts"] < INTERRUPTS
                                     and committed < MOST_STEPS_PER_STEP * STEPS)

    def check() -> int:
        """The step the state is at (it must be one of the reference's)."""
        state = snapshot(model, opt)
        step = state[1][0][2] if state[1] else 0
        if not same(state, reference[step]):
            report["torn"].append(step)
        if not pargraph.is_grad_enabled():
            report["grad_mode_off"] += 1
            graph.grad_mode.enabled = True
        if (graph.naming_state.phase, graph.naming_state.scope, graph.grad_mode.site) != \
                (graph.FORWARD, "", None):
            report["context_left"] += 1
        if len({p.grad is None for p in model.parameters()}) > 1:
            report["grads_torn"] += 1
        if os.path.exists(path):
            saved = pargraph.load(path)
            params = [saved["model"][name].numpy() for name, _ in model.named_parameters()]
            if not all(np.array_equal(a, b)
                       for a, b in zip(params, reference[saved["step"]][0])):
                report["bad_checkpoint"] += 1
        if any(name.endswith(".tmp") for name in os.listdir(FOLDER)):
            report["bad_checkpoint"] += 1
        return step

    def train() -> None:
        nonlocal committed
        while True:  # each attempt's outcome is checked, the last one's too
            sender.drain()
            committed = check()
            if not wanted():
                break
            report["attempts"] += 1
            kind = report["attempts"] % 3  # anywhere, from opt.step() on, or in a commit
            if kind == 0:
                sender.arm()
            calls = injector.calls
            try:
                attempt(model, opt, committed, path,
                        sender.arm if kind == 1 else injector.arm if kind == 2 else None, step)
                if kind != 2:  # a replay commits fewer values than an eager step
                    injector.per_step = max(1, injector.calls - calls)
            except KeyboardInterrupt:
                report["interrupts"] += 1
            injector.countdown = 0
        sender.drain()

    while True:
        try:
            train()
            break
        except KeyboardInterrupt:  # one that landed between two statements of train()
            report["escaped"] += 1
    sender.done = True
    report["sent"] = sender.sent
    report["steps"] = committed
    report["final_equal"] = same(snapshot(model, opt), reference[committed])
    if step is not None:
        report["replays"], report["eager"] = step.replays, step.eager
        report["written_in_place"] = sum(program.in_place.written for program in step.programs
                                         if program.in_place is not None)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
