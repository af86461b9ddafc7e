"""Activations, losses, distances and their modules against PyTorch: values and gradients
(float64), each function and its module."""

import numpy as np
import pytest

import pargraph
from pargraph import nn
from pargraph.nn import functional as F

torch = pytest.importorskip("torch")  # the test extra installs the CPU build
TF = torch.nn.functional

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 6)) * 3  # away from the kinks at 0 and +-lambd almost surely
Y = RNG.standard_normal((4, 6))
SIGNS = np.where(RNG.standard_normal(4) > 0, 1.0, -1.0)
SIGNS6 = np.where(RNG.standard_normal((4, 6)) > 0, 1.0, -1.0)
PROBS = RNG.dirichlet(np.ones(6), 4)
COUNTS = RNG.poisson(2.0, (4, 6)).astype(np.float64)
IMAGES = RNG.standard_normal((2, 4, 5, 6))
SIGNAL = RNG.standard_normal((2, 4, 7))
VOLUMES = RNG.standard_normal((2, 4, 4, 5, 6))
POSITIVE = RNG.uniform(0.5, 2.0, (4, 6))

#: (function name, differentiable arguments, other arguments, keywords)
CASES = [
    ("elu", [X], [], {"alpha": 0.7}), ("selu", [X], [], {}), ("celu", [X], [], {"alpha": 1.3}),
    ("glu", [X], [], {"dim": 1}), ("logsigmoid", [X], [], {}), ("mish", [X], [], {}),
    ("hardtanh", [X], [], {"min_val": -2.0, "max_val": 1.5}), ("relu6", [X * 3], [], {}),
    ("hardsigmoid", [X], [], {}), ("hardswish", [X], [], {}), ("softsign", [X], [], {}),
    ("softmin", [X], [], {"dim": 1}), ("tanhshrink", [X], [], {}),
    ("softshrink", [X], [], {"lambd": 0.7}), ("hardshrink", [X], [], {"lambd": 0.7}),
    ("threshold", [X], [0.3, -2.0], {}), ("rrelu", [X], [0.1, 0.3], {}),
    ("prelu", [X, np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])], [], {}),
    ("normalize", [X], [], {"p": 3.0, "dim": 1}),
    ("cosine_similarity", [X, Y], [], {"dim": 1}),
    ("pairwise_distance", [X, Y], [], {"p": 1.5, "keepdim": True}),
    ("kl_div", [np.log(PROBS)], [PROBS[::-1].copy()], {"reduction": "batchmean"}),
    ("kl_div", [np.log(PROBS), np.log(PROBS[::-1].copy())], [],
     {"reduction": "sum", "log_target": True}),
    ("huber_loss", [X, Y], [], {"delta": 0.8}),
    ("margin_ranking_loss", [X[:, 0], Y[:, 0]], [SIGNS], {"margin": 0.2}),
    ("hinge_embedding_loss", [X], [SIGNS6], {"margin": 1.5}),
    ("soft_margin_loss", [X], [SIGNS6], {}),
    ("multilabel_soft_margin_loss", [X], [(SIGNS6 > 0).astype(np.float64)], {}),
    ("cosine_embedding_loss", [X, Y], [SIGNS], {"margin": 0.1}),
    ("triplet_margin_loss", [X, Y, X[::-1].copy()], [], {"margin": 0.5, "swap": True}),
    ("poisson_nll_loss", [X * 0.3], [COUNTS], {"full": True}),
    ("poisson_nll_loss", [POSITIVE], [COUNTS], {"log_input": False}),
    ("gaussian_nll_loss", [X, Y, POSITIVE], [], {"full": True}),
    ("multi_margin_loss", [X], [np.array([0, 5, 2, 2]), 2, 0.7, POSITIVE[0]], {}),
    ("multi_margin_loss", [X], [np.array([1, 0, 3, 5])], {"reduction": "none"}),
    ("multilabel_margin_loss", [X],
     [np.array([[3, 0, -1, 1, 2, 2], [1, -1, 2, 2, 2, 2], [-1, 0, 0, 0, 0, 0],
                [0, 1, 2, 3, 4, 5]])], {"reduction": "sum"}),
    ("triplet_margin_with_distance_loss", [X, Y, X[::-1].copy()], [],
     {"margin": 0.5, "swap": True}),
    ("local_response_norm", [IMAGES], [3], {"alpha": 0.1, "beta": 0.6, "k": 1.5}),
    ("local_response_norm", [SIGNAL], [2], {}),
    ("lp_pool1d", [np.abs(SIGNAL) + 0.1], [3, 3], {"stride": 1}),
    ("lp_pool2d", [np.abs(IMAGES) + 0.1], [2, (2, 3)], {}),
    ("upsample_bilinear", [IMAGES], [], {"scale_factor": 2}),
    ("upsample_nearest", [IMAGES], [(7, 9)], {}),
    ("binary_cross_entropy_with_logits", [X],
     [(SIGNS6 > 0).astype(np.float64), POSITIVE[0], None, None, "mean", POSITIVE[1]], {}),
    ("binary_cross_entropy_with_logits", [X], [PROBS, None, None, None, "none", POSITIVE[2]],
     {}),
    ("binary_cross_entropy", [PROBS], [(SIGNS6 > 0).astype(np.float64), POSITIVE],
     {"reduction": "sum"}),
    ("avg_pool1d", [SIGNAL], [3], {"stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool2d", [IMAGES], [3], {"stride": 2, "padding": 1, "ceil_mode": True}),
    ("avg_pool2d", [IMAGES], [(2, 3)], {"stride": (2, 2), "ceil_mode": True,
                                       "count_include_pad": False, "padding": (1, 0)}),
    ("avg_pool3d", [VOLUMES], [2], {"stride": 3, "ceil_mode": True}),
    ("interpolate", [IMAGES], [], {"size": (7, 4), "mode": "bicubic"}),
    ("interpolate", [IMAGES], [], {"scale_factor": 1.5, "mode": "bicubic",
                                   "align_corners": True}),
    ("interpolate", [IMAGES], [], {"size": (3, 4), "mode": "area"}),
    ("interpolate", [SIGNAL], [], {"scale_factor": 0.5, "mode": "area"}),
    ("interpolate", [VOLUMES], [], {"size": (3, 3, 4), "mode": "area"}),
]


@pytest.mark.parametrize("name,grads,others,keywords", CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_functions_equal_pytorch_in_values_and_gradients(name, grads, others, keywords):
    ours_in = [pargraph.tensor(a, requires_grad=True) for a in grads]
    theirs_in = [torch.tensor(a, requires_grad=True) for a in grads]
    ours_other = [pargraph.tensor(a) if isinstance(a, np.ndarray) else a for a in others]
    theirs_other = [torch.tensor(a) if isinstance(a, np.ndarray) else a for a in others]
    ours = getattr(F, name)(*ours_in, *ours_other, **keywords)
    theirs = getattr(TF, name)(*theirs_in, *theirs_other, **keywords)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    weights = RNG.standard_normal(tuple(theirs.shape))
    (ours * pargraph.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    # PyTorch's celu and hardsigmoid backward kernels hold their constants (1/alpha, 1/6) as
    # float32 even for float64 tensors: 1e-7 apart from the exact gradient.
    rtol = 1e-6 if name in ("celu", "hardsigmoid") else 1e-9
    for a, b in zip(ours_in, theirs_in):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=1e-12)


MODULES = [
    ("ELU", (0.5,)), ("SELU", ()), ("CELU", (0.5,)), ("GLU", ()), ("LogSigmoid", ()),
    ("Mish", ()), ("Hardtanh", (-0.5, 2.0)), ("ReLU6", ()), ("Hardsigmoid", ()),
    ("Hardswish", ()), ("Softsign", ()), ("Softmin", (1,)), ("Tanhshrink", ()),
    ("Softshrink", (0.3,)), ("Hardshrink", (0.3,)), ("Threshold", (0.1, 7.0)),
    ("PReLU", (6, 0.1)),
]


@pytest.mark.parametrize("name,arguments", MODULES, ids=[m[0] for m in MODULES])
def test_activation_modules_equal_pytorch(name, arguments):
    ours = getattr(pargraph.nn, name)(*arguments).double()
    theirs = getattr(torch.nn, name)(*arguments).double()
    np.testing.assert_allclose(ours(pargraph.tensor(X)).detach().numpy(),
                               theirs(torch.tensor(X)).detach().numpy(), rtol=1e-10)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


LOSSES = [
    ("KLDivLoss", {"reduction": "batchmean"}, [np.log(PROBS), PROBS[::-1].copy()]),
    ("HuberLoss", {"delta": 2.0}, [X, Y]), ("SoftMarginLoss", {}, [X, SIGNS6]),
    ("HingeEmbeddingLoss", {"reduction": "sum"}, [X, SIGNS6]),
    ("MultiLabelSoftMarginLoss", {}, [X, (SIGNS6 > 0).astype(np.float64)]),
    ("MarginRankingLoss", {"margin": 0.3}, [X[:, 0], Y[:, 0], SIGNS]),
    ("CosineEmbeddingLoss", {"margin": 0.2}, [X, Y, SIGNS]),
    ("TripletMarginLoss", {"p": 1.0}, [X, Y, X[::-1].copy()]),
    ("PoissonNLLLoss", {}, [X * 0.3, COUNTS]),
    ("GaussianNLLLoss", {}, [X, Y, POSITIVE]),
]


@pytest.mark.parametrize("name,options,inputs", LOSSES, ids=[m[0] for m in LOSSES])
def test_loss_modules_equal_pytorch(name, options, inputs):
    ours = getattr(pargraph.nn, name)(**options)(*[pargraph.tensor(a) for a in inputs])
    theirs = getattr(torch.nn, name)(**options)(*[torch.tensor(a) for a in inputs])
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-10)


def test_bad_arguments_raise_as_pytorch_does():
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(pargraph.ones(3))
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        pargraph.nn.Hardtanh(2.0, 1.0)
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(pargraph.ones(2), pargraph.ones(2), -pargraph.ones(2))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
        F.prelu(pargraph.ones(2, 3), pargraph.ones(2))


PADS = [("ZeroPad1d", (2,), 3), ("ZeroPad2d", ((1, 2, 0, 1),), 4),
        ("ConstantPad1d", (1, 0.5), 3), ("ConstantPad2d", (2, -1.0), 4),
        ("ReflectionPad1d", ((2, 1),), 3), ("ReflectionPad2d", (1,), 4),
        ("ReplicationPad1d", (2,), 3), ("ReplicationPad2d", ((1, 0, 2, 1),), 4),
        ("CircularPad1d", (1,), 3), ("CircularPad2d", (1,), 4),
        ("ZeroPad3d", ((1, 0, 2, 1, 0, 1),), 5), ("ConstantPad3d", (1, 0.5), 5),
        ("ReflectionPad3d", (1,), 5), ("ReplicationPad3d", ((2, 1, 0, 1, 1, 0),), 5),
        ("CircularPad3d", (1,), 5)]


@pytest.mark.parametrize("name,arguments,dims", PADS, ids=[p[0] for p in PADS])
def test_padding_modules_equal_pytorch(name, arguments, dims):
    x = RNG.standard_normal((2, 3, 5, 4, 3)[:dims])
    ours_in, theirs_in = pargraph.tensor(x, requires_grad=True), torch.tensor(
        x, requires_grad=True)
    ours = getattr(pargraph.nn, name)(*arguments)(ours_in)
    theirs = getattr(torch.nn, name)(*arguments)(theirs_in)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    weights = RNG.standard_normal(tuple(theirs.shape))
    (ours * pargraph.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours_in.grad.numpy(), theirs_in.grad.numpy(), rtol=1e-12)


def test_containers_unflatten_and_channel_dropout_behave_as_pytorchs():
    params = pargraph.nn.ParameterList([pargraph.ones(2), pargraph.zeros(3)])
    params.append(pargraph.ones(1))
    assert [tuple(p.shape) for p in params] == [(2,), (3,), (1,)]
    assert [n for n, _ in params.named_parameters()] == ["0", "1", "2"]
    named = pargraph.nn.ParameterDict({"a": pargraph.ones(2)})
    named["b"] = pargraph.zeros(1)
    assert list(named) == ["a", "b"] and "a" in named and named["b"].requires_grad
    ours = pargraph.nn.Unflatten(1, (2, 3))(pargraph.tensor(X))
    assert tuple(ours.shape) == tuple(torch.nn.Unflatten(1, (2, 3))(torch.tensor(X)).shape)
    pargraph.manual_seed(0)
    dropped = pargraph.nn.Dropout2d(0.5)(pargraph.ones(8, 6, 3, 3))
    per_channel = dropped.numpy().reshape(8, 6, 9)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()  # whole channels
    assert 0 < (per_channel == 0).all(-1).mean() < 1
    with pytest.raises(ValueError, match="between 0 and 1"):
        pargraph.nn.Dropout1d(1.5)


# --- transposed convolution, resampling and the other norms --------------------------------


LAYERS = [
    ("ConvTranspose2d", (4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1}, IMAGES),
    ("ConvTranspose2d", (4, 6, (2, 3)), {"groups": 2, "dilation": (2, 1), "bias": False},
     IMAGES),
    ("ConvTranspose1d", (4, 2, 4), {"stride": 3, "padding": 2}, SIGNAL),
    ("GroupNorm", (2, 4), {"eps": 1e-3}, IMAGES),
    ("GroupNorm", (4, 4), {"affine": False}, SIGNAL),
    ("InstanceNorm1d", (4,), {"affine": True}, SIGNAL),
    ("InstanceNorm2d", (4,), {"track_running_stats": True}, IMAGES),
    ("RMSNorm", ((5, 6),), {"eps": 1e-4}, IMAGES),
    ("RMSNorm", (7,), {}, SIGNAL),
    ("PixelShuffle", (2,), {}, IMAGES[:, :, :4, :4]),
    ("PixelUnshuffle", (2,), {}, IMAGES[:, :, :4, :6]),
    ("Upsample", (), {"scale_factor": 2}, IMAGES),
    ("Upsample", (), {"size": (7, 9), "mode": "bilinear"}, IMAGES),
    ("Upsample", (), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True}, IMAGES),
    ("Upsample", (), {"scale_factor": 2.5, "mode": "linear"}, SIGNAL),
    ("Upsample", (), {"size": 11, "mode": "nearest-exact"}, SIGNAL),
    ("UpsamplingNearest2d", (), {"size": (8, 3)}, IMAGES),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, IMAGES),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, IMAGES),
    ("AdaptiveMaxPool2d", ((None, 8),), {}, IMAGES),
    ("AdaptiveMaxPool1d", (3,), {}, SIGNAL),
    ("Conv3d", (4, 6, (3, 2, 3)), {"stride": (1, 2, 1), "padding": 1, "groups": 2}, VOLUMES),
    ("Conv3d", (4, 2, 3), {"padding": "same", "dilation": (1, 2, 1)}, VOLUMES),
    ("ConvTranspose3d", (4, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1}, VOLUMES),
    ("MaxPool3d", (2,), {"stride": (1, 2, 2), "padding": 1}, VOLUMES),
    ("AvgPool3d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, VOLUMES),
    ("AdaptiveAvgPool3d", ((2, 3, None),), {}, VOLUMES),
    ("AdaptiveMaxPool3d", ((3, 2, 4),), {}, VOLUMES),
    ("BatchNorm3d", (4,), {}, VOLUMES),
    ("InstanceNorm3d", (4,), {"affine": True}, VOLUMES),
    ("LPPool2d", (1.5, 2), {"stride": 1}, np.abs(IMAGES) + 0.1),
    ("LPPool3d", (2, (2, 1, 2)), {}, np.abs(VOLUMES) + 0.1),
    ("LocalResponseNorm", (2,), {"k": 2.0}, VOLUMES),
    ("Softmax2d", (), {}, IMAGES),
    ("ChannelShuffle", (2,), {}, IMAGES),
    ("Unfold", ((2, 3),), {"dilation": (2, 1), "padding": 1, "stride": (2, 1)}, IMAGES),
    ("Fold", ((5, 6), 2), {}, RNG.standard_normal((2, 16, 20))),
    ("Fold", ((5, 6), 3), {"padding": 1, "stride": 2}, RNG.standard_normal((2, 18, 9))),
]


def test_max_pooling_returns_pytorchs_indices_with_ties_and_nan():
    x = np.array([[[1.0, np.nan, 3.0, np.nan, 2.0, 2.0, 5.0, 5.0, 0.0]]])
    for output_size in (1, 2, 4, 9, 12):
        ours = F.adaptive_max_pool1d(pargraph.tensor(x), output_size, return_indices=True)
        theirs = TF.adaptive_max_pool1d(torch.tensor(x), output_size, return_indices=True)
        np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    planes = np.tile([[2.0, 7.0, 7.0], [1.0, 7.0, 0.0]], (1, 2, 2, 1))  # unbatched, ties
    ours = F.adaptive_max_pool2d(pargraph.tensor(planes[0]), (2, 2), return_indices=True)
    theirs = TF.adaptive_max_pool2d(torch.tensor(planes[0]), (2, 2), return_indices=True)
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    holes = RNG.standard_normal((2, 3, 7, 6))
    holes[holes > 1.0] = np.nan  # windows with several NaNs: PyTorch's kernels keep the last
    for ours, theirs in ((F.max_pool2d(pargraph.tensor(holes), 3, 2, 1, return_indices=True),
                          TF.max_pool2d(torch.tensor(holes), 3, 2, 1, return_indices=True)),
                         (F.adaptive_max_pool2d(pargraph.tensor(holes), 2, return_indices=True),
                          TF.adaptive_max_pool2d(torch.tensor(holes), 2, return_indices=True))):
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
    assert tuple(F.adaptive_max_pool2d(pargraph.ones(1, 2, 3, 3), (0, 1)).shape) == (1, 2, 0, 1)
    with pytest.raises(RuntimeError, match="adaptive_max_pool2d: expected an input with non-"):
        F.adaptive_max_pool2d(pargraph.ones(1, 2, 0, 3), 1)


@pytest.mark.parametrize("name,arguments,options,x", LAYERS,
                         ids=[f"{m[0]}-{k}" for k, m in enumerate(LAYERS)])
def test_layers_equal_pytorch_in_values_and_gradients(name, arguments, options, x):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(*arguments, **options).double()
    ours = getattr(pargraph.nn, name)(*arguments, **options).double()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    for p in ours.parameters():  # non-trivial affine parameters
        p.data = p.data + pargraph.tensor(RNG.standard_normal(tuple(p.shape)) * 0.1)
    with torch.no_grad():
        for (_, q), (_, p) in zip(theirs.named_parameters(), ours.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    ours_in = pargraph.tensor(np.ascontiguousarray(x), requires_grad=True)
    theirs_in = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    out, expected = ours(ours_in), theirs(theirs_in)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-9,
                               atol=1e-12)
    weights = RNG.standard_normal(tuple(expected.shape))
    (out * pargraph.tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours_in.grad.numpy(), theirs_in.grad.numpy(), rtol=1e-9,
                               atol=1e-12)
    for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (_, p), (_, q) in zip(ours.named_buffers(), theirs.named_buffers()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-9)
    assert repr(ours) == repr(theirs)


def test_a_transposed_convolution_takes_an_output_size():
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1).double()
    ours = pargraph.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1).double()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for size in ((9, 11), (10, 12)):
        np.testing.assert_allclose(
            ours(pargraph.tensor(IMAGES), output_size=size).detach().numpy(),
            theirs(torch.tensor(IMAGES), output_size=size).detach().numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="requested an output size"):
        ours(pargraph.tensor(IMAGES), output_size=(12, 12))


def test_resampling_and_norm_errors_are_pytorchs():
    def error_of(lib, call):
        try:
            call(lib)
        except Exception as error:  # noqa: BLE001 - compared below
            return type(error).__name__, str(error).split(":")[0]
        return None

    for call in (lambda lib: lib.nn.functional.pixel_shuffle(lib.ones(1, 5, 2, 2), 2),
                 lambda lib: lib.nn.functional.pixel_unshuffle(lib.ones(1, 1, 3, 4), 2),
                 lambda lib: lib.nn.functional.group_norm(lib.ones(2, 6, 3), 4),
                 lambda lib: lib.nn.GroupNorm(4, 6),
                 lambda lib: lib.nn.functional.interpolate(lib.ones(1, 1, 4), size=2,
                                                           scale_factor=2.0),
                 lambda lib: lib.nn.functional.interpolate(lib.ones(1, 1, 4), scale_factor=2,
                                                           align_corners=True),
                 lambda lib: lib.nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")):
        assert error_of(pargraph, call) == error_of(torch, call) is not None


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_the_transformer_is_pytorchs(norm_first, batch_first):
    """nn.Transformer with PyTorch's weights (state_dict keys match), causal and padding
    masks: equal outputs and gradients in float64 (eval mode: no dropout)."""
    torch.manual_seed(0)
    options = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                   dim_feedforward=16, batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.Transformer(**options).double().eval()
    ours = pargraph.nn.Transformer(**options).double().eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    src, tgt = RNG.standard_normal((5, 3, 8)), RNG.standard_normal((4, 3, 8))
    if batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True
    results = []
    for lib, model in ((pargraph, ours), (torch, theirs)):
        s, t = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        mask = model.generate_square_subsequent_mask(4, dtype=lib.float64)
        out = model(s, t, tgt_mask=mask, src_key_padding_mask=lib.tensor(padding),
                    memory_key_padding_mask=lib.tensor(padding))
        (out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))).sum() \
            .backward()
        results.append((out.detach().numpy(), s.grad.numpy(), t.grad.numpy(),
                        [p.grad.numpy() for p in model.parameters()]))
    for a, b in zip(results[0][:3], results[1][:3]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    for a, b in zip(results[0][3], results[1][3]):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        ours(pargraph.zeros(5, 3, 8), pargraph.zeros(4, 2, 8))


def test_the_other_initializers_draw_what_pytorchs_draw():
    from pargraph.nn import init

    pargraph.manual_seed(0)
    torch.manual_seed(0)
    ours = init.trunc_normal_(pargraph.zeros(40000), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    theirs = torch.nn.init.trunc_normal_(torch.zeros(40000), mean=1.0, std=2.0, a=-1.0,
                                         b=2.0).numpy()
    assert ours.min() >= -1.0 and ours.max() <= 2.0
    assert abs(ours.mean() - theirs.mean()) < 0.02 and abs(ours.std() - theirs.std()) < 0.02
    for shape, gain in (((4, 6), 2.0), ((6, 4), 1.0), ((3, 2, 2), 0.5)):
        q = init.orthogonal_(pargraph.zeros(*shape), gain=gain).numpy().reshape(shape[0], -1)
        small = min(q.shape)
        gram = q @ q.T if q.shape[0] == small else q.T @ q
        np.testing.assert_allclose(gram, gain ** 2 * np.eye(small), atol=1e-5)
    sparse = init.sparse_(pargraph.zeros(10, 4), sparsity=0.25).numpy()
    assert ((sparse == 0).sum(0) == 3).all()  # ceil(0.25 * 10) per column, as PyTorch's
    assert abs(sparse[sparse != 0].std() - 0.01) < 0.005
    np.testing.assert_array_equal(init.eye_(pargraph.zeros(2, 3)).numpy(),
                                  torch.nn.init.eye_(torch.zeros(2, 3)).numpy())
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(pargraph.zeros(3))


def test_dirac_and_every_gain_are_pytorchs():
    from pargraph.nn import init

    for shape, groups in (((4, 2, 3), 1), ((4, 4, 3, 5), 2), ((6, 2, 3, 3, 2), 3),
                          ((2, 5, 4), 1)):
        np.testing.assert_array_equal(
            init.dirac_(pargraph.ones(*shape), groups).numpy(),
            torch.nn.init.dirac_(torch.ones(*shape), groups).numpy())
    for shape, groups, error in (((4, 2), 1, "3, 4, or 5 dimensions"),
                                 ((3, 2, 3), 2, "divisible by groups")):
        for library, ones in ((init, pargraph.ones), (torch.nn.init, torch.ones)):
            with pytest.raises(ValueError, match=error):
                library.dirac_(ones(*shape), groups)
    for name, param in (("linear", None), ("conv_transpose2d", None), ("sigmoid", None),
                        ("tanh", None), ("relu", None), ("leaky_relu", None),
                        ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)):
        ours, theirs = init.calculate_gain(name, param), torch.nn.init.calculate_gain(name, param)
        assert (type(ours), ours) == (type(theirs), theirs), name
    for name, param, error in (("identity", None, "Unsupported nonlinearity"),
                               ("leaky_relu", True, "not a valid number")):
        for library in (init, torch.nn.init):
            with pytest.raises(ValueError, match=error):
                library.calculate_gain(name, param)


# --- bags of embeddings and the bilinear layer ----------------------------------------------

BAGS = [  # (input, offsets, options)
    (np.array([[1, 2, 4], [4, 3, 9]]), None, {}),
    (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 5]), {}),  # an empty bag
    (np.array([1, 2, 4, 5, 4, 3]), np.array([0, 1, 4, 6]), {"include_last_offset": True}),
    (np.array([[0, 2, 0], [0, 0, 0], [4, 0, 1]]), None, {"padding_idx": 0}),
    (np.array([3, 0, 7, 0, 0]), np.array([0, 2, 3]), {"padding_idx": 0}),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", range(len(BAGS)))
def test_embedding_bags_equal_pytorch_in_values_and_gradients(mode, case):
    indices, offsets, options = BAGS[case]
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(10, 4, mode=mode, **options).double()
    ours = pargraph.nn.EmbeddingBag(10, 4, mode=mode, **options).double()
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    assert repr(ours) == repr(theirs)
    weights = {}
    if mode == "sum":  # per-sample weights, differentiated too
        sample = RNG.standard_normal(indices.shape)
        weights = {"ours": pargraph.tensor(sample, requires_grad=True),
                   "theirs": torch.tensor(sample, requires_grad=True)}
    out = ours(pargraph.tensor(indices), None if offsets is None else pargraph.tensor(offsets),
               weights.get("ours"))
    expected = theirs(torch.tensor(indices), None if offsets is None else torch.tensor(offsets),
                      weights.get("theirs"))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    upstream = RNG.standard_normal(tuple(expected.shape))
    (out * pargraph.tensor(upstream)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12)
    if weights:
        np.testing.assert_allclose(weights["ours"].grad.numpy(),
                                   weights["theirs"].grad.numpy(), rtol=1e-12)


def test_embedding_bag_errors_are_pytorchs():
    table = pargraph.randn(10, 3)
    cases = [(ValueError, "offsets has to be a 1D Tensor but got None",
              lambda: F.embedding_bag(pargraph.tensor([1, 2]), table)),
             (ValueError, "if input is 2D, then offsets has to be None",
              lambda: F.embedding_bag(pargraph.tensor([[1, 2]]), table, pargraph.tensor([0]))),
             (RuntimeError, "offsets\\[0\\] has to be 0",
              lambda: F.embedding_bag(pargraph.tensor([1, 2]), table, pargraph.tensor([1]))),
             (NotImplementedError, "only supported for mode='sum'",
              lambda: F.embedding_bag(pargraph.tensor([[1, 2]]), table,
                                      per_sample_weights=pargraph.ones(1, 2))),
             (ValueError, "mode has to be one of sum, mean or max",
              lambda: F.embedding_bag(pargraph.tensor([[1, 2]]), table, mode="min")),
             (IndexError, "index out of range",
              lambda: F.embedding_bag(pargraph.tensor([[1, 12]]), table).numpy())]
    for kind, message, call in cases:
        with pytest.raises(kind, match=message):
            call()


def test_the_bilinear_layer_is_pytorchs():
    torch.manual_seed(0)
    theirs = torch.nn.Bilinear(3, 4, 5).double()
    pargraph.manual_seed(0)
    ours = pargraph.nn.Bilinear(3, 4, 5).double()
    assert repr(ours) == repr(theirs)
    assert ours.weight.abs().max().item() <= 1 / 3 ** 0.5  # PyTorch's bound: 1/sqrt(in1)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    a, b = RNG.standard_normal((2, 6, 3)), RNG.standard_normal((2, 6, 4))
    ours_in = [pargraph.tensor(v, requires_grad=True) for v in (a, b)]
    theirs_in = [torch.tensor(v, requires_grad=True) for v in (a, b)]
    out, expected = ours(*ours_in), theirs(*theirs_in)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    expected.sum().backward()
    for x, y in zip(ours_in + list(ours.parameters()), theirs_in + list(theirs.parameters())):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="bilinear\\(\\): input sizes"):
        ours(pargraph.ones(2, 4), pargraph.ones(2, 4))


@pytest.mark.parametrize("name,spatial,arguments", [
    ("max_pool1d_with_indices", 1, (2,)), ("max_pool2d_with_indices", 2, (2, 1, 1)),
    ("max_pool3d_with_indices", 3, (2,)), ("adaptive_max_pool1d_with_indices", 1, (3,)),
    ("adaptive_max_pool2d_with_indices", 2, ((2, 3),)),
    ("adaptive_max_pool3d_with_indices", 3, (2,))])
def test_the_with_indices_forms_return_pytorchs_pairs(name, spatial, arguments):
    x = VOLUMES[(0,) * (3 - spatial)]
    ours = getattr(F, name)(pargraph.tensor(x), *arguments)
    theirs = getattr(TF, name)(torch.tensor(x), *arguments)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_channel_and_alpha_dropout_keep_what_pytorchs_keep():
    pargraph.manual_seed(0)
    normal = pargraph.tensor(RNG.standard_normal((400, 50, 8)))
    for name, p in (("alpha_dropout", 0.2), ("feature_alpha_dropout", 0.3)):
        out = getattr(F, name)(normal, p, training=True).numpy()
        assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02  # SELU's fixed point
        scale = ((1.758099340847 ** 2 * p + 1) * (1 - p)) ** -0.5
        dropped = np.isclose(out, -1.758099340847 * scale * (1 - p))  # all take one value
        assert abs(dropped.mean() - p) < 0.01
        if name == "feature_alpha_dropout":  # whole channels
            assert np.all(dropped.all(-1) == dropped.any(-1))
        assert (getattr(F, name)(normal, p) is normal)  # training=False by default
    kept = F.dropout1d(pargraph.ones(300, 40, 6), 0.25).numpy()
    assert np.all((kept == 0).all(-1) == (kept == 0).any(-1))
    assert abs((kept[..., 0] == 0).mean() - 0.25) < 0.01 and kept.max() == pytest.approx(4 / 3)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(pargraph.ones(2, 3, 4, 5), 0.5)  # dropout2d/3d warn instead (test_nn_dropout)


def test_gumbel_softmax_samples_its_categorical_and_passes_the_soft_gradient():
    pargraph.manual_seed(0)
    logits = pargraph.tensor(np.log([[0.1, 0.6, 0.3]] * 4000), requires_grad=True)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    chosen = hard.detach().numpy()
    assert set(np.unique(chosen)) == {0.0, 1.0} and np.all(chosen.sum(1) == 1)
    np.testing.assert_allclose(chosen.mean(0), [0.1, 0.6, 0.3], atol=0.025)
    (hard * pargraph.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert np.all(np.isfinite(logits.grad.numpy())) and np.abs(logits.grad.numpy()).sum() > 0
    soft = F.gumbel_softmax(logits.detach(), tau=2.0).numpy()
    assert np.allclose(soft.sum(1), 1) and (soft > 0).all() and (soft < 1).all()


def test_state_dict_keys_come_in_pytorchs_order():
    def build(nn):
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
                shared = nn.Linear(2, 2)
                self.head = nn.Sequential(shared, nn.ReLU(), shared)
                self.register_buffer("scale", torch.ones(1) if nn is torch.nn
                                     else pargraph.ones(1))
                self.register_buffer("cache", torch.ones(1) if nn is torch.nn
                                     else pargraph.ones(1), persistent=False)
                self.out = nn.Linear(2, 1)
        return Net()

    theirs, ours = build(torch.nn), build(pargraph.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert ours.state_dict(keep_vars=True)["out.weight"].requires_grad


def test_class_targets_of_other_integer_types_are_refused_as_pytorch_does():
    scores = RNG.standard_normal((2, 3))
    for name in ("int32", "int16"):
        target = np.array([0, 2], dtype=name)
        with pytest.raises(RuntimeError) as theirs:
            TF.cross_entropy(torch.tensor(scores), torch.tensor(target))
        with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte") \
                as ours:
            F.cross_entropy(pargraph.tensor(scores), pargraph.tensor(target))
        assert str(ours.value).endswith(str(theirs.value))
    byte = np.array([0, 2], dtype=np.uint8)
    np.testing.assert_allclose(
        F.nll_loss(pargraph.tensor(scores), pargraph.tensor(byte)).item(),
        TF.nll_loss(torch.tensor(scores), torch.tensor(byte)).item())


def test_fold_and_unfold_refuse_what_pytorch_refuses():
    for call in (lambda lib: lib.nn.functional.fold(lib.ones(1, 5, 4), (3, 3), 2),
                 lambda lib: lib.nn.functional.fold(lib.ones(1, 8, 5), (3, 3), 2)):
        with pytest.raises(RuntimeError) as theirs:
            call(torch)
        with pytest.raises(RuntimeError) as ours:
            call(pargraph)
        assert str(ours.value).endswith(str(theirs.value)), (ours.value, theirs.value)
    # PyTorch's unfold of a 2-D input fails inside with an IndexError; pargraph says why
    with pytest.raises(RuntimeError, match="unfold: Expected 3D or 4D"):
        F.unfold(pargraph.ones(3, 4), 2)


@pytest.mark.parametrize("spatial, shape, options, output_size", [
    (1, (2, 3, 8), {}, None), (1, (3, 9), {"stride": 3}, None),
    (2, (2, 3, 6, 6), {}, None), (2, (3, 7, 6), {"stride": 1, "padding": 1}, None),
    (2, (2, 2, 6, 6), {}, (7, 7)), (2, (1, 2, 6, 6), {}, [1, 2, 7, 6]),
    (3, (1, 2, 4, 4, 4), {}, None), (3, (2, 4, 4, 4), {"stride": 2}, (5, 4, 5)),
])
def test_max_unpooling_inverts_pytorchs_max_pooling(spatial, shape, options, output_size):
    # Values and input gradients (float64) against PyTorch, functional and module forms,
    # batched and not, with strides, padding and an output size.
    x = RNG.standard_normal(shape)
    kernel = 2 if "padding" not in options else 3
    tx = torch.tensor(x, requires_grad=True)
    to, ti = getattr(TF, f"max_pool{spatial}d")(tx, kernel, return_indices=True, **options)
    tu = getattr(TF, f"max_unpool{spatial}d")(to, ti, kernel, output_size=output_size,
                                              **options)
    w = RNG.standard_normal(tuple(tu.shape))
    (tu * torch.tensor(w)).sum().backward()
    module = getattr(pargraph.nn, f"MaxUnpool{spatial}d")(kernel, **options)
    assert repr(module) == repr(getattr(torch.nn, f"MaxUnpool{spatial}d")(kernel, **options))
    functional = getattr(F, f"max_unpool{spatial}d")
    for unpool in (lambda o, i: functional(o, i, kernel, output_size=output_size, **options),
                   lambda o, i: module(o, i, output_size)):
        px = pargraph.tensor(x, requires_grad=True)
        pu = unpool(*getattr(F, f"max_pool{spatial}d")(px, kernel, return_indices=True,
                                                       **options))
        np.testing.assert_array_equal(pu.detach().numpy(), tu.detach().numpy())
        (pu * pargraph.tensor(w)).sum().backward()
        np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_max_unpooling_refuses_what_pytorch_refuses():
    values = np.arange(4.0).reshape(1, 1, 2, 2)
    cases = [  # (indices, keywords): errors at the call, or in the run for computed indices
        (np.array([[[[0, 5], [8, 15]]]]), {"output_size": (2, 2)}),
        (np.array([[[[0, 5], [8, 15]]]]), {"output_size": (6, 6)}),
        (np.array([[[[0, 5], [8, 15]]]]), {"output_size": (1, 4, 4)}),
        (np.array([[[[0, 5], [8, 15]]]]), {"output_size": (3, 3)}),
        (np.array([[[[0, 5], [8, 99]]]]), {}),
        (np.array([[[[0, 5], [-3, 15]]]]), {}),
        (np.array([[[[0, 5]]]]), {}),
        (np.array([[[[0.0, 5.0], [8.0, 15.0]]]]), {}),
    ]
    for indices, keywords in cases:
        with pytest.raises(Exception) as theirs:
            TF.max_unpool2d(torch.tensor(values), torch.tensor(indices), 2, **keywords)
        for computed in (False, True):
            index = pargraph.tensor(indices)
            if computed and index.dtype == pargraph.int64:
                index = index + 0  # checked in the run, naming the op and this line
            with pytest.raises(type(theirs.value)) as ours:
                F.max_unpool2d(pargraph.tensor(values), index, 2, **keywords).numpy()
            message = str(theirs.value).split(" (")[0].removesuffix(" Double")
            assert message in str(ours.value)
    with pytest.raises(RuntimeError, match="should be a 3d or 4d Tensor"):
        F.max_unpool2d(pargraph.ones(1, 1, 1, 2, 2), pargraph.zeros(1, 1, 1, 2, 2).long(), 2)


def test_nll_loss_2d_is_pytorchs_deprecated_nll_loss():
    x = RNG.standard_normal((2, 3, 4, 4))
    y = RNG.integers(0, 3, (2, 4, 4))
    weight = RNG.uniform(0.5, 2.0, 3)
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated") as ours:
        loss = pargraph.nn.NLLLoss2d(pargraph.tensor(weight), ignore_index=1)
    with pytest.warns(FutureWarning) as theirs:
        reference = torch.nn.NLLLoss2d(torch.tensor(weight), ignore_index=1)
    assert str(ours[0].message) == str(theirs[0].message)
    assert isinstance(loss, pargraph.nn.NLLLoss) and repr(loss) == repr(reference)
    from pargraph.nn.modules.loss import NLLLoss2d

    assert NLLLoss2d is pargraph.nn.NLLLoss2d
    np.testing.assert_allclose(loss(pargraph.tensor(x), pargraph.tensor(y)).item(),
                               reference(torch.tensor(x), torch.tensor(y)).item(), rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (1, 4, 2, 2, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_k_dimensional_class_losses_equal_pytorchs(shape, reduction):
    # (N, C, d1, ...) inputs (a segmentation's per-pixel classes): values and input
    # gradients (float64) of nll_loss and cross_entropy, with weights, ignore_index, label
    # smoothing and class-probability targets.
    classes, spatial = shape[1], (shape[0],) + shape[2:]
    x = RNG.standard_normal(shape)
    labels = RNG.integers(0, classes, spatial)
    labels.flat[0] = 1
    probs = np.moveaxis(RNG.dirichlet(np.ones(classes), spatial), -1, 1).copy()
    weight = RNG.uniform(0.5, 2.0, classes)
    cases = [("nll_loss", labels, {}), ("nll_loss", labels, {"weight": weight, "ignore_index": 1}),
             ("cross_entropy", labels, {"label_smoothing": 0.2}),
             ("cross_entropy", labels, {"weight": weight, "label_smoothing": 0.1,
                                        "ignore_index": 1}),
             ("cross_entropy", probs, {"weight": weight})]
    for name, target, keywords in cases:
        tx, px = torch.tensor(x, requires_grad=True), pargraph.tensor(x, requires_grad=True)
        theirs = getattr(TF, name)(tx, torch.tensor(target), reduction=reduction,
                                   **{k: torch.tensor(v) if k == "weight" else v
                                      for k, v in keywords.items()})
        ours = getattr(F, name)(px, pargraph.tensor(target), reduction=reduction,
                                **{k: pargraph.tensor(v) if k == "weight" else v
                                   for k, v in keywords.items()})
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10)
        upstream = RNG.standard_normal(tuple(theirs.shape))
        (theirs * torch.tensor(upstream)).sum().backward()
        (ours * pargraph.tensor(upstream)).sum().backward()
        np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-9)
    with pytest.raises(ValueError, match="expected target of shape"):
        F.nll_loss(pargraph.tensor(x), pargraph.tensor(labels[:, :1]))


@pytest.mark.parametrize("name, arguments", [
    ("ReLU", {}), ("SiLU", {}), ("LeakyReLU", {"negative_slope": 0.1}), ("ELU", {}),
    ("CELU", {"alpha": 0.5}), ("SELU", {}), ("Hardtanh", {}), ("ReLU6", {}), ("Hardswish", {}),
    ("Hardsigmoid", {}), ("Mish", {}), ("Threshold", {"threshold": 0.5, "value": -2.0}),
    ("RReLU", {}), ("Dropout", {"p": 0.0}), ("Dropout1d", {"p": 0.0}),
])
def test_inplace_activations_change_their_input_as_pytorchs_do(name, arguments):
    """``nn.ReLU(inplace=True)`` (torchvision's models use it) and every activation with
    ``inplace``: the input tensor takes the result and is what comes back, gradients flow
    through it as PyTorch's, the repr matches, and a leaf that requires grad is refused."""
    values = np.array([[-1.5, 2.0, -3.0, 0.25, 0.0, 1.0, -1.0, 3.0, 6.0, 7.0]])  # float64
    ours_module = getattr(nn, name)(**arguments, inplace=True)
    theirs_module = getattr(torch.nn, name)(**arguments, inplace=True)
    ours_module.eval(), theirs_module.eval()  # RReLU: its mean slope
    assert repr(ours_module) == repr(theirs_module)
    ours_leaf = pargraph.tensor(values, requires_grad=True)
    theirs_leaf = torch.tensor(values, requires_grad=True)
    ours, theirs = ours_leaf * 1.0, theirs_leaf * 1.0
    assert ours_module(ours) is ours and theirs_module(theirs) is theirs
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    weights = np.arange(1.0, 11.0)  # the bounds of the kinks are among the values
    (ours * pargraph.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    # (PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32, in float64 too.)
    np.testing.assert_allclose(ours_leaf.grad.numpy(), theirs_leaf.grad.numpy(), rtol=1e-7)
    if name not in ("Dropout", "Dropout1d"):  # p=0 dropout returns its input: no change
        with pytest.raises(RuntimeError, match="leaf Variable"):
            ours_module(pargraph.ones(1, 10, dtype=pargraph.float64, requires_grad=True))


@pytest.mark.parametrize("name", ["relu_", "elu_", "leaky_relu_", "hardtanh_", "selu_",
                                  "celu_", "rrelu_"])
def test_functional_in_place_activations(name):
    values = np.array([-1.5, 2.0, -3.0, 0.25], np.float32)
    ours, theirs = pargraph.tensor(values), torch.tensor(values)
    assert getattr(F, name)(ours) is ours and getattr(torch.nn.functional, name)(theirs) is theirs
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    ours, theirs = pargraph.tensor(values), torch.tensor(values)
    plain = name.rstrip("_")
    getattr(F, plain)(ours, inplace=True), getattr(torch.nn.functional, plain)(theirs, inplace=True)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


@pytest.mark.parametrize("cutoffs, head_bias", [([4, 7], False), ([3], True)])
def test_adaptive_log_softmax_as_pytorchs(cutoffs, head_bias):
    torch = pytest.importorskip("torch")
    ours = pargraph.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=cutoffs, div_value=2.0,
                                                  head_bias=head_bias)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=cutoffs, div_value=2.0,
                                                 head_bias=head_bias).double()
    ours = ours.double()
    with torch.no_grad():
        for (n, p), (m, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            assert n == m
            q.copy_(torch.tensor(p.detach().numpy()))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 8)), np.array([1, 5, 9, 3, 7, 0])
    a, b = ours(pargraph.tensor(x), pargraph.tensor(y)), theirs(torch.tensor(x), torch.tensor(y))
    np.testing.assert_allclose(a.output.detach().numpy(), b.output.detach().numpy(), rtol=1e-12)
    a.loss.backward()
    b.loss.backward()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ours.log_prob(pargraph.tensor(x)).detach().numpy(),
                               theirs.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-12)
    assert ours.predict(pargraph.tensor(x)).tolist() == theirs.predict(torch.tensor(x)).tolist()
    one = ours(pargraph.tensor(x[0]), pargraph.tensor(y[0]))
    assert tuple(one.output.shape) == () and one.output.item() == pytest.approx(
        float(theirs(torch.tensor(x[0]), torch.tensor(y[0])).output))
    for bad in ([], [4, 4], [0, 3], [12]):
        with pytest.raises(ValueError):
            pargraph.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=bad)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        ours(pargraph.tensor(x[:1]), pargraph.tensor([10]))


def test_sync_batchnorm_converts_and_trains_as_pytorchs_without_a_process_group():
    """A DDP program converts its batch norms with ``convert_sync_batchnorm``; with no process
    group PyTorch's SyncBatchNorm normalizes over the batch it gets, as pargraph's does: the
    same layers, parameters, running statistics and outputs, train and eval, 2-D to 5-D."""
    torch = pytest.importorskip("torch")
    outs = []
    for library in (pargraph, torch):
        model = library.nn.Sequential(library.nn.Conv2d(3, 4, 3), library.nn.BatchNorm2d(4),
                                      library.nn.Flatten(), library.nn.Linear(4 * 36, 5),
                                      library.nn.BatchNorm1d(5, momentum=None))
        for k, m in enumerate(model.parameters()):
            values = np.random.default_rng(10 + k).standard_normal(tuple(m.shape)) * 0.1
            m.data = library.tensor(values, dtype=library.float32)
        model = library.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        names = [type(m).__name__ for m in model]
        opt = library.optim.SGD(model.parameters(), lr=0.1)
        x = library.tensor(np.random.default_rng(3).standard_normal((6, 3, 8, 8)),
                           dtype=library.float32)
        for _ in range(3):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        model.eval()
        outs.append((names, model(x).detach().numpy(),
                     {k: v.numpy() for k, v in model.state_dict().items()}))
        layer = library.nn.SyncBatchNorm(2)
        outs[-1] += (layer(library.ones(4, 2, 2, 2, 2)).detach().numpy(),)
    (names, y, state, five), (their_names, their_y, their_state, their_five) = outs
    assert names == their_names and names.count("SyncBatchNorm") == 2
    np.testing.assert_allclose(y, their_y, rtol=1e-4, atol=1e-5)
    assert state.keys() == their_state.keys()
    for key in state:
        np.testing.assert_allclose(state[key], their_state[key], rtol=1e-4, atol=1e-6,
                                   err_msg=key)
    np.testing.assert_allclose(five, their_five)
    for library in (pargraph, torch):
        with pytest.raises(ValueError, match=r"expected at least 2D input \(got 1D input\)"):
            library.nn.SyncBatchNorm(2)(library.ones(2))


@pytest.mark.parametrize("spatial, shape, kernel, size", [
    (2, (2, 3, 9, 8), (2, 3), (4, 5)), (2, (3, 7, 6), 2, 3), (2, (2, 1, 5, 5), 1, (5, 5)),
    (3, (2, 2, 7, 6, 5), (2, 3, 2), (4, 3, 2)), (3, (1, 8, 9, 7), 2, 4),
])
def test_fractional_max_pool_places_windows_and_backpropagates_as_pytorchs(spatial, shape,
                                                                           kernel, size):
    """With the same samples, PyTorch's windows, maxima, indices (ties to the first, NaN
    to the last) and gradients, float32 and float64, batched or not."""
    rng = np.random.default_rng(spatial)
    batch = shape[0] if len(shape) == spatial + 2 else 1
    for dtype in ("float32", "float64"):
        x = rng.standard_normal(shape).astype(dtype)
        flat = x.reshape(-1)
        flat[0:-1:7] = flat[1::7]  # ties
        x.reshape(-1)[5] = np.nan
        samples = rng.random((batch, shape[-spatial - 1], spatial)).astype(dtype)
        results = []
        for library in (pargraph, torch):
            xt = library.tensor(x, requires_grad=True)
            pool = getattr(library.nn.functional, f"fractional_max_pool{spatial}d")
            y, i = pool(xt, kernel, output_size=size, return_indices=True,
                        _random_samples=library.tensor(samples))
            weights = np.random.default_rng(0).standard_normal(tuple(y.shape)).astype(dtype)
            (y * library.tensor(weights)).nansum().backward()
            results.append((y.detach().numpy(), i.numpy(), xt.grad.numpy()))
        for ours, theirs in zip(*results):
            np.testing.assert_array_equal(ours, theirs)


def test_fractional_max_pool_modules_ratios_draws_and_errors_as_pytorchs():
    x = pargraph.randn(2, 3, 10, 9)
    y = nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.4))(x)
    assert tuple(y.shape) == (2, 3, 5, 3) == tuple(torch.nn.FractionalMaxPool2d(
        3, output_ratio=(0.5, 0.4))(torch.randn(2, 3, 10, 9)).shape)
    pool = nn.FractionalMaxPool3d(2, output_size=3, return_indices=True)
    values, indices = pool(pargraph.randn(2, 6, 6, 6))
    assert tuple(values.shape) == tuple(indices.shape) == (2, 3, 3, 3)
    assert str(pool) == str(torch.nn.FractionalMaxPool3d(2, output_size=3)) == \
        "FractionalMaxPool3d()"
    first, second = (nn.FractionalMaxPool2d(2, output_size=4)(x) for _ in range(2))
    assert not np.array_equal(first.numpy(), second.numpy())  # a new draw each call
    calls = [
        lambda t: t.nn.FractionalMaxPool2d(3), lambda t: t.nn.FractionalMaxPool2d(3, 2, 0.5),
        lambda t: t.nn.FractionalMaxPool2d(3, output_ratio=1.5),
        lambda t: t.nn.functional.fractional_max_pool2d(t.ones(1, 1, 7, 6), 3, 6),
        lambda t: t.nn.functional.fractional_max_pool2d(t.ones(1, 1, 7, 6), 3),
        lambda t: t.nn.functional.fractional_max_pool3d(t.ones(1, 1, 7, 6, 5), 1, (6, 6, 5)),
        lambda t: t.nn.functional.fractional_max_pool3d(t.ones(1, 1, 7, 6, 5), (2, 1, 1),
                                                        (6, 5, 4)),
    ]
    for call in calls:
        messages = []
        for library in (pargraph, torch):
            with pytest.raises((ValueError, RuntimeError)) as raised:
                call(library)
            messages.append((raised.type, str(raised.value)))
        assert messages[0] == messages[1]


def test_binary_cross_entropy_modules_take_pytorchs_weights():
    target = (SIGNS6 > 0).astype(np.float64)
    results = []
    for library in (pargraph, torch):
        weight, pos_weight = library.tensor(POSITIVE[0]), library.tensor(POSITIVE[1])
        logits = library.nn.BCEWithLogitsLoss(weight, pos_weight=pos_weight)
        probabilities = library.nn.BCELoss(weight, reduction="sum")
        results.append([logits(library.tensor(X), library.tensor(target)).item(),
                        probabilities(library.tensor(PROBS), library.tensor(target)).item(),
                        sorted(logits.state_dict())])
    np.testing.assert_allclose(results[0][:2], results[1][:2], rtol=1e-12)
    assert results[0][2] == results[1][2] == ["pos_weight", "weight"]


def test_embedding_max_norm_renormalizes_the_rows_it_looks_up_as_pytorchs():
    rows = RNG.standard_normal((10, 4)) * 2
    indices = np.array([[1, 2, 3], [3, 3, 9]])
    seen = []
    for library in (pargraph, torch):
        embedding = library.nn.Embedding(10, 4, padding_idx=1, max_norm=1.5, norm_type=3.0)
        embedding.double()
        with library.no_grad():
            embedding.weight.copy_(library.tensor(rows))
        out = embedding(library.tensor(indices))
        (out * library.tensor(RNG.standard_normal((2, 3, 4)))).sum().backward() \
            if library is torch else None
        seen.append((out.detach().numpy(), embedding.weight.detach().numpy()))
    np.testing.assert_allclose(seen[0][0], seen[1][0], rtol=1e-12)
    np.testing.assert_allclose(seen[0][1], seen[1][1], rtol=1e-12)
    untouched = [0, 4, 5, 6, 7, 8]
    np.testing.assert_array_equal(seen[0][1][untouched], rows[untouched])


@pytest.mark.parametrize("mode", ["circular", "reflect", "replicate"])
@pytest.mark.parametrize("kernel,dilation", [(4, 1), (3, 2), ((2, 3), (1, 2))])
def test_convolutions_with_same_padding_in_every_padding_mode_as_pytorchs(mode, kernel,
                                                                         dilation):
    results = []
    for library in (pargraph, torch):
        library.manual_seed(0)
        conv = library.nn.Conv2d(4, 3, kernel, padding="same", dilation=dilation,
                                 padding_mode=mode).double()
        with library.no_grad():
            for k, p in enumerate(conv.parameters()):
                p.copy_(library.tensor(np.random.default_rng(k).standard_normal(
                    tuple(p.shape))))
        x = library.tensor(IMAGES, requires_grad=True)
        out = conv(x)
        (out * library.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))
         ).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    assert results[0][0].shape == IMAGES.shape[:1] + (3,) + IMAGES.shape[2:]
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


# --- module API: hooks, state-dict hooks, extra state, containers ----------------------------

def _module_api_run(library):
    """A program using Module's less common API; what it sees, for comparison."""
    nn = library.nn
    seen = []
    layer = nn.Linear(2, 2)
    with library.no_grad():
        layer.weight.copy_(library.tensor([[1.0, 2.0], [3.0, -1.0]]))
        layer.bias.copy_(library.tensor([0.5, -0.5]))
    layer.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 2,), kwargs),
                                    with_kwargs=True)
    layer.register_forward_hook(lambda m, args, kwargs, out: seen.append(("kw", sorted(kwargs))),
                                with_kwargs=True)
    layer.register_forward_hook(lambda m, args, out: seen.append("first"), prepend=True)
    out = layer(library.tensor([[1.0, 1.0]]))
    seen.append(out.tolist())
    failing = nn.Module()
    failing.forward = None  # calling it raises TypeError
    failing.register_forward_hook(lambda m, args, out: seen.append(("always", out)),
                                  always_call=True)
    try:
        failing(1)
    except TypeError:
        seen.append("raised")

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.count = 3
            self.lin = nn.Linear(1, 1)

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"]

    counter = Counter()
    counter.register_state_dict_pre_hook(lambda m, prefix, keep: seen.append(("pre", prefix)))
    counter.register_state_dict_post_hook(lambda m, state, prefix, meta: seen.append(
        ("post", sorted(state))))
    state = counter.state_dict()
    fresh = Counter()
    fresh.count = 0
    fresh.register_load_state_dict_post_hook(lambda m, keys: keys.unexpected_keys.remove("old"))
    fresh.load_state_dict({**state, "old": library.ones(1)})
    seen.append(fresh.count)
    with library.no_grad():
        fresh.lin.weight.fill_(0.0)
    seen.append(fresh.lin.weight.tolist() != counter.lin.weight.tolist())

    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Linear(1, 1))
    seq.insert(1, nn.Sigmoid())
    del seq[0]
    popped = seq.pop(-1)
    seq += nn.Sequential(nn.ReLU())
    seq[0] = nn.Identity()
    doubled = seq * 2
    joined = seq + nn.Sequential(nn.Tanh())
    seen.append([type(popped).__name__, [type(m).__name__ for m in seq], len(doubled),
                 len(joined), [n for n, _ in seq.named_children()]])
    stack = nn.ModuleList([nn.Linear(1, 1), nn.ReLU()])
    stack.insert(0, nn.Tanh())
    stack.pop(1)
    stack += [nn.Sigmoid()]
    del stack[0]
    seen.append([type(m).__name__ for m in stack] + list(dict(stack.named_children())))
    heads = nn.ModuleDict({"a": nn.ReLU()})
    heads.update([("b", nn.Tanh())])
    heads.update({"c": nn.Sigmoid()})
    heads.pop("a")
    seen.append(list(heads.keys()))
    heads.clear()
    seen.append(len(heads))
    params = nn.ParameterDict({"x": nn.Parameter(library.ones(1))})
    params.update({"y": nn.Parameter(library.zeros(2))})
    params.setdefault("z", nn.Parameter(library.ones(3)))
    seen.append([params.popitem()[0], list(reversed(params)), params.get("q", 7),
                 len(params.copy())])
    shared = nn.Module()
    shared.a = shared.b = nn.Linear(1, 1)
    seen.append([len(list(shared.named_parameters(remove_duplicate=False))),
                 len(list(shared.named_modules(remove_duplicate=False))),
                 [n for n, _ in shared.named_modules(memo={shared.a})]])
    shared.set_submodule("b", nn.ReLU())
    shared.register_module("c", nn.Tanh())
    seen.append([n for n, _ in shared.named_children()])
    seen.append(shared.share_memory() is shared)
    try:
        shared.cuda()
    except AssertionError:
        seen.append("no cuda")
    return seen


def test_module_api_hooks_extra_state_and_containers_are_pytorchs():
    assert _module_api_run(pargraph) == _module_api_run(torch)


def test_a_linear_layer_of_another_dtype_than_its_input_raises_pytorchs_message():
    for library in (pargraph, torch):
        with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but "
                                               "got Double and Float"):
            library.nn.Linear(2, 1)(library.ones(2, 2, dtype=library.float64))


@pytest.mark.parametrize("options", [
    {},
    {"bias_kv": True, "add_zero_attn": True},
    {"separate": True, "average_attn_weights": False},
    {"masks": True, "bias": False},
    {"unbatched": True},
])
def test_multi_head_attention_forward_is_pytorchs(options):
    """``F.multi_head_attention_forward`` called directly (as CLIP's attention pooling does),
    values and gradients, against PyTorch's."""
    rng = np.random.default_rng(11)
    e, heads, length, batch = 8, 2, 4, 3
    shape = (length, e) if options.get("unbatched") else (length, batch, e)
    arrays = {"q": rng.standard_normal(shape), "k": rng.standard_normal(shape),
              "v": rng.standard_normal(shape), "in_w": rng.standard_normal((3 * e, e)) * 0.3,
              "in_b": rng.standard_normal(3 * e) * 0.1, "out_w": rng.standard_normal((e, e)),
              "out_b": rng.standard_normal(e) * 0.1, "bk": rng.standard_normal((1, 1, e)),
              "bv": rng.standard_normal((1, 1, e))}
    found = []
    for library in (pargraph, torch):
        t = {name: library.tensor(a, requires_grad=True) for name, a in arrays.items()}
        kwargs = {"average_attn_weights": options.get("average_attn_weights", True)}
        if options.get("separate"):
            kwargs.update(use_separate_proj_weight=True, q_proj_weight=t["in_w"][:e],
                          k_proj_weight=t["in_w"][e:2 * e], v_proj_weight=t["in_w"][2 * e:])
        if options.get("masks"):
            kwargs["attn_mask"] = library.tensor(np.triu(np.ones((length, length)), 1) > 0)
            kwargs["key_padding_mask"] = library.tensor(
                np.array([[False] * length, [False] * (length - 1) + [True],
                          [False] * length]))
        with_kv = options.get("bias_kv")
        out, weights = library.nn.functional.multi_head_attention_forward(
            t["q"], t["k"], t["v"], e, heads, t["in_w"],
            None if options.get("bias") is False else t["in_b"],
            t["bk"] if with_kv else None, t["bv"] if with_kv else None,
            options.get("add_zero_attn", False), 0.0, t["out_w"], t["out_b"], **kwargs)
        (out.sum() + (weights * weights).sum()).backward()
        found.append([out.detach().numpy(), weights.detach().numpy()]
                     + [t[name].grad.numpy() if t[name].grad is not None else None
                        for name in sorted(t)])
    for ours, theirs in zip(*found):
        if theirs is None:
            assert ours is None
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def test_log_sigmoid_losses_have_pytorchs_gradient_at_a_logit_of_zero():
    """A logit of exactly 0 (a zero-initialized head, ContinuousBernoulli at 1/2): the stable
    formula's kinks there must not change the gradient (sigmoid(0) - y), as in PyTorch."""
    found = []
    for library in (pargraph, torch):
        F = library.nn.functional
        logits = library.tensor([[0.0, 0.3, -2.0, 0.0]], dtype=library.float64,
                                requires_grad=True)
        target = library.tensor([[0.1, 0.0, 1.0, 1.0]], dtype=library.float64)
        weight = library.tensor([2.0, 1.0, 3.0, 0.5], dtype=library.float64)
        losses = [F.logsigmoid(logits).sum(),
                  F.binary_cross_entropy_with_logits(logits, target),
                  F.binary_cross_entropy_with_logits(logits, target, pos_weight=weight),
                  F.multilabel_soft_margin_loss(logits, target.round())]
        found.append([library.autograd.grad(loss, logits)[0].numpy() for loss in losses])
    for ours, theirs in zip(*found):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
