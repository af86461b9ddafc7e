"""The house's layering: imports point one way (docs/design.md, "Layers"), and the facade is
derived from the op registry where it can be."""

import ast
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

import pargraph
from pargraph import ops

PACKAGE = pathlib.Path(pargraph.__file__).parent

#: What each low layer may import from pargraph (anything not listed is above it), besides
#: ``pargraph.context``, which stands below all; a module of the engine is named whole, since
#: its rooms stand on different floors.
ALLOWED = {
    "context.py": set(),
    "graph.py": set(),
    "dtypes.py": set(),
    "capturing.py": set(),
    "costs.py": set(),
    "interrupts.py": set(),
    "printing.py": set(),
    "pytree.py": set(),
    "ops": {"pargraph.graph", "pargraph.capturing"},
    "engine/placement.py": {"pargraph.graph"},
    "engine/partition.py": {"pargraph.graph", "pargraph.engine.placement"},
    "runtime.py": {"pargraph.graph", "pargraph.ops"},
    "remote": {"pargraph.graph", "pargraph.interrupts", "pargraph.runtime", "pargraph.remote"},
    "engine/lowering.py": {"pargraph.graph", "pargraph.costs", "pargraph.engine.partition",
                           "pargraph.runtime", "pargraph.remote", "pargraph.ops"},
    "engine/threads.py": {"pargraph.interrupts"},
    "shared_memory.py": {"pargraph.graph", "pargraph.ops"},
    "engine/modes.py": {"pargraph.engine.lowering", "pargraph.engine.partition",
                        "pargraph.engine.threads", "pargraph.ops", "pargraph.remote",
                        "pargraph.runtime"},
    "engine/execution.py": {"pargraph.graph", "pargraph.capturing", "pargraph.interrupts",
                            "pargraph.engine.lowering", "pargraph.engine.modes",
                            "pargraph.runtime", "pargraph.remote", "pargraph.shared_memory"},
    "autograd": {"pargraph.graph", "pargraph.ops", "pargraph.engine.execution",
                 "pargraph.interrupts", "pargraph.capturing", "pargraph.remote",
                 "pargraph.runtime", "pargraph.dtypes"},
}

#: Packages whose modules may import each other (their own layer).
PACKAGES = {"autograd", "ops", "remote"}


def _pargraph_imports(path: pathlib.Path) -> set[str]:
    def named(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:3] if parts[1:2] == ["engine"] else parts[:2])

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in ("pargraph", "pargraph.engine"):
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.startswith("pargraph."):
            found.add(named(node.module))
        elif isinstance(node, ast.Import):
            found.update(named(a.name) for a in node.names if a.name.startswith("pargraph."))
    return found


def test_low_layers_import_nothing_above_them():
    for name, allowed in ALLOWED.items():
        paths = sorted((PACKAGE / name).glob("*.py")) if name in PACKAGES else [PACKAGE / name]
        for path in paths:
            imports = {m for m in _pargraph_imports(path) if m != "pargraph.context"
                       and not (name in PACKAGES and m == f"pargraph.{name}")}
            assert imports <= allowed, (path.name, imports - allowed)


def _import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` for the package at ``root``, imports
    inside functions included (either ties two modules), those under ``if TYPE_CHECKING``
    not; ``from a import b`` names module ``a.b`` where that is one, else ``a``."""
    def name_of(path: pathlib.Path) -> str:
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = {name_of(p): p for p in root.rglob("*.py")}
    graph = {}
    for me, path in paths.items():
        tree = ast.parse(path.read_text())
        skipped = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for sub in ast.walk(node)}
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        found = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                             for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[me] = (found & set(paths)) - {me}
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    import graphlib

    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        return error.args[1]
    return None


def test_the_package_has_no_import_circles():
    """No module of the package imports, even inside a function, a module that imports it
    back through any chain: every room stands above all it imports (farm-studio's floors)."""
    circle = _circle(_import_graph(PACKAGE))
    assert circle is None, f"an import circle: {' -> '.join(circle)}"


def test_the_circle_check_sees_an_import_inside_a_function(tmp_path):
    package = tmp_path / "house"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def later():\n    from house import high\n")
    (package / "high.py").write_text("from house.low import later\n")
    assert _circle(_import_graph(package)) is not None
    (package / "low.py").write_text("from typing import TYPE_CHECKING\n"
                                    "if TYPE_CHECKING:\n    from house import high\n")
    assert _circle(_import_graph(package)) is None


def _client_calls(path: pathlib.Path) -> list[str]:
    """Where the module at ``path`` reaches into a ``distributed.Client``: an attribute of a
    name ``client`` or of a ``.client``, or an import of ``distributed``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and (
                isinstance(node.value, ast.Name) and node.value.id == "client"
                or isinstance(node.value, ast.Attribute) and node.value.attr == "client"):
            found.append(f"{path.name}:{node.lineno} client.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distributed"):
            found.append(f"{path.name}:{node.lineno} from {node.module}")
    return found


def test_only_the_cluster_wing_talks_to_a_client():
    """Every call to a client, and every import of distributed, is in ``remote/``; the
    engine only finds the client a run goes to (``modes.current_client``) and its ``get``."""
    found = [call for path in sorted(PACKAGE.rglob("*.py"))
             if PACKAGE / "remote" not in path.parents for call in _client_calls(path)]
    assert sorted(call.split(":")[0] + " " + call.split(" ", 1)[1] for call in found) == [
        "modes.py client.get", "modes.py from distributed"], found


def test_the_client_check_sees_a_call(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(run):\n    return run.client.gather([])\n")
    assert _client_calls(module) == ["m.py:2 client.gather"]
    module.write_text("def f(client):\n    return client\n")
    assert _client_calls(module) == []


#: Module-level instances that are constants, not state: nothing changes them after import.
CONSTANT_INSTANCES = {"distributions/constraints.py", "distributions/transforms.py",
                      "devices.py", "version.py:__version__", "backends.py:mps",
                      "backends.py:mkldnn", "backends.py:openmp", "engine/partition.py:LOCAL",
                      "context.py:context"}


def _unregistered_state(path: pathlib.Path, name: str) -> list[str]:
    """Module-level instances of the module's own classes that ``context.register`` does
    not keep (``name``: the module's path under the package)."""
    tree = ast.parse(path.read_text())
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Name) and node.value.func.id in classes:
            for target in node.targets:
                label = f"{name}:{ast.unparse(target)}"
                if name not in CONSTANT_INSTANCES and label not in CONSTANT_INSTANCES:
                    found.append(label)
    return found


def test_the_process_state_lives_in_the_one_context():
    """Every object of a room's own class made at import (its state between calls) is
    registered in ``pargraph.context``, so one object lists all a process keeps."""
    found = [label for path in sorted(PACKAGE.rglob("*.py"))
             for label in _unregistered_state(path, str(path.relative_to(PACKAGE)))]
    assert found == []
    from pargraph.context import context

    assert len(context.states()) >= 30
    assert all(getattr(context, name) is state for name, state in context.states().items())


def test_the_state_check_sees_an_unregistered_object(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("class State:\n    pass\n\n\nstate = State()\n")
    assert _unregistered_state(module, "m.py") == ["m.py:state"]
    module.write_text("from pargraph.context import context\n\n\nclass State:\n    pass\n"
                      "\n\nstate = context.register('m', State())\n")
    assert _unregistered_state(module, "m.py") == []


def _rooms_without_tests(package: pathlib.Path, tests: pathlib.Path) -> list[str]:
    """The rooms of ``package`` (each module at its top, each sub-package whole) with no test
    file named after them: ``test_<room>.py`` or ``test_<room>_<more>.py``, where a
    sub-package's room may also be named by one of its modules or folders."""
    names = [path.stem[len("test_"):] for path in tests.glob("test_*.py")]

    def named(room: str) -> bool:
        return any(name == room or name.startswith(room + "_") for name in names)

    missing = []
    for path in sorted(package.iterdir()):
        if path.name.startswith("__") or not (path.is_dir() or path.suffix == ".py"):
            continue
        inner = {p.stem for p in path.rglob("*.py")} | {p.name for p in path.rglob("*")
                                                        if p.is_dir()} if path.is_dir() else set()
        if not named(path.stem.strip("_")) and not any(named(n) for n in inner - {"__init__"}):
            missing.append(path.stem)
    return missing


def test_every_room_has_a_test_file_named_after_it():
    assert _rooms_without_tests(PACKAGE, pathlib.Path(__file__).parent) == []


def test_the_room_check_sees_a_room_without_tests(tmp_path):
    (tmp_path / "house").mkdir()
    (tmp_path / "house" / "hall.py").write_text("")
    (tmp_path / "house" / "wing").mkdir()
    (tmp_path / "house" / "wing" / "east.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_east_rooms.py").write_text("")
    assert _rooms_without_tests(tmp_path / "house", tmp_path / "tests") == ["hall"]


#: ``ops``' families in the order they stand: each imports only those before it.
OPS_ORDER = ["core", "gemm", "intra_op", "jit_kernels", "kernels", "shapes", "elementwise",
             "special", "reductions", "composites", "convolution", "linalg", "sparse", "sampling",
             "optimizers", "nn", "rewrites"]


def test_the_ops_families_import_one_way():
    found = sorted(p.stem for p in (PACKAGE / "ops").glob("*.py") if p.stem != "__init__")
    assert found == sorted(OPS_ORDER)
    for family in OPS_ORDER:
        source = (PACKAGE / "ops" / f"{family}.py").read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pargraph.ops"):
                other = node.module.split(".")[2]
                assert OPS_ORDER.index(other) < OPS_ORDER.index(family), (family, other)


def test_importing_pargraph_leaves_scipy_and_distributed_for_first_use():
    # scipy.special (erf, gelu) took 0.3 of the 1.3 s an import took; distributed is for
    # clusters; numba compiles the fused kernels. They load when first needed, and erf still
    # works then.
    program = ("import sys, pargraph\n"
               "print(sorted(m for m in ('scipy', 'distributed', 'numba') if m in sys.modules))\n"
               "print(float(pargraph.tensor([0.5]).erf()))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    loaded, erf = done.stdout.split("\n")[:2]
    assert loaded == "[]"
    assert abs(float(erf) - 0.5204998778) < 1e-6


def test_pargraph_tensor_is_the_factory_not_a_module():
    assert callable(pargraph.tensor) and not isinstance(pargraph.tensor, types.ModuleType)
    from pargraph._tensor import Tensor

    assert Tensor is pargraph.Tensor


def test_primitives_declared_as_methods_are_methods_and_functions():
    declared = [prim for prim in ops.REGISTRY.values() if prim.method]
    assert {"exp", "relu", "abs", "sigmoid"} <= {prim.name for prim in declared}
    x = pargraph.tensor([[0.5, -1.5], [2.0, 0.25]], dtype=pargraph.float64)
    for prim in declared:
        by_method = getattr(x, prim.name)()
        by_function = getattr(pargraph, prim.name)(x)
        np.testing.assert_array_equal(by_method.numpy(), by_function.numpy())
        with np.errstate(invalid="ignore"):  # log and sqrt of -1.5: nan, as in PyTorch
            expected = np.asarray(prim.forward(x.numpy()))
        np.testing.assert_array_equal(by_method.numpy(), expected)
    assert {prim.name for prim in declared} == set(pargraph.Tensor.REGISTRY_METHODS)
    assert all(f"``{prim.name}``" in pargraph.Tensor.__doc__ for prim in declared)


def test_tensor_methods_that_pytorch_has_as_functions_are_functions_too():
    torch = pytest.importorskip("torch")  # the test extra installs it
    from pargraph.functions import METHOD_ONLY

    methods = {name for name in dir(pargraph.Tensor) if not name.startswith("_")
               and callable(getattr(pargraph.Tensor, name)) and not name.endswith("_")}
    missing = {name for name in methods - METHOD_ONLY
               if hasattr(torch, name) and not hasattr(pargraph, name)}
    assert not missing
    x = pargraph.tensor([[3.0, -1.0], [2.0, 5.0]])
    for name in ("cumsum", "triu", "flip", "argsort"):  # methods written in the facade
        args = {"cumsum": (0,), "triu": (), "flip": ((0,),), "argsort": ()}[name]
        np.testing.assert_array_equal(getattr(pargraph, name)(x, *args).numpy(),
                                      getattr(x, name)(*args).numpy())


def test_function_forms_hide_no_other_name_of_the_package():
    from pargraph.functions import METHOD_FUNCTIONS, method_functions

    assert {"float", "double", "half", "long", "int", "bool"}.isdisjoint(METHOD_FUNCTIONS)
    assert (pargraph.float, pargraph.double, pargraph.long) == \
        (pargraph.float32, pargraph.float64, pargraph.int64)
    assert all(getattr(pargraph, name) is method_functions[name] for name in METHOD_FUNCTIONS
               )


def test_no_module_is_over_a_thousand_lines():
    """A room a newcomer reads whole: a module that grows past 1,000 lines is split by job."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 1000}
    assert not long, f"split these by job: {long}"
