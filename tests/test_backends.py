"""`pargraph.backends` and the global numeric flags: what programs set is kept, and what
PyTorch refuses is refused."""

import warnings

import pytest

import pargraph

torch = pytest.importorskip("torch")


def test_backend_flags_keep_what_programs_set():
    pargraph.backends.cudnn.benchmark = True
    pargraph.backends.cudnn.deterministic = True
    assert pargraph.backends.cudnn.benchmark and pargraph.backends.cudnn.deterministic
    assert not pargraph.backends.cudnn.is_available() and not pargraph.backends.mps.is_available()
    pargraph.backends.cuda.matmul.allow_tf32 = True
    assert pargraph.backends.cuda.matmul.allow_tf32
    pargraph.backends.cudnn.benchmark = pargraph.backends.cudnn.deterministic = False


def test_global_numeric_flags_keep_and_refuse_what_pytorchs_do():
    before = (torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        for precision in ("high", "low", "medium", "HIGH", "highest"):
            with warnings.catch_warnings(record=True) as theirs:
                warnings.simplefilter("always")
                torch.set_float32_matmul_precision(precision)
            with warnings.catch_warnings(record=True) as ours:
                warnings.simplefilter("always")
                pargraph.set_float32_matmul_precision(precision)
            # Theirs adds where in PyTorch's C++ it was raised.
            assert [str(w.message) for w in ours] == \
                [str(w.message).split(" (Triggered internally")[0] for w in theirs]
            assert pargraph.get_float32_matmul_precision() == \
                torch.get_float32_matmul_precision()
        for mode, warn_only in ((True, False), (True, True), (False, True), (False, False)):
            torch.use_deterministic_algorithms(mode, warn_only=warn_only)
            pargraph.use_deterministic_algorithms(mode, warn_only=warn_only)
            assert (pargraph.are_deterministic_algorithms_enabled(),
                    pargraph.is_deterministic_algorithms_warn_only_enabled()) == \
                (torch.are_deterministic_algorithms_enabled(),
                 torch.is_deterministic_algorithms_warn_only_enabled())
        for args, keywords in (((1,), {}), (("yes",), {}), ((None,), {}),
                               ((True,), {"warn_only": 1})):
            with pytest.raises(TypeError) as theirs:
                torch.use_deterministic_algorithms(*args, **keywords)
            with pytest.raises(TypeError) as ours:
                pargraph.use_deterministic_algorithms(*args, **keywords)
            assert str(ours.value).split("(): ")[1] == str(theirs.value).split("(): ")[1]
        # A seeding helper's lines: PyTorch ignores them without CUDA, and so does pargraph.
        assert pargraph.cuda.manual_seed(0) is None and pargraph.cuda.manual_seed_all(0) is None
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.use_deterministic_algorithms(before[1], warn_only=before[2])
        pargraph.set_float32_matmul_precision("highest")
        pargraph.use_deterministic_algorithms(False)
