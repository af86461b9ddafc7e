"""The demos, run as a user would: accuracy, resume, learning rates, and --help."""

import os
import subprocess
import sys

import numpy as np
import pytest

DEMOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demos")
sys.path.insert(0, DEMOS)

import digits  # noqa: E402
import fit_line  # noqa: E402
import towers  # noqa: E402


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_digits_reaches_95_percent_and_writes_checkpoint_and_plot(tmp_path):
    checkpoint, plot = tmp_path / "d.npz", tmp_path / "curves.png"
    result = digits.main(["--quiet", "--checkpoint", str(checkpoint), "--plot", str(plot)])
    assert result["test_accuracy"] >= 0.95
    assert checkpoint.exists() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_digits_resume_gives_the_same_parameters_as_an_uninterrupted_run(tmp_path):
    common = ["--quiet", "--plot", "", "--hidden", "32"]
    straight = digits.main(common + ["--epochs", "3", "--checkpoint", str(tmp_path / "a.npz")])
    digits.main(common + ["--epochs", "2", "--checkpoint", str(tmp_path / "b.npz")])
    resumed = digits.main(common + ["--epochs", "3", "--checkpoint", str(tmp_path / "b.npz"),
                                    "--resume"])
    for a, b in zip(_params(straight["model"]), _params(resumed["model"])):
        np.testing.assert_array_equal(a, b)
    assert resumed["history"]["loss"] == straight["history"]["loss"]


def test_digits_runs_on_the_sync_scheduler(tmp_path):
    result = digits.main(["--quiet", "--plot", "", "--epochs", "1", "--scheduler", "sync",
                          "--checkpoint", str(tmp_path / "s.npz")])
    assert result["test_accuracy"] > 0.5


def test_fit_line_learning_rates(capsys):
    good = fit_line.main(["--quiet"])
    assert good["w"] == pytest.approx(3, abs=0.05) and good["b"] == pytest.approx(7, abs=0.05)
    assert "converged" in capsys.readouterr().out
    fit_line.main(["--quiet", "--lr", "0.001"])
    assert "too small" in capsys.readouterr().out
    fit_line.main(["--quiet", "--lr", "1.5"])
    assert "diverged" in capsys.readouterr().out


def test_towers_reports_both_schedulers(capsys):
    result = towers.main(["--quiet", "--towers", "2", "--width", "32", "--batch-size", "64",
                          "--steps", "2", "--workers", "2"])
    out = capsys.readouterr().out
    assert "threads" in out and "sync" in out and result["speedup"] > 0


@pytest.mark.parametrize("demo", ["digits.py", "fit_line.py", "towers.py"])
def test_demos_have_help(demo):
    out = subprocess.run([sys.executable, os.path.join(DEMOS, demo), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--scheduler" in out and "--workers" in out


def test_dashboard_flag_starts_a_local_cluster_and_prints_its_link():
    done = subprocess.run([sys.executable, os.path.join(DEMOS, "fit_line.py"), "--quiet",
                           "--steps", "20", "--dashboard"],
                          capture_output=True, text=True, timeout=120, check=True)
    link = next(line for line in done.stdout.splitlines() if line.startswith("dask dashboard"))
    assert "http://127.0.0.1:" in link and "/status" in link and "/tasks" in link
    assert "learned f(x)" in done.stdout
