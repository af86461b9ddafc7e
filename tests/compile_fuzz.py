"""A differential fuzzer for compiled steps: random small training programs, with random changes
between calls, run eagerly and compiled; a compiled call must equal the eager one bit for bit
to a few roundings (it may capture again, or run eagerly after a graph break with a warning,
never replay a stale program).

``tests/test_compile_fuzz.py`` runs a sample of seeds; ``python -m tests.compile_fuzz N`` runs
seeds 0 to N - 1 and prints each failing seed with the program that failed.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The parts a program draws from.
LAYERS = ("linear", "conv", "batchnorm", "dropout", "lstm", "gru", "rnn", "attention", "leaky")
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw")
#: The changes made between calls.
CHANGES = ("freeze", "unfreeze", "attribute", "save_state", "load_state", "add_param_group",
           "lr", "betas", "weight_decay", "train", "eval", "batch", "init", "number")
#: Where the step's Python number ``w`` enters the loss.
NUMBER_POSITIONS = ("w * loss", "loss * w", "w + loss", "(1 - w) * loss", "max(w, 1.0) * loss",
                    "loss / (w + 1)", "w / (loss + 1)", "loss - w * out.mean()",
                    "2 ** (loss * w)", "abs(w) * loss + min(w, 0.5) * loss")


@dataclass
class ProgramSpec:
    """One random program: its layers, optimizer, step options and the changes per call."""

    seed: int
    layers: list
    optimizer: str
    number: str
    clip: bool
    accumulate: bool
    zero_grad: bool
    nested: bool
    scheduler: bool
    calls: list = field(default_factory=list)  # a list of changes (names) per call

    def __str__(self) -> str:
        return (f"seed {self.seed}: layers {self.layers}, {self.optimizer}, loss {self.number!r}"
                f", clip {self.clip}, accumulate {self.accumulate}, zero_grad {self.zero_grad}, "
                f"nested {self.nested}, scheduler {self.scheduler}, calls {self.calls}")


def draw_spec(seed: int) -> ProgramSpec:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 4))
    layers = [str(n) for n in rng.choice(LAYERS, size=k, replace=False)]
    calls = [[]] + [[str(c) for c in rng.choice(CHANGES, size=int(rng.integers(0, 3)),
                                                replace=False)]
                    for _ in range(int(rng.integers(3, 6)))]
    return ProgramSpec(
        seed=seed, layers=layers, optimizer=str(rng.choice(OPTIMIZERS)),
        number=str(rng.choice(NUMBER_POSITIONS)), clip=bool(rng.random() < 0.3),
        accumulate=bool(rng.random() < 0.25), zero_grad=bool(rng.random() < 0.8),
        nested=bool(rng.random() < 0.3), scheduler=bool(rng.random() < 0.3), calls=calls)


FEATURES, SEQUENCE, OUT = 6, 5, 3
#: How far a compiled call may be from the eager one beyond what separates two eager runs: a
#: few float32 roundings. Two eager runs can differ in their last bits (numpy's vectorized
#: kernels round with the arrays' alignment in memory), and Adam magnifies that where a
#: gradient is nearly zero; a stale program is far off.
RTOL, ATOL = 1e-5, 1e-6


def build(torch, spec: ProgramSpec):
    """The program's model, optimizer, scheduler and step function, on ``torch`` (pargraph)."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(FEATURES, 8)
            self.parts = nn.ModuleDict()
            for name in spec.layers:
                self.parts[name] = {
                    "linear": lambda: nn.Linear(8, 8),
                    "conv": lambda: nn.Conv1d(8, 8, 3, padding=1),
                    "batchnorm": lambda: nn.BatchNorm1d(8),
                    "dropout": lambda: nn.Dropout(0.25),
                    "lstm": lambda: nn.LSTM(8, 4, batch_first=True, bidirectional=True),
                    "gru": lambda: nn.GRU(8, 4, batch_first=True, bidirectional=True),
                    "rnn": lambda: nn.RNN(8, 8, num_layers=2, nonlinearity="relu",
                                          batch_first=True),
                    "attention": lambda: nn.MultiheadAttention(8, 2, batch_first=True),
                    "leaky": lambda: nn.LeakyReLU(0.1),
                }[name]()
            self.out = nn.Linear(8, OUT)

        def forward(self, x):  # x: (batch, sequence, features)
            h = torch.tanh(self.inp(x))
            for name, part in self.parts.items():
                if name in ("conv", "batchnorm"):
                    h = part(h.transpose(1, 2)).transpose(1, 2)
                elif name in ("lstm", "gru", "rnn"):
                    h = part(h)[0]
                elif name == "attention":
                    mask = torch.triu(torch.ones(SEQUENCE, SEQUENCE, dtype=torch.bool), 1)
                    h = h + part(h, h, h, attn_mask=mask, need_weights=False)[0]
                else:
                    h = part(h)
            return self.out(h).mean(1)

    torch.manual_seed(spec.seed)
    model = Net()
    rng = np.random.default_rng(spec.seed + 1000)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
    params = list(model.parameters())
    opt = {
        "sgd": lambda: torch.optim.SGD(params, lr=0.05),
        "sgd_momentum": lambda: torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
        # A large eps: Adam's step of a nearly zero gradient is its rounding's sign, which
        # would turn last-bit noise into a difference of ``lr``.
        "adam": lambda: torch.optim.Adam(params, lr=0.01, eps=1e-3),
        "adamw": lambda: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, eps=1e-3),
    }[spec.optimizer]()
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5) if spec.scheduler else None
    loss_code = compile(spec.number, "<loss>", "eval")

    def step(x, y, w):
        if spec.zero_grad:
            opt.zero_grad()
        for _ in range(2 if spec.accumulate else 1):
            out = model(x)
            loss = ((out - y) ** 2).mean()
            loss = eval(loss_code, {"max": max, "min": min, "abs": abs},
                        {"w": w, "loss": loss, "out": out})
            loss.backward()
        if spec.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if spec.nested:
            return {"loss": loss, "parts": (out, [loss * 2])}
        return loss

    return model, opt, sched, step


def _values(result) -> list:
    if isinstance(result, dict):
        return _values(result["loss"]) + _values(result["parts"][0]) + _values(
            result["parts"][1][0])
    return [result.detach().numpy().copy()]


def run(torch, spec: ProgramSpec, compiled: bool) -> list:
    """Each call's returned values and the model's and optimizer's state after it."""
    model, opt, sched, step = build(torch, spec)
    fn = torch.compile(step) if compiled else step
    rng = np.random.default_rng(spec.seed + 2000)
    batch, w, saved = 4, 0.7, None
    extra = torch.nn.Parameter(torch.zeros(3))
    frozen = []
    history = []
    for changes in spec.calls:
        for change in changes:
            params = [p for p in model.parameters() if p.requires_grad]
            if change == "freeze" and len(params) > 1:
                p = params[int(rng.integers(len(params)))]
                p.requires_grad_(False)
                p.grad = None
                frozen.append(p)
            elif change == "unfreeze" and frozen:
                frozen.pop().requires_grad_(True)
            elif change == "attribute":
                for module in model.modules():
                    if isinstance(module, torch.nn.LeakyReLU):
                        module.negative_slope = float(rng.uniform(0.01, 0.5))
                    elif isinstance(module, torch.nn.BatchNorm1d):
                        module.momentum = float(rng.uniform(0.05, 0.5))
                    elif isinstance(module, torch.nn.Dropout):
                        module.p = float(rng.uniform(0.0, 0.5))
            elif change == "save_state":
                saved = copy.deepcopy(opt.state_dict())
            elif change == "load_state" and saved is not None and len(
                    saved["param_groups"]) == len(opt.param_groups):
                opt.load_state_dict(saved)
            elif change == "add_param_group" and len(opt.param_groups) == 1:
                opt.add_param_group({"params": [extra], "lr": 0.02})
            elif change == "lr":
                for group in opt.param_groups:
                    group["lr"] = float(rng.uniform(0.001, 0.05))
            elif change == "betas" and "betas" in opt.param_groups[0]:
                opt.param_groups[0]["betas"] = (float(rng.uniform(0.5, 0.9)), 0.99)
            elif change == "weight_decay":
                opt.param_groups[0]["weight_decay"] = float(rng.uniform(0.0, 0.1))
            elif change == "train":
                model.train()
            elif change == "eval":
                model.eval()
            elif change == "batch":
                batch = int(rng.integers(2, 6))
            elif change == "init":
                with torch.no_grad():
                    p = list(model.parameters())[int(rng.integers(len(params)))]
                    p.mul_(0.5)
                    model.out.bias.fill_(float(rng.uniform(-0.1, 0.1)))
            elif change == "number":
                w = float(rng.uniform(-1, 2))
        x = torch.tensor(rng.standard_normal((batch, SEQUENCE, FEATURES)).astype(np.float32))
        y = torch.tensor(rng.standard_normal((batch, OUT)).astype(np.float32))
        torch.manual_seed(int(rng.integers(1 << 30)))  # each call's dropout masks
        result = fn(x, y, w)
        if sched is not None:
            sched.step()
        state = [p.detach().numpy().copy() for p in model.parameters()]
        state += [b.detach().numpy().copy() for b in model.buffers()]
        state += [p.grad.numpy().copy() for p in model.parameters() if p.grad is not None]
        for per_param in opt.state.values():
            state += [v.detach().numpy().copy() for v in per_param.values()
                      if isinstance(v, torch.Tensor)]
        history.append((_values(result), state))
    return history


def difference(torch, spec: ProgramSpec, compiled_on: Any = None) -> str | None:
    """Where the compiled run first differs from the eager one by more than a second eager run
    does (plus a few roundings), or None. ``compiled_on``: the settings the compiled run
    alone goes under (:func:`on_cluster`); the eager runs stay on this process's threads."""
    eager = run(torch, spec, compiled=False)
    again = run(torch, spec, compiled=False)
    with warnings.catch_warnings(), compiled_on or contextlib.nullcontext():
        warnings.simplefilter("ignore")  # graph breaks warn; they are allowed
        compiled = run(torch, spec, compiled=True)
    for call, (e, a, c) in enumerate(zip(eager, again, compiled)):
        for part, what in enumerate(("result", "state")):
            if len(e[part]) != len(c[part]):
                return f"call {call}: {len(c[part])} {what} arrays compiled, {len(e[part])} eager"
            for k, (u, w, v) in enumerate(zip(e[part], a[part], c[part])):
                if u.shape != v.shape:
                    return f"call {call}: {what} {k} has shape {v.shape}, eager {u.shape}"
                noise = 2 * np.abs(u - w) + ATOL + RTOL * np.abs(u)
                gap = np.abs(u - v)
                if np.any(gap > noise) or not np.array_equal(np.isnan(u), np.isnan(v)):
                    return f"call {call}: {what} {k} differs (by {np.nanmax(gap)})"
    return None


@contextlib.contextmanager
def on_cluster(client: Any) -> Any:
    """The settings under which runs go to ``client``'s cluster a group task per worker: with
    several worker processes, each holds its own copy of a compiled program. Set when the
    block is entered (not when this is called, as ``dask.config.set`` would)."""
    import dask

    with dask.config.set({"scheduler": client, "pargraph.single-task-below": 0,
                          "pargraph.task-grain": 0}):
        yield


def finding(seed: int, client: Any = None) -> str | None:
    """Program ``seed``'s difference (:func:`difference`), a crash included, as a report
    naming the program, or None."""
    import pargraph

    spec = draw_spec(seed)
    try:
        found = difference(pargraph, spec, on_cluster(client) if client else None)
    except Exception as error:  # a crash is a finding too
        found = f"{type(error).__name__}: {error}"
    return None if found is None else f"{spec}\n    {found}"


def main(argv: list[str]) -> int:
    """``python -m tests.compile_fuzz [COUNT] [--workers W | --jobs J]``: the first COUNT
    programs, on local threads (``--jobs``: in J processes side by side, each its share of
    them), or compiled on W ``dask worker`` processes on 127.0.0.1 (:func:`on_cluster`)
    against eager runs on local threads."""
    import argparse
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from pargraph.remote.loopback import worker_processes

    parser = argparse.ArgumentParser(prog="python -m tests.compile_fuzz")
    parser.add_argument("count", nargs="?", type=int, default=200)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    if args.workers and args.jobs > 1:
        parser.error("--workers and --jobs: the programs go to one cluster from one process")
    seeds = range(args.count)
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(worker_processes(args.workers)) if args.workers else None
        if args.jobs > 1:
            pool = stack.enter_context(ProcessPoolExecutor(
                args.jobs, mp_context=multiprocessing.get_context("spawn")))
            findings = pool.map(finding, seeds, chunksize=max(args.count // (8 * args.jobs), 1))
        else:
            findings = (finding(seed, client) for seed in seeds)
        failed = 0
        for found in findings:  # in the programs' order, as each comes
            if found is not None:
                failed += 1
                print(found)
    where = f" on {args.workers} worker processes" if args.workers else ""
    print(f"{args.count - failed} of {args.count} programs{where}: compiled equals eager")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
