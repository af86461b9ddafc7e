"""The demos, run as a user would: accuracy, resume, learning rates, and --help."""

import graphlib
import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

DEMOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demos")
sys.path.insert(0, DEMOS)

import attention  # noqa: E402
import cnn  # noqa: E402
import digits  # noqa: E402
import fit_line  # noqa: E402
import towers  # noqa: E402


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_the_digits_read_from_scikit_learns_file_equal_load_digits(monkeypatch):
    """The demos read the digits file scikit-learn ships; where it cannot be found they ask
    ``load_digits``. Both ways give its pixels and labels."""
    import importlib.util

    from sklearn.datasets import load_digits

    expected = load_digits()
    find_spec = importlib.util.find_spec
    read = digits.digits_arrays()
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else find_spec(name, *a))
    asked = digits.digits_arrays()
    for pixels, labels in (read, asked):
        assert pixels.shape == (1797, 64) and labels.dtype == np.int64
        np.testing.assert_array_equal(pixels, expected.data)
        np.testing.assert_array_equal(labels, expected.target)


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
    # asking for fewer epochs than the checkpoint holds says so, instead of "after 1 epochs"
    with pytest.raises(SystemExit, match="has trained 3 epochs already"):
        digits.main(common + ["--epochs", "1", "--checkpoint", str(tmp_path / "b.npz"),
                              "--resume"])


def test_digits_runs_on_the_sync_scheduler(tmp_path):
    result = digits.main(["--quiet", "--plot", "", "--epochs", "1", "--scheduler", "sync",
                          "--checkpoint", str(tmp_path / "s.npz")])
    assert result["test_accuracy"] > 0.5


def _groups(traced, pattern: str, phase: str) -> dict[str, list[str]]:
    """The keys of the traced nodes of one phase, grouped by the first group of ``pattern``
    matched against their scope."""
    groups: dict[str, list[str]] = {}
    for r in traced.nodes():
        match = re.match(pattern, r.scope)
        if match and r.phase == phase:
            groups.setdefault(match.group(1), []).append(r.key)
    return groups


def _assert_independent(traced, groups: dict[str, list[str]]) -> None:
    """No node of one group is an ancestor of a node of another: the groups are work that can
    run side by side, whatever each node's measured time."""
    inputs = {r.key: [i for i in r.inputs] for r in traced.nodes()}
    ancestors: dict[str, set[str]] = {}
    for key in graphlib.TopologicalSorter(inputs).static_order():
        ancestors[key] = set().union(*([{i} | ancestors[i] for i in inputs.get(key, ())]
                                       or [set()]))

    for name, keys in groups.items():
        reach = set().union(*(ancestors[k] for k in keys))
        for other, other_keys in groups.items():
            if other != name:
                assert not reach & set(other_keys), f"group {name} depends on group {other}"


def test_cnn_reaches_97_percent_and_its_branches_are_parallel_work(capsys):
    result = cnn.main(["--quiet", "--epochs", "4"])  # four of the default twelve epochs
    assert result["test_accuracy"] >= 0.97
    # the inception block's four branches (forward) depend on none of each other's nodes
    branches = _groups(result["trace"], r"^3\.branches\.(\d)", phase="forward")
    assert sorted(branches) == ["0", "1", "2", "3"]
    _assert_independent(result["trace"], branches)
    assert "one traced step:" in capsys.readouterr().out


def test_attention_reaches_95_percent_and_its_heads_are_parallel_work(capsys):
    result = attention.main(["--quiet"])
    assert result["test_accuracy"] >= 0.95
    # each layer's four heads: their softmaxes depend on none of each other's
    traced = result["trace"]
    for layer in ("0", "1"):
        heads = {r.key: [r.key] for r in traced.nodes() if r.op == "softmax"
                 and r.phase == "forward" and r.scope.startswith(f"encoder.layers.{layer}.")}
        assert len(heads) == 4
        _assert_independent(traced, heads)
    assert "available parallelism" in capsys.readouterr().out


def test_cnn_and_attention_size_flags():
    import pargraph

    flags = ["--quiet", "--epochs", "1", "--batch-size", "500", "--lr", "0", "--seed", "3",
             "--scheduler", "sync"]
    result = cnn.main(flags + ["--width", "4"])
    assert "sync" in result["where"] and result["model"][0].out_channels == 4
    pargraph.manual_seed(3)
    for a, b in zip(_params(result["model"]), _params(cnn.build_model(4))):
        np.testing.assert_array_equal(a, b)  # --lr 0 and --seed 3: the untrained model
    result = attention.main(flags + ["--width", "8", "--heads", "2", "--layers", "1"])
    encoder = result["model"].encoder
    assert len(encoder.layers) == 1 and encoder.layers[0].self_attn.num_heads == 2
    assert result["model"].embed.out_features == 8
    pargraph.manual_seed(3)
    for a, b in zip(_params(result["model"]), _params(attention.build_model(8, 2, 1))):
        np.testing.assert_array_equal(a, b)


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
    assert "on the threads scheduler (2 threads)" in out


def _help_flags(demo: str) -> set[str]:
    out = subprocess.run([sys.executable, os.path.join(DEMOS, demo), "--help"],
                         capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s+(--[a-z-]+)", out, re.MULTILINE)) - {"--help"}


# The flags of the two digit classifiers (common.add_training_args and the execution flags).
CLASSIFIER_FLAGS = {
    "--epochs": "test_cnn_and_attention_size_flags",
    "--batch-size": "test_cnn_and_attention_size_flags",
    "--lr": "test_cnn_and_attention_size_flags",
    "--width": "test_cnn_and_attention_size_flags",
    "--seed": "test_cnn_and_attention_size_flags",
    "--quiet": "test_quiet_hides_the_progress_bar",
    "--scheduler": "test_cnn_and_attention_size_flags",
    "--workers": "test_workers_sets_the_threads",
    "--address": "test_remote.py::test_demos_run_on_the_cluster_at_address",
    "--connect-timeout": "test_connect_timeout_bounds_an_unreachable_address",
    "--dashboard": "test_dashboard_flag_starts_a_local_cluster_and_says_so",
    "--dashboard-linger": "test_dashboard_linger_keeps_the_dashboard_up_after_training",
    "--compile": "test_compile_flag_trains_as_the_eager_step",
    "--forecast": "test_forecast_prints_the_forecast_and_its_timeline",
}


# Which test shows that each flag a demo lists in --help does what it says.
FLAG_TESTS = {
    "digits.py": {
        "--epochs": "test_digits_resume_gives_the_same_parameters_as_an_uninterrupted_run",
        "--checkpoint": "test_digits_reaches_95_percent_and_writes_checkpoint_and_plot",
        "--resume": "test_digits_resume_refuses_another_seed_and_says_when_nothing_to_resume",
        "--plot": "test_digits_reaches_95_percent_and_writes_checkpoint_and_plot",
        "--batch-size": "test_digits_size_flags",
        "--lr": "test_digits_size_flags",
        "--hidden": "test_digits_size_flags",
        "--seed": "test_digits_resume_refuses_another_seed_and_says_when_nothing_to_resume",
        "--quiet": "test_quiet_hides_the_progress_bar",
        "--scheduler": "test_digits_runs_on_the_sync_scheduler",
        "--workers": "test_workers_sets_the_threads",
        "--address": "test_remote.py::test_demos_run_on_the_cluster_at_address",
        "--connect-timeout": "test_connect_timeout_bounds_an_unreachable_address",
        "--dashboard": "test_dashboard_flag_starts_a_local_cluster_and_says_so",
        "--dashboard-linger": "test_dashboard_linger_keeps_the_dashboard_up_after_training",
        "--compile": "test_compile_flag_trains_as_the_eager_step",
        "--forecast": "test_forecast_prints_the_forecast_and_its_timeline",
    },
    "cnn.py": {**CLASSIFIER_FLAGS, "--workers": "test_quiet_hides_the_progress_bar"},
    "attention.py": {**CLASSIFIER_FLAGS, "--heads": "test_cnn_and_attention_size_flags",
                     "--layers": "test_cnn_and_attention_size_flags"},
    "fit_line.py": {
        "--lr": "test_fit_line_learning_rates",
        "--steps": "test_fit_line_size_flags",
        "--points": "test_fit_line_size_flags",
        "--seed": "test_fit_line_size_flags",
        "--quiet": "test_quiet_hides_the_progress_bar",
        "--scheduler": "test_fit_line_size_flags",
        "--workers": "test_workers_sets_the_threads",
        "--address": "test_remote.py::test_demos_run_on_the_cluster_at_address",
        "--connect-timeout": "test_connect_timeout_bounds_an_unreachable_address",
        "--dashboard": "test_dashboard_flag_starts_a_local_cluster_and_says_so",
        "--dashboard-linger": "test_dashboard_linger_keeps_the_dashboard_up_after_training",
    },
    "towers.py": {
        "--towers": "test_towers_size_flags",
        "--width": "test_towers_size_flags",
        "--batch-size": "test_towers_size_flags",
        "--steps": "test_towers_size_flags",
        "--lr": "test_towers_size_flags",
        "--seed": "test_towers_size_flags",
        "--quiet": "test_quiet_hides_the_progress_bar",
        "--trace": "test_towers_trace_writes_a_chrome_trace_and_a_timeline",
        "--forecast": "test_forecast_prints_the_forecast_and_its_timeline",
        "--compile": "test_compile_flag_trains_as_the_eager_step",
        "--workers": "test_towers_reports_both_schedulers",
        "--address": "test_remote.py::test_demos_run_on_the_cluster_at_address",
        "--connect-timeout": "test_connect_timeout_bounds_an_unreachable_address",
        "--dashboard": "test_dashboard_flag_starts_a_local_cluster_and_says_so",
        "--dashboard-linger": "test_dashboard_linger_keeps_the_dashboard_up_after_training",
    },
}


@pytest.mark.parametrize("demo", sorted(FLAG_TESTS))
def test_every_flag_in_help_has_a_test(demo):
    assert _help_flags(demo) == set(FLAG_TESTS[demo])
    here = globals()
    with open(os.path.join(os.path.dirname(__file__), "test_remote.py")) as file:
        cluster_tests = file.read()
    for test in FLAG_TESTS[demo].values():
        if test.startswith("test_remote.py::"):
            assert f"def {test.split('::')[1]}(" in cluster_tests, test
        else:
            assert callable(here.get(test)), test


def test_compile_flag_trains_as_the_eager_step(tmp_path, capsys):
    base = ["--quiet", "--plot", "", "--epochs", "2", "--checkpoint", ""]
    eager = digits.main(base)
    compiled = digits.main(base + ["--compile"])
    assert compiled["history"] == eager["history"]  # bit for bit, the smaller batch too
    for a, b in zip(_params(eager["model"]), _params(compiled["model"])):
        np.testing.assert_array_equal(a, b)
    assert compiled["step"].replays > 0 and "(compiled: 3 captures" in capsys.readouterr().out
    flags = ["--quiet", "--epochs", "1", "--batch-size", "300", "--width", "4", "--scheduler",
             "sync"]
    eager = attention.main(flags)
    compiled = attention.main(flags + ["--compile"])  # OneCycleLR sets lr and betas
    assert compiled["test_accuracy"] == eager["test_accuracy"]
    assert compiled["step"].eager is None and compiled["step"].replays > 0
    result = towers.main(["--quiet", "--towers", "2", "--width", "16", "--batch-size", "16",
                          "--steps", "3", "--compile"])
    assert "threads, compiled" in result["results"] and result["compiled_speedup"] > 0
    assert "compiled vs eager (threads)" in capsys.readouterr().out


def test_digits_size_flags(tmp_path):
    import pargraph

    base = ["--quiet", "--plot", "", "--epochs", "1", "--checkpoint", str(tmp_path / "d.npz")]
    result = digits.main(base + ["--batch-size", "500", "--hidden", "24", "--lr", "0"])
    assert result["steps_per_epoch"] == 3  # 1,437 training images in batches of 500
    assert result["model"][0].out_features == 24
    pargraph.manual_seed(0)
    untrained = digits.build_model(24)
    for a, b in zip(_params(result["model"]), _params(untrained)):
        np.testing.assert_array_equal(a, b)  # --lr 0: nothing moved


def test_digits_resume_refuses_another_seed_and_says_when_nothing_to_resume(tmp_path,
                                                                             capsys):
    checkpoint = str(tmp_path / "d.npz")
    base = ["--quiet", "--plot", "", "--hidden", "16", "--checkpoint", checkpoint]
    fresh = digits.main(base + ["--epochs", "1", "--resume"])
    assert "there is no checkpoint at" in capsys.readouterr().err
    assert len(fresh["history"]["loss"]) == 1
    other = digits.main(base + ["--epochs", "1", "--seed", "1",
                                "--checkpoint", str(tmp_path / "other.npz")])
    assert any(not np.array_equal(a, b) for a, b in zip(_params(fresh["model"]),
                                                         _params(other["model"])))
    with pytest.raises(SystemExit, match="trained with --seed 0.*resume it with --seed 0"):
        digits.main(base + ["--epochs", "2", "--resume", "--seed", "1"])
    assert pargraph_epoch(checkpoint) == 0  # untouched


def pargraph_epoch(path: str) -> int:
    import pargraph

    return pargraph.load(path)["epoch"]


def test_fit_line_size_flags():
    result = fit_line.main(["--quiet", "--steps", "7", "--points", "13", "--seed", "3",
                            "--scheduler", "sync"])
    assert result["steps"] == 7 and result["points"] == 13 and "sync" in result["where"]
    again = fit_line.main(["--quiet", "--steps", "7", "--points", "13", "--seed", "4"])
    assert not np.array_equal(result["x"], again["x"])


def test_towers_size_flags():
    import pargraph

    result = towers.main(["--quiet", "--towers", "3", "--width", "16", "--batch-size", "24",
                          "--steps", "4", "--lr", "0", "--seed", "5"])
    assert len(result["model"].towers) == 3 and result["batch_shape"] == (24, 64)
    assert result["model"].towers[0][0].out_features == 16
    assert all(len(times) == 4 for times, _ in result["results"].values())
    pargraph.manual_seed(5)
    untrained = towers.Towers(3, 16)
    for a, b in zip(_params(result["model"]), _params(untrained)):
        np.testing.assert_array_equal(a, b)  # --lr 0, --seed 5


def test_towers_trace_writes_a_chrome_trace_and_a_timeline(tmp_path, capsys):
    trace = tmp_path / "step.json"
    towers.main(["--quiet", "--towers", "2", "--width", "16", "--batch-size", "16",
                 "--steps", "1", "--trace", str(trace)])
    assert json.loads(trace.read_text())["traceEvents"]
    assert (tmp_path / "step.png").read_bytes()[:4] == b"\x89PNG"
    assert "available parallelism" in capsys.readouterr().out


SMALL = {"digits.py": ["--epochs", "1", "--hidden", "8", "--plot", ""],
         "cnn.py": ["--epochs", "1", "--width", "4", "--batch-size", "256"],
         "attention.py": ["--epochs", "1", "--width", "8", "--heads", "2", "--layers", "1",
                          "--batch-size", "256"],
         "fit_line.py": ["--steps", "5"],
         "towers.py": ["--towers", "2", "--width", "8", "--batch-size", "8", "--steps", "1"]}


def _run(demo: str, *flags: str, tmp_path, **kwargs) -> subprocess.CompletedProcess:
    extra = ["--checkpoint", str(tmp_path / "c.npz")] if demo == "digits.py" else []
    return subprocess.run([sys.executable, os.path.join(DEMOS, demo), *SMALL[demo], *extra,
                           *flags], capture_output=True, text=True, **kwargs)


# attention.py prints its forecast as cnn.py does: both train through common.train_classifier.
@pytest.mark.parametrize("demo", ["towers.py", "cnn.py", "digits.py"])
def test_forecast_prints_the_forecast_and_its_timeline(demo, tmp_path):
    from pargraph.machine_costs import LOOPBACK_FORM, Network

    # this machine's loopback costs as if measured before: the demo reads them
    cache = tmp_path / "cache" / "pargraph"
    cache.mkdir(parents=True)
    (cache / "loopback.json").write_text(json.dumps(Network(
        task_latency=3e-3, scheduler_task=1e-3, run_latency=9e-3, run_node=1e-5,
        transfer_latency=2e-3, bandwidth=1e9, replicate_latency=3e-3,
        worker_task=1e-3, compiled_latency=5e-3, compiled_node=5e-6, compiled_value=1e-5,
        worker_transfer=1e-3, scheduler_transfer=5e-4, worker_replicate=1e-3,
        scheduler_replicate=5e-4, worker_value=2e-5).__dict__ | {"form": LOOPBACK_FORM}))
    flags = ["--forecast"] + (["--trace", str(tmp_path / "step.json")]
                              if demo == "towers.py" else [])
    # the forecast's own measuring is test_forecast's and test_machine_costs': here briefly
    done = _run(demo, "--quiet", *flags, timeout=180, check=True, tmp_path=tmp_path,
                env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
                     "DASK_PARGRAPH__MEASURE_SECONDS": "0.5"})
    for line in ("forecast of one traced step", "16 threads", "4 workers x 1 thread"):
        assert line in done.stdout
    if demo == "towers.py":
        assert (tmp_path / "step-forecast.png").read_bytes()[:4] == b"\x89PNG"
        on_cluster = _run(demo, "--quiet", "--forecast", "--dashboard", "--dashboard-linger",
                          "0", timeout=180, check=True, tmp_path=tmp_path)
        assert "--forecast forecasts a step traced on this machine's threads" in \
            on_cluster.stdout


# attention.py's bar is cnn.py's: both train through common.train_classifier. The loud run
# also sets the threads where the demo has --workers (test_workers_sets_the_threads).
@pytest.mark.parametrize("demo", sorted(set(SMALL) - {"attention.py"}))
def test_quiet_hides_the_progress_bar(demo, tmp_path):
    workers = [] if demo == "towers.py" else ["--workers", "3"]
    loud = _run(demo, *workers, timeout=120, check=True, tmp_path=tmp_path)
    quiet = _run(demo, "--quiet", timeout=120, check=True, tmp_path=tmp_path)
    assert "step/s" in loud.stderr or "s/step" in loud.stderr
    assert "step/s" not in quiet.stderr and "s/step" not in quiet.stderr
    if workers:
        assert "on the threads scheduler (3 threads)" in loud.stdout


def test_workers_sets_the_threads(tmp_path):
    # the other demos' --workers runs are test_quiet_hides_the_progress_bar's loud ones
    done = _run("attention.py", "--quiet", "--workers", "3", timeout=120, check=True,
                tmp_path=tmp_path)
    assert "on the threads scheduler (3 threads)" in done.stdout


@pytest.mark.parametrize("demo", sorted(SMALL))
def test_connect_timeout_bounds_an_unreachable_address(demo, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    done = _run(demo, "--quiet", "--address", address, "--connect-timeout", "1", timeout=60,
                tmp_path=tmp_path)
    assert done.returncode != 0
    # The demo passed its timeout on (the bound itself is pargraph.connect's, tested in
    # tests/test_remote.py; a wall clock around a whole interpreter measures the machine).
    assert f"could not reach the dask scheduler at {address} within 1 s" in done.stderr


@pytest.mark.parametrize("demo", sorted(SMALL))
def test_dashboard_flag_starts_a_local_cluster_and_says_so(demo, tmp_path):
    done = _run(demo, "--quiet", "--dashboard", timeout=120, check=True, tmp_path=tmp_path)
    link = next(line for line in done.stdout.splitlines() if line.startswith("dask dashboard"))
    assert "http://127.0.0.1:" in link and "/status" in link and "/tasks" in link
    assert "on an in-process dask cluster" in done.stdout


def test_dashboard_linger_keeps_the_dashboard_up_after_training():
    import urllib.request

    process = subprocess.Popen([sys.executable, os.path.join(DEMOS, "fit_line.py"), "--quiet",
                                "--steps", "20", "--dashboard", "--dashboard-linger", "4"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:  # training is done when the linger line comes
            if "stays up at" in line:
                break
        link = line.split("stays up at ", 1)[1].split(" ", 1)[0]
        assert link.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(link, timeout=10) as answer:  # still serving
            assert answer.status == 200
        assert process.wait(timeout=30) == 0  # and it ends by itself
    finally:
        process.kill()


@pytest.mark.parametrize("demo", ["fit_line.py", "digits.py"])
def test_progress_prints_lines_not_carriage_returns_when_piped(demo, tmp_path):
    extra = ["--epochs", "2", "--plot", "", "--checkpoint", ""] if demo == "digits.py" else []
    done = subprocess.run([sys.executable, os.path.join(DEMOS, demo), *extra],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\r") <= 3, done.stderr[-500:]
