"""The README's comparison table, made from benchmarks/RESULTS.md (what ``python -m benchmarks``
last measured): per workload, pargraph eager and compiled beside PyTorch's best eager setting,
``torch.compile``, JAX ``jit`` and the work written by hand in numpy.

    python -m benchmarks.readme           # rewrite the README's generated:comparison block
    python -m benchmarks.readme --check   # exit 1 if the block differs from RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BLOCK = "comparison"
#: The workloads the table shows, with the words that say what each is.
WORKLOADS = {
    "wide": "8 towers 256-512-512-10, batch 512",
    "branchy": "32 towers 64-128-128-10, batch 128",
    "small": "one MLP 32-64-64-4, batch 32",
    "cnn": "demos/cnn.py's convnet",
    "attention": "demos/attention.py's transformer",
    "lstm": "2-layer bidirectional LSTM",
    "charrnn": "PyTorch's char-RNN tutorial: tiny ops",
}


def medians(results: str) -> dict[str, dict[str, float]]:
    """Each workload's median step per variant, in milliseconds, from RESULTS.md's tables."""
    found: dict[str, dict[str, float]] = {}
    for section in re.split(r"^### ", results, flags=re.MULTILINE)[1:]:
        name = section.split("\n", 1)[0].strip()
        rows = re.findall(r"^\| ([^|]+?) \| ([0-9.]+) ms \|", section, re.MULTILINE)
        if rows:
            found[name] = {variant: float(ms) for variant, ms in rows}
    return found


def _cell(times: dict[str, float], variants: list[str], reference: float | None) -> str:
    present = [(times[v], v) for v in variants if v in times]
    if not present:
        return "—"
    ms = min(present)[0]
    return f"{ms:.2f} ms" + (f" ({ms / reference:.2f}x)" if reference else "")


def table(results: str) -> str:
    """The comparison table (times per step; in brackets, the ratio to PyTorch's best eager
    step: below 1 is faster than PyTorch)."""
    found = medians(results)
    lines = ["| workload | pargraph | pargraph compiled | PyTorch (best of 1, 2 threads) | "
             "torch.compile | JAX jit | numpy by hand |", "|---|---|---|---|---|---|---|"]
    for name, words in WORKLOADS.items():
        times = found.get(name)
        if not times:
            continue
        torch_best = min((times[v] for v in ("PyTorch, 1 thread", "PyTorch, 2 threads")
                          if v in times), default=None)
        lines.append(
            f"| {name} ({words}) | {_cell(times, ['pargraph threads'], torch_best)} | "
            f"{_cell(times, ['pargraph compiled threads'], torch_best)} | "
            f"{_cell(times, ['PyTorch, 1 thread', 'PyTorch, 2 threads'], None)} | "
            f"{_cell(times, [v for v in times if v.startswith('torch.compile')], torch_best)} | "
            f"{_cell(times, ['JAX jit'], torch_best)} | "
            f"{_cell(times, ['numpy by hand, 1 thread', 'numpy by hand, 2 threads'], torch_best)}"
            " |")
    date = re.search(r"^- date: (.+)$", results, re.MULTILINE)
    machine = re.search(r"^- machine: (.+)$", results, re.MULTILINE)
    blas = re.search(r"^- numpy's BLAS: (\S+ \S+) running its (\S+) kernels", results,
                     re.MULTILINE)
    kernels = f"; numpy's {blas.group(1)} with its {blas.group(2)} kernels" if blas else ""
    if re.search(r"^- numpy's BLAS: .*pargraph's products through MKL", results, re.MULTILINE):
        kernels += ", pargraph's products through MKL"
    lines += ["", f"Median training step, from `python -m benchmarks` "
              f"({date.group(1) if date else 'undated'}; {machine.group(1) if machine else ''}"
              f"{kernels}); in brackets, the time relative to PyTorch's best eager step (below "
              "1: faster). All figures: [benchmarks/RESULTS.md](benchmarks/RESULTS.md)."]
    return "\n".join(lines)


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with its ``<!-- generated:name -->`` block holding ``content``."""
    start, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
    if start not in text:
        raise SystemExit(f"README.md has no generated:{name} block")
    head, rest = text.split(start, 1)
    return head + start + content + "\n" + end + rest.split(end, 1)[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the README's table differs from RESULTS.md")
    args = parser.parse_args(argv)
    with open(os.path.join(HERE, "RESULTS.md")) as file:
        made = table(file.read())
    readme = os.path.join(ROOT, "README.md")
    with open(readme) as file:
        text = file.read()
    updated = replace_block(text, BLOCK, made)
    if args.check:
        if updated != text:
            raise SystemExit("README.md's comparison table differs from benchmarks/RESULTS.md: "
                             "run python -m benchmarks.readme")
        print("the README's comparison table matches benchmarks/RESULTS.md")
        return
    with open(readme, "w") as file:
        file.write(updated)


if __name__ == "__main__":
    main()
