"""Classify real handwritten digits (scikit-learn's bundled 8x8 digits) with an MLP.

Trains on local threads, checkpoints every epoch (``--resume`` continues from the last one),
and writes a PNG of the loss and accuracy curves.

    python demos/digits.py                 # ~97% test accuracy in a few seconds
    python demos/digits.py --compile       # the same, each step captured once and replayed
    python demos/digits.py --epochs 5 --checkpoint /tmp/d.npz && \\
        python demos/digits.py --epochs 10 --checkpoint /tmp/d.npz --resume
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

import pargraph  # noqa: E402
from pargraph import nn, optim  # noqa: E402
from pargraph.utils.data import DataLoader, TensorDataset  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20, help="total epochs (default: 20)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    parser.add_argument("--hidden", type=int, default=128, help="width of the hidden layers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=os.path.join(common.OUT, "digits.npz"),
                        help="checkpoint written after every epoch")
    parser.add_argument("--resume", action="store_true",
                        help="continue from --checkpoint up to --epochs")
    parser.add_argument("--plot", default=os.path.join(common.OUT, "digits.png"),
                        help="PNG of the loss and accuracy curves ('' to skip)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    common.add_compile_arg(parser)
    common.add_execution_args(parser)
    common.add_forecast_arg(parser)
    return parser.parse_args(argv)


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as ``sklearn.datasets.load_digits`` gives them: 1,797 rows of 64
    pixels (0 to 16) and their labels. Reads the file scikit-learn ships, where it is, without
    importing scikit-learn, whose import takes longer than a small demo's training."""
    package = importlib.util.find_spec("sklearn")
    shipped = Path(package.submodule_search_locations[0], "datasets", "data", "digits.csv.gz") \
        if package is not None and package.submodule_search_locations else None
    if shipped is not None and shipped.is_file():
        table = np.loadtxt(shipped, delimiter=",")
        return table[:, :-1], table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.data, digits.target


def load_data(seed: int):
    """scikit-learn's digits (1,797 images, shipped with the package): a fixed 80/20 split."""
    pixels, targets = digits_arrays()
    images = (pixels / 16.0).astype(np.float32)
    labels = targets.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(images))
    test, train = order[:360], order[360:]
    return (images[train], labels[train]), (images[test], labels[test])


def build_model(hidden: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, 10),
    )


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    model.eval()
    with pargraph.no_grad():
        predicted = model(pargraph.tensor(images)).argmax(1)
        correct = (predicted == pargraph.tensor(labels)).float().mean().item()
    model.train()
    return correct


def train(args: argparse.Namespace) -> dict:
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    pargraph.manual_seed(args.seed)
    model = build_model(args.hidden)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(TensorDataset(pargraph.tensor(train_x), pargraph.tensor(train_y)),
                        batch_size=args.batch_size, shuffle=True)
    history = {"loss": [], "accuracy": []}
    first_epoch = 0
    if args.resume:
        first_epoch, history = resume(args, model, opt)

    step = common.training_step(model, opt, loss_fn, args.compile)
    steps_per_epoch = len(loader)
    bar = common.progress((args.epochs - first_epoch) * steps_per_epoch, "training", args.quiet)
    start = time.perf_counter()
    for epoch in range(first_epoch, args.epochs):
        # Seeding per epoch makes a resumed run repeat exactly what an uninterrupted one does.
        pargraph.manual_seed(args.seed * 100_003 + epoch)
        total, batches = 0.0, 0
        for images, labels in loader:
            loss = step(images, labels)  # the last, smaller batch: a second compiled plan
            total, batches = total + loss.item(), batches + 1
            bar.update(1)
            bar.set_postfix(epoch=f"{epoch + 1}/{args.epochs}", loss=f"{total / batches:.4f}",
                            refresh=False)  # shown at the bar's next update, not each step
        history["loss"].append(total / batches)
        history["accuracy"].append(accuracy(model, test_x, test_y))
        bar.write(f"epoch {epoch + 1:3d}  loss {history['loss'][-1]:.4f}  "
                  f"test accuracy {history['accuracy'][-1]:.2%}", file=sys.stdout)
        if args.checkpoint:
            os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
            pargraph.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                           "epoch": epoch, "history": history, "seed": args.seed,
                           "hidden": args.hidden}, args.checkpoint)
    bar.close()
    elapsed = time.perf_counter() - start
    comparison = common.compare_with_threads(step, model, opt, next(iter(loader)), args)
    if args.forecast:  # one more step, traced, after the last checkpoint
        with pargraph.trace() as traced:
            step(*next(iter(loader))).item()
        common.print_forecast(traced, args)
    return {"model": model, "history": history, "seconds": elapsed, "step": step,
            "cluster_comparison": comparison,
            "steps_per_epoch": steps_per_epoch, "test_accuracy": accuracy(model, test_x, test_y)}


def resume(args: argparse.Namespace, model: nn.Module, opt: optim.Optimizer) -> tuple[int, dict]:
    """Load ``--checkpoint`` into the model and optimizer: (first epoch to run, history)."""
    if not args.checkpoint or not os.path.exists(args.checkpoint):
        print(f"--resume: there is no checkpoint at {args.checkpoint!r}; starting from "
              "scratch", file=sys.stderr)
        return 0, {"loss": [], "accuracy": []}
    state = pargraph.load(args.checkpoint)
    saved_seed = state.get("seed", args.seed)
    if saved_seed != args.seed:  # the seed picks the test split: resuming would evaluate
        raise SystemExit(f"error: {args.checkpoint} was trained with --seed {saved_seed}, "
                         f"which picks its train/test split; resume it with --seed "
                         f"{saved_seed} (got --seed {args.seed})")
    if state.get("hidden", args.hidden) != args.hidden:
        raise SystemExit(f"error: {args.checkpoint} holds a model with --hidden "
                         f"{state['hidden']}; resume it with --hidden {state['hidden']}")
    done = state["epoch"] + 1
    if args.epochs < done:
        raise SystemExit(f"error: {args.checkpoint} has trained {done} epochs already; "
                         f"--epochs is the total to reach, so ask for more than {done} "
                         f"(got --epochs {args.epochs})")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    print(f"resumed from {args.checkpoint}: {done} epochs done, training up to "
          f"{args.epochs}")
    return done, state["history"]


def plot(history: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(epochs, history["loss"], marker="o")
    left.set(title="training loss", xlabel="epoch", ylabel="cross-entropy")
    right.plot(epochs, np.array(history["accuracy"]) * 100, marker="o", color="tab:green")
    right.set(title="test accuracy", xlabel="epoch", ylabel="%")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        with common.execution(args) as where:
            result = train(args)
    except pargraph.ClusterLostError as error:
        given = list(argv if argv is not None else sys.argv[1:])
        resume_command = shlex.join(["python", "demos/digits.py", *given,
                                     *([] if "--resume" in given else ["--resume"])])
        raise SystemExit(f"error: {error}\nThe last finished epoch is in {args.checkpoint}; "
                         f"start the cluster again and continue with:\n  {resume_command}"
                         ) from None
    if args.plot and result["history"]["loss"]:
        plot(result["history"], args.plot)
    print(f"\ntest accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"({result['seconds']:.1f} s on {where}){common.compiled_summary(result['step'])}")
    if args.checkpoint:
        print(f"checkpoint: {args.checkpoint}")
    if args.plot:
        print(f"curves: {args.plot}")
    result["where"] = where
    return result


if __name__ == "__main__":
    main()
