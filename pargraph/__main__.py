"""``python -m pargraph train.py [args]``: run a PyTorch program unchanged on pargraph.

Every ``torch`` import of the program (and of the libraries it imports) resolves to pargraph
(:mod:`pargraph.torch_alias`); the program then runs as ``python train.py [args]`` would, with
``-m module`` as ``python -m module``. One line on stderr says how the run was made.
"""

from __future__ import annotations

import os
import runpy
import sys

USAGE = "usage: python -m pargraph SCRIPT [ARGS ...]  or  python -m pargraph -m MODULE [ARGS ...]"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    asked = bool(args) and args[0] in ("-h", "--help")
    if asked or not args or (args[0] == "-m" and len(args) < 2):
        print(USAGE + "\n\nRuns a PyTorch program with `import torch` resolving to pargraph.",
              file=sys.stdout if asked else sys.stderr)
        raise SystemExit(0 if asked else 2)
    import pargraph

    pargraph.alias_torch()
    module = args[0] == "-m"
    target = args[1] if module else args[0]
    print(f"pargraph {pargraph.version.release}: running {target} with every torch import "
          f"resolving to pargraph (python -m pargraph)", file=sys.stderr, flush=True)
    sys.argv = args[1:] if module else args
    if module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
