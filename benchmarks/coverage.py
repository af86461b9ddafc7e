"""How much of PyTorch's public surface pargraph has, measured against PyTorch's own name lists.

    python -m benchmarks.coverage            # prints the table, writes docs/coverage.md

Needs torch (the test extra installs the CPU build). The lists: ``torch.nn.modules.__all__``,
the public functions of ``torch.nn.functional``, the optimizers and LR schedulers of
``torch.optim``, the ``torch.*`` functions ``torch.overrides.get_testing_overrides()`` lists,
Tensor's public methods, and two everyday cores (:data:`EVERYDAY_TORCH`,
:data:`EVERYDAY_TENSOR`): the names programs and tutorials reach for first.
"""

from __future__ import annotations

import argparse
import inspect
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: ``torch.<name>`` that everyday programs use (tutorials, examples, the issues' programs).
EVERYDAY_TORCH = """
abs add all allclose amax amin any arange argmax argmin argsort as_tensor atan2 baddbmm bmm
bool broadcast_to cat ceil chunk clamp clip clone cos cosh cross cumprod cumsum device diag
diagonal div dot double dtype einsum empty empty_like eq equal exp expand_copy eye flatten
flip float float16 float32 float64 floor from_numpy full full_like gather ge get_default_dtype
gt hstack index_select int int16 int32 int64 int8 is_floating_point is_tensor isclose isfinite
isinf isnan kron le lerp linspace load log log10 log1p log2 logical_and logical_not logical_or
logsumexp long lt manual_seed masked_fill matmul max maximum mean median min minimum mm
multinomial mul narrow ne neg no_grad nonzero norm normal numel ones ones_like outer permute
pow prod rand rand_like randint randint_like randn randn_like randperm remainder repeat_interleave
reshape roll round rsqrt save set_default_dtype set_grad_enabled sigmoid sign sin sinh
softmax sort split sqrt square squeeze stack std sub sum t take tan tanh tensor tensordot tile
topk transpose tril triu uint8 unbind unique unsqueeze var vstack where zeros zeros_like
""".split()

#: Tensor methods everyday programs use.
EVERYDAY_TENSOR = """
abs add add_ addmm all any argmax argmin argsort backward bool byte ceil chunk clamp clamp_
clone contiguous copy_ cos cpu cuda cumsum data_ptr detach detach_ dim div div_ double
element_size eq exp exp_ expand expand_as fill_ flatten flip float floor gather ge grad gt half
index_add_ index_fill_ index_select int is_contiguous is_cuda is_floating_point isnan item le
log log_softmax long lt masked_fill masked_fill_ matmul max mean min mm mul mul_ narrow ndimension
ne nelement neg new_empty new_full new_ones new_tensor new_zeros norm normal_ numel numpy
permute pow prod register_hook relu relu_ repeat requires_grad_ reshape reshape_as retain_grad
round scatter scatter_add_ sigmoid sign size softmax sort split sqrt squeeze squeeze_ std stride
sub sub_ sum t t_ tanh to tolist topk transpose type type_as uniform_ unsqueeze unsqueeze_ var
view view_as zero_
""".split()


def lists() -> dict[str, list[str]]:
    """PyTorch's name lists, by what they hold."""
    import torch
    import torch.nn.functional as tf

    functional = sorted(name for name in dir(tf) if not name.startswith("_")
                        and inspect.isfunction(getattr(tf, name))
                        and getattr(getattr(tf, name), "__module__", "").startswith("torch"))
    optimizers = sorted(name for name in dir(torch.optim)
                        if isinstance(getattr(torch.optim, name), type)
                        and issubclass(getattr(torch.optim, name), torch.optim.Optimizer)
                        and name != "Optimizer")
    scheduler = torch.optim.lr_scheduler
    schedulers = sorted(name for name in dir(scheduler)
                        if isinstance(getattr(scheduler, name), type)
                        and issubclass(getattr(scheduler, name), scheduler.LRScheduler)
                        and not name.startswith("_") and name != "LRScheduler")
    overrides = sorted({getattr(f, "__name__", "") for f in
                        torch.overrides.get_testing_overrides()
                        if getattr(torch, getattr(f, "__name__", ""), None) is f})
    methods = sorted(name for name in dir(torch.Tensor) if not name.startswith("_"))
    return {"nn modules": sorted(torch.nn.modules.__all__), "nn.functional": functional,
            "optimizers": optimizers, "LR schedulers": schedulers,
            "torch.* (overridable)": [n for n in overrides if n],
            "Tensor methods": methods, "everyday torch.*": sorted(EVERYDAY_TORCH),
            "everyday Tensor methods": sorted(EVERYDAY_TENSOR)}


def where_in_pargraph(kind: str):
    """The pargraph object a list's names are looked up in."""
    import pargraph

    return {"nn modules": pargraph.nn, "nn.functional": pargraph.nn.functional,
            "optimizers": pargraph.optim, "LR schedulers": pargraph.optim.lr_scheduler,
            "Tensor methods": pargraph.Tensor,
            "everyday Tensor methods": pargraph.Tensor}.get(kind, pargraph)


def measure() -> dict[str, tuple[list[str], list[str]]]:
    """Per list: (names pargraph has, names it lacks)."""
    found = {}
    for kind, names in lists().items():
        space = where_in_pargraph(kind)
        have = [name for name in names if hasattr(space, name)]
        found[kind] = (have, [name for name in names if name not in have])
    return found


def report(found: dict[str, tuple[list[str], list[str]]]) -> str:
    import torch

    lines = ["# PyTorch names pargraph has", "",
             f"Generated by `python -m benchmarks.coverage` against torch {torch.__version__}.",
             "", "| list | pargraph has | of |", "|---|---|---|"]
    for kind, (have, missing) in found.items():
        lines.append(f"| {kind} | {len(have)} | {len(have) + len(missing)} |")
    for kind, (_, missing) in found.items():
        lines += ["", f"## {kind}: missing ({len(missing)})", "",
                  ", ".join(f"`{name}`" for name in missing) or "(none)"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "coverage.md"),
                        help="where to write the report ('-': nowhere)")
    args = parser.parse_args(argv)
    found = measure()
    for kind, (have, missing) in found.items():
        print(f"{kind:26s} {len(have):4d} / {len(have) + len(missing)}")
    if args.out != "-":
        with open(args.out, "w") as out:
            out.write(report(found))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
