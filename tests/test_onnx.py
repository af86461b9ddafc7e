"""`pargraph.onnx`: export says what to do instead, as no ONNX file is written."""

import pytest

import pargraph


def test_onnx_export_says_what_to_do_instead():
    with pytest.raises(NotImplementedError, match=r"pargraph.save\(model.state_dict\(\)"):
        pargraph.onnx.export(pargraph.nn.Linear(2, 2), pargraph.ones(1, 2), "model.onnx")
    assert not pargraph.onnx.is_in_onnx_export()
