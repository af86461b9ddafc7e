"""Learn f(x) = 3x + 7 from input-output pairs by gradient descent.

    python demos/fit_line.py               # converges to w ≈ 3, b ≈ 7
    python demos/fit_line.py --lr 0.001    # too small: after the same steps, still far off
    python demos/fit_line.py --lr 1.5      # too large: every step overshoots and it diverges
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402

import pargraph  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate (default: 0.1)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--points", type=int, default=100, help="training pairs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    common.add_execution_args(parser)
    return parser.parse_args(argv)


def fit(args: argparse.Namespace) -> dict:
    pargraph.manual_seed(args.seed)
    x = pargraph.rand(args.points, 1) * 4 - 2
    y = 3 * x + 7 + 0.05 * pargraph.randn(args.points, 1)
    w = pargraph.zeros(1, requires_grad=True)
    b = pargraph.zeros(1, requires_grad=True)
    opt = pargraph.optim.SGD([w, b], lr=args.lr)
    loss = None
    steps = 0
    with common.progress(args.steps, f"lr={args.lr}", args.quiet) as bar:
        while steps < args.steps:
            steps += 1
            opt.zero_grad()
            loss = ((x * w + b - y) ** 2).mean()
            loss.backward()
            opt.step()
            value = loss.item()
            bar.update(1)
            bar.set_postfix(loss=f"{value:.4g}", refresh=False)
            if not math.isfinite(value) or value > 1e12:
                break
    return {"w": w.item(), "b": b.item(), "loss": loss.item(), "steps": steps,
            "points": x.shape[0], "x": x.numpy()}


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    with common.execution(args) as where:
        result = fit(args)
    print(f"learned f(x) = {result['w']:.4f} x + {result['b']:.4f}   (true: 3x + 7)   "
          f"final loss {result['loss']:.4g} after {result['steps']} steps on {where}")
    result["where"] = where
    if not math.isfinite(result["loss"]) or result["loss"] > 1e6:
        print(f"diverged: lr={args.lr} is too large; each step overshoots the minimum")
    elif abs(result["w"] - 3) > 0.1 or abs(result["b"] - 7) > 0.1:
        print(f"not there yet: lr={args.lr} is too small for {args.steps} steps")
    else:
        print("converged")
    return result


if __name__ == "__main__":
    main()
