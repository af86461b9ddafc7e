"""The README's sample outputs and the docstrings' examples come from the code: a change that
makes them stale fails here."""

import doctest
import importlib
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_samples_match_a_fresh_run():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "make_figures.py"),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "match the code" in done.stdout


def _package_modules() -> list[str]:
    import pkgutil

    import pargraph

    return [info.name for info in pkgutil.walk_packages(pargraph.__path__, "pargraph.")]


#: The package's modules, one test of their examples each, so that the test processes share them.
MODULES = _package_modules()


def test_the_public_functions_have_examples():
    finder = doctest.DocTestFinder()
    examples = sum(len(test.examples) for name in MODULES
                   for test in finder.find(importlib.import_module(name)))
    assert examples > 100


@pytest.mark.parametrize("name", MODULES)
def test_every_docstring_example_runs(name):
    """The examples in the package's docstrings are doctests: they must print what they say."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=False)
    assert not result.failed, (f"{result.failed} docstring example(s) of {name} fail (run "
                               f"pytest --doctest-modules {os.path.relpath(module.__file__)})")


def test_the_readme_comparison_table_is_made_from_the_benchmark_results():
    """The README's figures come from benchmarks/RESULTS.md, never typed by hand."""
    from benchmarks import readme

    with open(os.path.join(ROOT, "benchmarks", "RESULTS.md")) as file:
        made = readme.table(file.read())
    with open(os.path.join(ROOT, "README.md")) as file:
        text = file.read()
    assert readme.replace_block(text, readme.BLOCK, made) == text
    assert made.count("\n| ") >= 6 and "PyTorch" in made and "JAX jit" in made
