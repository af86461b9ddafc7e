"""pargraph.profiler: PyTorch's profiler API over traces: rows by task name, record_function
blocks, schedules and their handler, the Chrome trace."""

import json
import warnings

import pytest

import pargraph
from pargraph import nn
from pargraph.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)


def _train_steps(model, opt, x, steps, prof=None):
    for _ in range(steps):
        with record_function("train_step"):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
        loss.item()
        if prof is not None:
            prof.step()


def _model():
    pargraph.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    return model, pargraph.optim.SGD(model.parameters(), lr=0.1), pargraph.randn(32, 8)


def test_key_averages_count_every_node_by_task_name_with_record_function_blocks():
    model, opt, x = _model()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _train_steps(model, opt, x, 3)
    rows = {row.key: row for row in prof.key_averages()}
    assert rows["linear"].count == 6 and rows["relu"].count == 3  # 2 layers, 3 steps
    assert rows["sgd_update"].count == 12  # 4 parameters
    assert rows["train_step"].count == 3
    assert all(row.cpu_time_total > 0 and row.cpu_time == row.cpu_time_total / row.count
               for row in rows.values())
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=3)
    lines = table.splitlines()
    assert "Name" in lines[1] and "# of Calls" in lines[1]
    assert len([line for line in lines if line.strip().endswith(("3", "6", "12", "15"))]) <= 3
    assert lines[3].split()[0] == max(rows.values(), key=lambda r: r.cpu_time_total).key
    assert "Self CPU time total:" in table
    with pytest.raises(AttributeError, match="sort by"):
        prof.key_averages().table(sort_by="cuda_time_total")


def test_a_schedule_counts_its_active_steps_and_calls_the_handler_per_cycle(tmp_path):
    torch = pytest.importorskip("torch")  # the test extra installs the CPU build
    for arguments in ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2},
                      {"wait": 0, "warmup": 2, "active": 1, "skip_first": 3}):
        ours, theirs = schedule(**arguments), torch.profiler.schedule(**arguments)
        assert [ours(k).name for k in range(12)] == [theirs(k).name for k in range(12)]
    model, opt, x = _model()
    saved = []

    def handler(prof):
        saved.append(sum(row.count for row in prof.key_averages() if row.key == "linear"))
        tensorboard_trace_handler(str(tmp_path), worker_name="w")(prof)

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=handler) as prof:
        _train_steps(model, opt, x, 9, prof)
    assert saved == [4, 4]  # two cycles of two recorded steps, two linear layers each
    written = sorted(tmp_path.glob("w.*.pt.trace.json"))
    assert len(written) == 2
    events = json.loads(written[0].read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "linear") == 4
    assert schedule(wait=0, warmup=1, active=1)(1) is ProfilerAction.RECORD_AND_SAVE


def test_other_activities_warn_and_the_module_is_torch_profiler():
    with pytest.warns(UserWarning, match="CPU only"):
        profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pargraph.profiler.profile() as prof:
            pargraph.ones(2).exp().sum().item()
    assert sorted(row.key for row in prof.key_averages()) == ["exp", "sum"]

    @record_function("decorated")
    def work():
        return pargraph.ones(2).sum().item()

    with profile() as prof:
        work()
    assert [row.count for row in prof.key_averages() if row.key == "decorated"] == [1]
