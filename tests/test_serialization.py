"""save/load: round trips, pickled objects only under PyTorch's weights_only rule, and atomic
writes."""

import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import pargraph
from pargraph import nn, optim


def test_model_and_optimizer_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=0.01)
    model(pargraph.ones(5, 3)).sum().backward()
    opt.step()
    path = tmp_path / "checkpoint.npz"
    pargraph.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 4,
                   "note": "hi", "pair": (1, 2.5), "none": None}, path)
    state = pargraph.load(path)
    assert state["epoch"] == 4 and state["note"] == "hi" and state["pair"] == (1, 2.5)
    assert state["none"] is None
    restored = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    restored.load_state_dict(state["model"])
    for a, b in zip(model.parameters(), restored.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    opt2 = optim.Adam(restored.parameters(), lr=0.5)
    opt2.load_state_dict(state["optimizer"])
    assert opt2.param_groups[0]["lr"] == 0.01
    assert opt2.state[restored[0].weight]["step"] == 1
    assert isinstance(state["optimizer"]["state"][0]["exp_avg"], pargraph.Tensor)


def test_load_refuses_pickles(tmp_path):
    raw = tmp_path / "evil.pkl"
    raw.write_bytes(pickle.dumps({"w": np.ones(2)}))
    with pytest.raises(pargraph.CheckpointError, match="not a valid pargraph checkpoint"):
        pargraph.load(raw)
    with_object = tmp_path / "object.npz"
    np.savez(with_object, __structure__=np.frombuffer(b'{"tensor": "a0"}', np.uint8),
             a0=np.array([{"code": 1}], dtype=object))
    with pytest.raises(pargraph.CheckpointError, match="never loads pickles"):
        pargraph.load(with_object)
    with pytest.raises(TypeError, match="cannot pickle"):  # what pickle cannot write
        pargraph.save({"f": (x for x in ())}, tmp_path / "x.npz")


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    pargraph.save({"w": pargraph.ones(3)}, path)

    def crash(file, **arrays):
        file.write(b"partial garbage")
        raise KeyboardInterrupt("power cut while saving")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        pargraph.save({"w": pargraph.zeros(3)}, path)
    monkeypatch.undo()
    assert pargraph.load(path)["w"].tolist() == [1.0, 1.0, 1.0]
    assert os.listdir(tmp_path) == ["model.npz"]  # no temporary file left behind


def _checkpoint(tmp_path, name="model.npz"):
    path = tmp_path / name
    pargraph.save({"w": pargraph.ones(64, 64), "b": pargraph.zeros(3), "epoch": 2}, path)
    return path


def _damaged_files(tmp_path):
    good = _checkpoint(tmp_path).read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 3] ^= 0x10  # inside a0's data
    npy = tmp_path / "plain.npy"
    np.save(npy, np.ones(3))
    crafted = tmp_path / "crafted.npz"
    deep = "[" * 100_000 + "]" * 100_000
    np.savez(crafted, __structure__=np.frombuffer(deep.encode(), np.uint8))
    unknown = tmp_path / "unknown.npz"
    np.savez(unknown, __structure__=np.frombuffer(b'{"module": "os"}', np.uint8))
    missing = tmp_path / "missing_member.npz"
    np.savez(missing, __structure__=np.frombuffer(b'{"tensor": "a7"}', np.uint8))
    no_structure = tmp_path / "no_structure.npz"
    np.savez(no_structure, a0=np.ones(2))
    return {
        "zero bytes": b"",
        "truncated": good[: len(good) // 2],
        "truncated end": good[:-30],
        "bit flipped": bytes(flipped),
        "an .npy file": npy.read_bytes(),
        "deeply nested": crafted.read_bytes(),
        "unknown entry": unknown.read_bytes(),
        "missing member": missing.read_bytes(),
        "no structure": no_structure.read_bytes(),
        "text": b"hello, not a checkpoint",
    }


def test_every_kind_of_damaged_file_raises_one_clear_error(tmp_path):
    for what, content in _damaged_files(tmp_path).items():
        path = tmp_path / "damaged.npz"
        path.write_bytes(content)
        with pytest.raises(pargraph.CheckpointError) as error:
            pargraph.load(path)
        assert str(path) in str(error.value), what
        assert isinstance(error.value, ValueError)
    with pytest.raises(FileNotFoundError):
        pargraph.load(tmp_path / "nowhere.npz")


def test_save_and_load_take_file_objects_as_torch_does(tmp_path):
    """``torch.save(state, buffer)`` / ``torch.load(buffer)`` with an ``io.BytesIO`` or an
    open file, written and read where the object stands; a damaged one raises the one error,
    naming the object."""
    import io

    model = nn.Linear(3, 2)
    buffer = io.BytesIO(b"prefix")
    buffer.seek(0, io.SEEK_END)
    pargraph.save({"model": model.state_dict(), "step": 7}, buffer)
    buffer.seek(len(b"prefix"))
    state = pargraph.load(buffer)
    assert state["step"] == 7
    np.testing.assert_array_equal(state["model"]["weight"].numpy(), model.weight.detach().numpy())
    with open(tmp_path / "open.pt", "wb") as file:
        pargraph.save([pargraph.arange(4)], file)
    with open(tmp_path / "open.pt", "rb") as file:
        assert pargraph.load(file)[0].tolist() == [0, 1, 2, 3]
    for what, content in _damaged_files(tmp_path).items():
        with pytest.raises(pargraph.CheckpointError) as error:
            pargraph.load(io.BytesIO(content))
        assert "BytesIO" in str(error.value), what


def test_load_reads_only_the_members_the_structure_names_and_checks_their_size(tmp_path):
    path = tmp_path / "bomb.npz"
    structure = b'{"format": "pargraph-checkpoint", "version": 1, "root": {"tensor": ' \
                b'{"member": "a0", "shape": [2], "dtype": "<f4"}}}'
    big = np.zeros(2**24, dtype=np.float32)  # 64 MiB, compressed to almost nothing
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("__structure__.npy", "w") as member:
            np.lib.format.write_array(member, np.frombuffer(structure, np.uint8))
        with archive.open("a0.npy", "w") as member:
            np.lib.format.write_array(member, big)
        with archive.open("a1.npy", "w") as member:  # named by nothing: never read
            np.lib.format.write_array(member, big)
    assert path.stat().st_size < 2**20
    start = time.perf_counter()
    with pytest.raises(pargraph.CheckpointError, match=r"member 'a0' has shape \(16777216,\), "
                                                       r"the structure says \(2,\)"):
        pargraph.load(path)
    assert time.perf_counter() - start < 1.0  # refused from the header, nothing decoded


def test_checkpoints_of_pargraph_0_1_still_load(tmp_path):
    path = tmp_path / "old.npz"
    np.savez(path, __structure__=np.frombuffer(b'{"dict": [["w", {"tensor": "a0"}]]}', np.uint8),
             a0=np.arange(3.0))
    assert pargraph.load(path)["w"].tolist() == [0.0, 1.0, 2.0]


def test_a_save_killed_midway_leaves_no_temporary_for_good(tmp_path):
    path = tmp_path / "model.npz"
    script = (f"import numpy as np, pargraph, os, signal\n"
              f"def stall(file, **arrays):\n"
              f"    file.write(b'partial'); file.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
              f"np.savez = stall\n"
              f"pargraph.save({{'w': pargraph.ones(2)}}, {str(path)!r})\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    left = [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith("model.npz.")
    live = tmp_path / f"model.npz.{os.getppid()}-abcd.tmp"  # a live process's save: kept
    live.write_bytes(b"in progress")
    pargraph.save({"w": pargraph.zeros(2)}, path)
    assert sorted(os.listdir(tmp_path)) == ["model.npz", live.name]
    assert pargraph.load(path)["w"].tolist() == [0.0, 0.0]


def test_load_state_dict_validates_every_value_before_changing_any():
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    state = {k: v.numpy() + 1 for k, v in model.state_dict().items()}
    state["1.weight"] = np.array([["a", "b", "c"]])
    with pytest.raises(RuntimeError, match="1.weight"):
        model.load_state_dict(state)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])  # 0.weight unchanged too
    state["1.weight"] = np.ones((1, 3), dtype=np.float64)  # converted to the parameter's dtype
    model.load_state_dict(state)
    assert model[1].weight.dtype == pargraph.float32
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), before["0.weight"] + 1)


def test_optimizer_load_state_dict_changes_nothing_when_a_value_is_bad():
    model = nn.Linear(2, 2)
    opt = optim.Adam(model.parameters(), lr=0.01)
    model(pargraph.ones(1, 2)).sum().backward()
    opt.step()
    state = opt.state_dict()
    state["param_groups"][0]["lr"] = 0.5
    state["state"][1]["exp_avg"] = np.ones((7,))
    with pytest.raises(ValueError, match=r"state\[1\]\['exp_avg'\] has shape "
                                         r"pargraph.Size\(\[7\]\)"):
        opt.load_state_dict(state)
    assert opt.param_groups[0]["lr"] == 0.01


def _npy(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array)
    return buffer.getvalue()


def _structure(entries: dict) -> bytes:
    import json

    root = {"dict": [[name, {"tensor": member}] for name, member in entries.items()]}
    text = json.dumps({"format": "pargraph-checkpoint", "version": 1, "root": root})
    return _npy(np.frombuffer(text.encode(), dtype=np.uint8))


BIG = {"member": "a0", "shape": [2**22], "dtype": "<f4"}  # 16 MiB of zeros, ~16 KB deflated


def _bomb(tmp_path, entries: dict, members: dict, name: str = "bomb.npz"):
    import warnings
    import zipfile

    path = tmp_path / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate names we write
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("__structure__.npy", _structure(entries))
            for member, data in members:
                archive.writestr(member, data)
    return path


def _load_within(path, budget=64 * 2**20, **options):
    """pargraph.load's error, checking that it allocated less than ``budget`` bytes."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(pargraph.CheckpointError) as raised:
            pargraph.load(path, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < budget, peak
    assert str(path) in str(raised.value)
    return str(raised.value)


def test_one_member_named_many_times_is_refused_before_it_is_inflated_twice(tmp_path):
    path = _bomb(tmp_path, {f"w{k}": BIG for k in range(64)},
                 [("a0.npy", _npy(np.zeros(2**22, np.float32)))])
    assert path.stat().st_size < 100_000  # names 64 times the same 16 MiB
    assert "names member 'a0' twice" in _load_within(path)


def test_repeated_member_names_are_refused(tmp_path):
    path = _bomb(tmp_path, {"w": BIG},
                 [("a0.npy", _npy(np.zeros(2**22, np.float32)))] * 3)
    assert "appears twice" in _load_within(path, budget=2**20)


def _patched_central_entry(path, name: str, field: int, value: int) -> None:
    """Overwrite a 4-byte field of ``name``'s central-directory record (offset ``field``)."""
    import struct

    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")  # the first central-directory record
    while True:
        length = struct.unpack("<H", data[at + 28:at + 30])[0]
        if data[at + 46:at + 46 + length].decode() == name:
            break
        extra, comment = struct.unpack("<HH", data[at + 30:at + 34])
        at += 46 + length + extra + comment
    data[at + field:at + field + 4] = struct.pack("<I", value)
    path.write_bytes(bytes(data))


def test_a_member_declaring_more_than_deflate_can_give_is_refused(tmp_path):
    small = {"member": "a0", "shape": [4], "dtype": "<f4"}
    path = _bomb(tmp_path, {"w": small}, [("a0.npy", _npy(np.zeros(4, np.float32)))])
    _patched_central_entry(path, "a0.npy", 24, 2**31)  # its uncompressed size
    assert "declares 2147483648 bytes" in _load_within(path, budget=2**20)


def test_overlapping_members_are_refused(tmp_path):
    import zipfile

    path = _bomb(tmp_path, {"w": BIG, "v": {**BIG, "member": "a1"}},
                 [("a0.npy", _npy(np.zeros(2**22, np.float32))),
                  ("a1.npy", _npy(np.zeros(2**22, np.float32)))])
    with zipfile.ZipFile(path) as archive:
        first = archive.getinfo("a0.npy").header_offset
    _patched_central_entry(path, "a1.npy", 42, first)  # a1 starts where a0 starts
    assert "overlap" in _load_within(path)


def test_max_bytes_bounds_what_load_inflates(tmp_path):
    path = tmp_path / "model.npz"
    pargraph.save({"w": pargraph.zeros(1000)}, path)
    assert "max_bytes=1000" in _load_within(path, max_bytes=1000)
    assert pargraph.load(path, max_bytes=10_000)["w"].shape == (1000,)
    loaded = pargraph.load(path, map_location="cpu", weights_only=True)
    assert loaded["w"].shape == (1000,)
    with pytest.raises(RuntimeError, match="CPU"):
        pargraph.load(path, map_location="cuda:0")


def test_the_safe_globals_allow_list_is_kept_and_loading_needs_none(tmp_path):
    from pargraph import serialization

    class Config:
        pass

    path = tmp_path / "state.npz"
    pargraph.save({"step": 3, "weights": pargraph.ones(2)}, path)
    serialization.add_safe_globals([Config])
    try:
        with serialization.safe_globals([dict]):
            assert serialization.get_safe_globals() == [Config, dict]
        assert serialization.get_safe_globals() == [Config]
        assert serialization.get_unsafe_globals_in_checkpoint(path) == []
        assert pargraph.load(path, weights_only=True)["step"] == 3
    finally:
        serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    (tmp_path / "bad.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(serialization.CheckpointError):
        serialization.get_unsafe_globals_in_checkpoint(tmp_path / "bad.npz")


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)
        self.rnn, self.head = nn.LSTM(3, 4), nn.Linear(4, 2)
        self.register_buffer("seen", pargraph.zeros(2))
        self.table = {"scale": np.arange(3.0), "name": "net"}

    def forward(self, x):
        return self.head(x)


def test_a_whole_module_saves_and_loads_under_pytorchs_weights_only_rule(tmp_path):
    from pargraph import serialization

    torch = pytest.importorskip("torch")
    model = _Net()
    model.norm(pargraph.randn(2, 2, 3, 3))  # running statistics and a batch count
    path = tmp_path / "model.pt"
    pargraph.save(model, path)
    # Loading a pickled module needs weights_only=False, or its classes allowed: as in
    # PyTorch since 2.6 (the same exception type, the class named).
    theirs_path = tmp_path / "theirs.pt"
    torch.save(torch.nn.Linear(2, 2), theirs_path)
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(theirs_path)
    with pytest.raises(pickle.UnpicklingError, match="weights_only` set to `False`") as ours:
        pargraph.load(path)
    assert "Unsupported global" in str(theirs.value) and "Unsupported global" in str(ours.value)
    assert f"{__name__}._Net" in str(ours.value)
    classes = [_Net, nn.Conv2d, nn.BatchNorm2d, nn.LSTM, nn.Linear]
    assert serialization.get_unsafe_globals_in_checkpoint(path) == [
        f"{c.__module__}.{c.__qualname__}" for c in classes]
    for loaded in [pargraph.load(path, weights_only=False)]:
        assert type(loaded) is _Net and loaded.table["name"] == "net"
        np.testing.assert_array_equal(loaded.table["scale"], np.arange(3.0))
        assert list(loaded.state_dict()) == list(model.state_dict())
        for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
            assert type(a) is type(b) and a.dtype == b.dtype, name
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert all(type(p) is nn.Parameter and p.requires_grad for p in loaded.parameters())
        assert loaded.conv._parent() is loaded  # names resolve as in the saved model
        out = loaded(pargraph.randn(1, 4))
        out.sum().backward()
        assert loaded.head.weight.grad is not None
    with serialization.safe_globals(classes):
        assert type(pargraph.load(path)) is _Net
        assert serialization.get_unsafe_globals_in_checkpoint(path) == []


def test_a_weights_only_load_runs_no_code_from_a_crafted_checkpoint(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "crafted.pt"
    pargraph.save({"w": Payload()}, path)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match="system"):
        pargraph.load(path)
    with pytest.raises(pickle.UnpicklingError, match="system"):
        pargraph.load(path, weights_only=True)
    assert not marker.exists()
    assert [g.split(".")[-1] for g in
            pargraph.serialization.get_unsafe_globals_in_checkpoint(path)] == ["system"]


@pytest.mark.parametrize("mirror_every", [0, 1])
def test_an_optimizer_and_plain_tensors_inside_objects_keep_what_they_are(tmp_path,
                                                                         mirror_every):
    import dask

    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=0.1)
    model(pargraph.randn(4, 3)).sum().backward()
    with dask.config.set({"pargraph.mirror-every": mirror_every}):  # a mirror thread: not kept
        opt.step()
    leaf = pargraph.ones(2, requires_grad=True)
    path = tmp_path / "opt.pt"
    pargraph.save({"opt": opt, "leaf": leaf, "frozen": pargraph.arange(3)}, path)
    loaded = pargraph.load(path, weights_only=False)
    assert loaded["leaf"].requires_grad and not loaded["frozen"].requires_grad
    assert loaded["frozen"].dtype == pargraph.int64
    params = loaded["opt"].param_groups[0]["params"]
    assert all(p in loaded["opt"].state for p in params)  # the same objects, as pickled
    state = loaded["opt"].state_dict()["state"][0]
    np.testing.assert_array_equal(state["exp_avg"].numpy(),
                                  opt.state_dict()["state"][0]["exp_avg"].numpy())
