"""huyvnphan/PyTorch_CIFAR10 v3.0.1 architectures: published parameter counts and state-dict layout.

The layout is checked against torchvision's ImageNet networks (an independent implementation the
published code was derived from): the same keys minus the stem layers removed for 32x32 inputs,
the same shapes except the documented 32x32 changes.
"""

import pytest
import torch
import torchvision.models as tvm

from calbench.models.cifar import ARCHITECTURES, PUBLISHED_PARAMS

torch.set_num_threads(1)  # the CI machine's 2 cores are shared; threads oversubscribe


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def on_meta(build):
    # construct without allocating or initialising weights: counts and shapes only
    with torch.device("meta"):
        return build()


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_parameter_count_matches_readme(name):
    count = n_params(on_meta(ARCHITECTURES[name]))
    # README column: millions with 3 decimals. inception_v3 is printed as 21.640 for
    # 21,638,954 parameters (rounded up); all the others agree to the rounding.
    tol = 0.0011 if name == "inception_v3" else 0.0005
    assert abs(count / 1e6 - PUBLISHED_PARAMS[name]) <= tol, count


def test_exact_counts_hand_checked():
    # resnet18: torchvision's 11,689,512 (1000 classes, 7x7 stem) - 7x7x3x64 + 3x3x3x64
    # - 512*1000 - 1000 + 512*10 + 10.
    assert n_params(on_meta(ARCHITECTURES["resnet18"])) == 11_689_512 - 9408 + 1728 - 513_000 + 5130
    # densenet121: torchvision's 7,978,856 with the same stem/classifier substitutions.
    assert (
        n_params(on_meta(ARCHITECTURES["densenet121"]))
        == 7_978_856 - 9408 + 1728 - 1_025_000 + 10_250
    )


def _sd_shapes(model):
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


CASES = {
    # name: (torchvision builder, keys removed for 32x32, keys whose shape changes)
    "resnet18": (lambda: tvm.resnet18(num_classes=10), set(), {"conv1.weight"}),
    "resnet50": (lambda: tvm.resnet50(num_classes=10), set(), {"conv1.weight"}),
    "vgg16_bn": (lambda: tvm.vgg16_bn(num_classes=10), set(), {"classifier.0.weight"}),
    "densenet161": (lambda: tvm.densenet161(num_classes=10), set(), {"features.conv0.weight"}),
    "mobilenet_v2": (lambda: tvm.mobilenet_v2(num_classes=10), set(), set()),
    "googlenet": (
        lambda: tvm.googlenet(num_classes=10, aux_logits=False, init_weights=False),
        {"conv2", "conv3"},
        {
            "conv1.conv.weight",
            "conv1.bn.weight",
            "conv1.bn.bias",
            "conv1.bn.running_mean",
            "conv1.bn.running_var",
        },
    ),
    "inception_v3": (
        lambda: tvm.inception_v3(num_classes=10, aux_logits=False, init_weights=False),
        {"Conv2d_2a_3x3", "Conv2d_2b_3x3", "Conv2d_3b_1x1", "Conv2d_4a_3x3"},
        {
            "Conv2d_1a_3x3.conv.weight",
            "Conv2d_1a_3x3.bn.weight",
            "Conv2d_1a_3x3.bn.bias",
            "Conv2d_1a_3x3.bn.running_mean",
            "Conv2d_1a_3x3.bn.running_var",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_dict_layout_matches_torchvision(name):
    build_tv, removed, changed = CASES[name]
    ours, theirs = _sd_shapes(on_meta(ARCHITECTURES[name])), _sd_shapes(on_meta(build_tv))
    theirs = {k: v for k, v in theirs.items() if k.split(".")[0] not in removed}
    assert set(ours) == set(theirs)
    differ = {k for k in ours if ours[k] != theirs[k]}
    assert differ == changed


def test_stems_are_32x32_variants():
    assert _sd_shapes(on_meta(ARCHITECTURES["resnet18"]))["conv1.weight"] == (64, 3, 3, 3)
    assert _sd_shapes(on_meta(ARCHITECTURES["googlenet"]))["conv1.conv.weight"] == (192, 3, 3, 3)
    assert _sd_shapes(on_meta(ARCHITECTURES["inception_v3"]))["Conv2d_1a_3x3.conv.weight"] == (
        192,
        3,
        3,
        3,
    )
    assert _sd_shapes(on_meta(ARCHITECTURES["vgg11_bn"]))["classifier.0.weight"] == (4096, 512)


@pytest.mark.parametrize(
    "name",
    [
        "mobilenet_v2",
        *(
            pytest.param(n, marks=pytest.mark.slow)
            for n in ("resnet18", "densenet121", "googlenet", "inception_v3")
        ),
    ],
)
def test_forward_on_32x32(name):
    model = ARCHITECTURES[name]().eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 32, 32))
    assert out.shape == (1, 10)
    assert torch.isfinite(out).all()
