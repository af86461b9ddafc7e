"""The README's sample outputs and the docstrings' examples come from the code: a change that
makes them stale fails here."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_readme_samples_match_a_fresh_run():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "make_figures.py"),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "match the code" in done.stdout


def test_every_docstring_example_runs():
    """The examples in the package's docstrings are doctests: they must print what they say."""
    import doctest
    import importlib
    import pkgutil

    import pargraph

    failed, attempted = {}, 0
    for info in pkgutil.walk_packages(pargraph.__path__, "pargraph."):
        module = importlib.import_module(info.name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False,
                                 report=False)
        attempted += result.attempted
        if result.failed:
            failed[info.name] = result.failed
    assert attempted > 100  # the public functions' examples
    assert not failed, f"docstring examples that fail (run pytest --doctest-modules): {failed}"


def test_the_readme_comparison_table_is_made_from_the_benchmark_results():
    """The README's figures come from benchmarks/RESULTS.md, never typed by hand."""
    from benchmarks import readme

    with open(os.path.join(ROOT, "benchmarks", "RESULTS.md")) as file:
        made = readme.table(file.read())
    with open(os.path.join(ROOT, "README.md")) as file:
        text = file.read()
    assert readme.replace_block(text, readme.BLOCK, made) == text
    assert made.count("\n| ") >= 6 and "PyTorch" in made and "JAX jit" in made
