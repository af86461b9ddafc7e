"""Classify scikit-learn's bundled 8x8 digits with a small transformer encoder that reads each
image as 8 row tokens of 8 pixels.

    python demos/attention.py                  # ~97% test accuracy, local threads
    python demos/attention.py --compile        # each step captured once and replayed
    python demos/attention.py --address tcp://127.0.0.1:8786   # the same on a dask cluster

At the end one training step is traced and its parallelism summary printed: the heads of each
attention layer (forward and backward) are independent branches.
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


class RowTransformer(nn.Module):
    """Rows as tokens: a linear embedding plus a learned position, a transformer encoder, the
    mean over the tokens, and a linear classifier."""

    def __init__(self, width: int, heads: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Linear(8, width)
        self.position = nn.Embedding(8, width)
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.1,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, pixels: pargraph.Tensor) -> pargraph.Tensor:
        tokens = self.embed(pixels.reshape(-1, 8, 8)) + self.position(pargraph.arange(8))
        return self.head(self.norm(self.encoder(tokens)).mean(1))


def build_model(width: int, heads: int, layers: int) -> nn.Module:
    return RowTransformer(width, heads, layers)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_training_args(parser, width=32, width_help="model width (d_model)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads per layer")
    parser.add_argument("--layers", type=int, default=2, help="encoder layers")
    common.add_execution_args(parser)
    common.add_forecast_arg(parser)
    return parser.parse_args(argv)


def train(args: argparse.Namespace, where: str) -> dict:
    data = load_data(args.seed)
    pargraph.manual_seed(args.seed)
    model = build_model(args.width, args.heads, args.layers)
    return common.train_classifier(model, data, pargraph.tensor, args, where)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with common.execution(args) as where:
        result = train(args, where)
    print(f"\ntest accuracy {result['test_accuracy']:.2%} after {args.epochs} epochs "
          f"({result['seconds']:.1f} s on {where}){common.compiled_summary(result['step'])}")
    return result


if __name__ == "__main__":
    main()
