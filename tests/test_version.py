"""``pargraph.__version__`` and ``pargraph.version``: a version string that compares as
``torch.__version__`` does, with every kind of value programs compare it to."""

import importlib.metadata
import itertools
import operator
import random

import pytest
from packaging.version import Version

import pargraph
from pargraph.version import TorchVersion

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
from torch._vendor.packaging.version import Version as TheirVersionNumber  # noqa: E402
from torch.torch_version import TorchVersion as TheirVersion  # noqa: E402

OPERATORS = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


def _others(seed: int, count: int) -> list[tuple]:
    """Values programs compare a version to, as ``(ours, PyTorch's)``: release strings of 1-3
    parts near 2.13 with local labels and pre-releases, the same as tuples and as versions
    (``packaging``'s for ours, the copy PyTorch vendors for its own), strings that are no
    version at all, and other objects."""
    draw = random.Random(seed)
    values: list = [(v, v) for v in ("parrot", "", "2.x", "abc.def", "2.13.0+cpu",
                                     "2.13.0+pargraph.0.1.0", None, 2.13, 2)]
    for _ in range(count):
        parts = [draw.choice([1, 2, 3]), draw.choice([0, 9, 12, 13, 14]), draw.choice([0, 1])]
        release = parts[:draw.choice([1, 2, 3])]
        text = ".".join(map(str, release)) + draw.choice(["", "a1", "rc2", ".post1", "+cpu"])
        values += [(text, text), (tuple(release), tuple(release)), (list(release),) * 2,
                   (Version(text), TheirVersionNumber(text))]
    return values


@pytest.mark.parametrize("version", ["2.13.0+pargraph.0.1.0", "1.9.1", "2.0.0a0+git1234"])
def test_a_version_compares_as_pytorchs_with_every_kind_of_value(version):
    ours, theirs = TorchVersion(version), TheirVersion(version)
    for (other, their_other), compare in itertools.product(_others(len(version), 60),
                                                           OPERATORS):
        try:
            expected = compare(theirs, their_other)
        except Exception as error:  # noqa: BLE001 (whatever PyTorch raises, we raise)
            with pytest.raises(type(error)):
                compare(ours, other)
            continue
        assert compare(ours, other) == expected, (version, compare.__name__, other)


def test_the_version_names_pytorchs_api_and_pargraphs_release():
    assert pargraph.__version__ == f"{pargraph.version.torch_api}+pargraph." \
        f"{pargraph.version.release}"
    assert pargraph.version.release == importlib.metadata.version("pargraph")
    release = Version(torch.__version__).release
    assert Version(pargraph.__version__).release == release  # the API the tests compare to
    assert pargraph.version.cuda is None and torch.version.cuda is None
    assert hash(pargraph.__version__) == hash(str(pargraph.__version__))
