"""Classify scikit-learn's bundled 8x8 digits with a small convnet whose inception block runs
four convolution branches side by side.

    python demos/cnn.py                        # ~98% test accuracy, local threads
    python demos/cnn.py --compile              # each step captured once and replayed
    python demos/cnn.py --address tcp://127.0.0.1:8786   # the same on a dask cluster

At the end one training step is traced and its parallelism summary printed: the inception
branches (1x1, 3x3, 5x5 and pool convolutions, forward and backward) are independent work.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from digits import load_data  # noqa: E402

import pargraph  # noqa: E402
from pargraph import nn  # noqa: E402


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
    common.add_training_args(parser, width=16, width_help="channels per branch")
    common.add_execution_args(parser)
    common.add_forecast_arg(parser)
    return parser.parse_args(argv)


def images(flat):
    """(N, 64) pixel rows as (N, 1, 8, 8) one-channel images."""
    return pargraph.tensor(flat.reshape(-1, 1, 8, 8))


def train(args: argparse.Namespace, where: str) -> dict:
    data = load_data(args.seed)
    pargraph.manual_seed(args.seed)
    return common.train_classifier(build_model(args.width), data, images, args, where)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with common.execution(args) as where:
        result = train(args, where)
    print(f"\ntest accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"({result['seconds']:.1f} s on {where}){common.compiled_summary(result['step'])}")
    return result


if __name__ == "__main__":
    main()
