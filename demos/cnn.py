"""Classify scikit-learn's bundled 8x8 digits with a small convnet whose inception block runs
four convolution branches side by side.

    python demos/cnn.py                        # ~98% test accuracy, local threads
    python demos/cnn.py --address tcp://127.0.0.1:8786   # the same on a dask cluster

At the end one training step is traced and its parallelism summary printed: the inception
branches (1x1, 3x3, 5x5 and pool convolutions, forward and backward) are independent work.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from digits import load_data  # noqa: E402

import pargraph  # noqa: E402
from pargraph import nn, optim  # noqa: E402
from pargraph.utils.data import DataLoader, TensorDataset  # noqa: E402


class Inception(nn.Module):
    """Four branches over the same input, concatenated along the channels."""

    def __init__(self, channels: int, width: int) -> None:
        super().__init__()
        self.branches = nn.ModuleList([
            nn.Conv2d(channels, width, 1),
            nn.Sequential(nn.Conv2d(channels, width, 1), nn.ReLU(),
                          nn.Conv2d(width, width, 3, padding=1)),
            nn.Sequential(nn.Conv2d(channels, width, 1), nn.ReLU(),
                          nn.Conv2d(width, width, 5, padding=2)),
            nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(channels, width, 1)),
        ])

    def forward(self, x: pargraph.Tensor) -> pargraph.Tensor:
        return pargraph.cat([branch(x) for branch in self.branches], dim=1)


def build_model(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        Inception(width, width), nn.ReLU(), nn.MaxPool2d(2),            # 8x8 -> 4x4
        nn.Conv2d(4 * width, 2 * width, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, 10),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12, help="epochs (default: 12)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2,
                        help="peak Adam learning rate of the one-cycle schedule")
    parser.add_argument("--width", type=int, default=16, help="channels per branch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    common.add_execution_args(parser)
    return parser.parse_args(argv)


def images(flat):
    """(N, 64) pixel rows as (N, 1, 8, 8) one-channel images."""
    return pargraph.tensor(flat.reshape(-1, 1, 8, 8))


def accuracy(model: nn.Module, x, y) -> float:
    model.eval()
    with pargraph.no_grad():
        correct = (model(images(x)).argmax(1) == pargraph.tensor(y)).float().mean().item()
    model.train()
    return correct


def train(args: argparse.Namespace, where: str) -> dict:
    (train_x, train_y), (test_x, test_y) = load_data(args.seed)
    pargraph.manual_seed(args.seed)
    model = build_model(args.width)
    loader = DataLoader(TensorDataset(images(train_x), pargraph.tensor(train_y)),
                        batch_size=args.batch_size, shuffle=True)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    schedule = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr,
                                             total_steps=args.epochs * len(loader))
    loss_fn = nn.CrossEntropyLoss()
    bar = common.progress(args.epochs * len(loader), "training", args.quiet)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            schedule.step()
            total += loss.item()
            bar.update(1)
        bar.write(f"epoch {epoch + 1:3d}  loss {total / len(loader):.4f}  test accuracy "
                  f"{accuracy(model, test_x, test_y):.2%}", file=sys.stdout)
    bar.close()
    seconds = time.perf_counter() - start
    result = {"model": model, "test_accuracy": accuracy(model, test_x, test_y),
              "seconds": seconds, "where": where}
    result["trace"] = trace_one_step(model, opt, loss_fn, next(iter(loader)))
    return result


def trace_one_step(model, opt, loss_fn, batch):
    """One more training step under ``pargraph.trace()``; prints and returns its summary."""
    x, y = batch
    with pargraph.trace() as tr:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    summary = tr.summary(print_it=False)
    print(f"one traced step: {summary.nodes} nodes, available parallelism "
          f"{summary.available_parallelism:.2f}x, achieved {summary.achieved_parallelism:.2f}x")
    return summary


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with common.execution(args) as where:
        result = train(args, where)
    print(f"\ntest accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"({result['seconds']:.1f} s on {where})")
    return result


if __name__ == "__main__":
    main()
