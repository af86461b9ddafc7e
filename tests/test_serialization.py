"""save/load: round trips, no pickles ever, and atomic writes."""

import os
import pickle

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
    with pytest.raises(ValueError, match="not a pargraph checkpoint.*never loads pickled data"):
        pargraph.load(raw)
    with_object = tmp_path / "object.npz"
    np.savez(with_object, __structure__=np.frombuffer(b'{"tensor": "a0"}', np.uint8),
             a0=np.array([{"code": 1}], dtype=object))
    with pytest.raises(ValueError, match="never loads pickled data"):
        pargraph.load(with_object)
    with pytest.raises(TypeError, match="cannot store a object"):
        pargraph.save({"f": object()}, tmp_path / "x.npz")


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
