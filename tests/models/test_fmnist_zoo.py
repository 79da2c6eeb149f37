import pytest
import torch
from torch import nn

from calbench.models import (
    SOURCES,
    ZOOS,
    architectures,
    build_arch,
    build_from_spec,
    get_source,
    parse_spec,
    resolve_device,
)
from calbench.models.fmnist import ARCHITECTURES

FAMILIES = ["mlp", "lenet5", "vgg_small", "resnet_small", "mobilenet_small", "densenet_small"]


def _n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


def test_the_zoo_has_six_families():
    assert sorted(ARCHITECTURES) == sorted(FAMILIES)
    assert architectures("fashion_mnist") is ARCHITECTURES
    assert ZOOS["fashion_mnist"] == "calbench.models.fmnist"


@pytest.mark.parametrize("arch", FAMILIES)
def test_every_arch_maps_a_batch_of_28x28_images_to_10_logits(arch):
    torch.manual_seed(0)
    model = build_arch("fashion_mnist", arch).eval()
    with torch.no_grad():
        out = model(torch.randn(3, 1, 28, 28))
    assert out.shape == (3, 10) and out.dtype == torch.float32
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("arch", FAMILIES)
def test_eval_outputs_do_not_depend_on_the_batch(arch):
    torch.manual_seed(1)
    model = build_arch("fashion_mnist", arch).eval()
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(x)[1:2], model(x[1:2]), rtol=1e-4, atol=1e-5)


def test_parameter_counts_by_hand():
    # MLP 784-256-128-10: weights + biases
    assert _n_params(build_arch("fashion_mnist", "mlp")) == (784 * 256 + 256) + (
        256 * 128 + 128
    ) + (128 * 10 + 10)
    # LeNet-5: conv 1->6 5x5, conv 6->16 5x5, fc 400-120-84-10 = the classic 61,706
    lenet = (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10)
    assert lenet == 61_706
    assert _n_params(build_arch("fashion_mnist", "lenet5")) == lenet


def test_mobilenet_uses_depthwise_separable_blocks():
    model = build_arch("fashion_mnist", "mobilenet_small")
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    depthwise = [c for c in convs if c.groups == c.in_channels == c.out_channels and c.groups > 1]
    pointwise = [c for c in convs if c.kernel_size == (1, 1)]
    assert len(depthwise) == len(pointwise) == 5


def test_densenet_concatenates_growth_channels():
    model = build_arch("fashion_mnist", "densenet_small")
    # stem 24 + 2 layers x 12 = 48, transition halves to 24, + 4 x 12 = 72 features
    assert model.fc.in_features == 72
    small = build_arch("fashion_mnist", "densenet_small", growth=12, blocks=(3, 3), stem=16)
    assert small.fc.in_features == 62  # 16 + 36 = 52 -> 26 + 36


def test_resnet_blocks_are_residual():
    model = build_arch("fashion_mnist", "resnet_small")
    block = model.layers[0]
    with torch.no_grad():
        for p in block.parameters():
            p.zero_()
        x = torch.rand(2, 16, 14, 14)
        # with zeroed convolutions and BN (scale 0, shift 0) the block is relu(identity)
        torch.testing.assert_close(block.eval()(x), torch.relu(x))


def test_unknown_arch_dataset_and_source_are_refused():
    with pytest.raises(ValueError, match="unknown arch 'alexnet' for dataset 'fashion_mnist'"):
        build_arch("fashion_mnist", "alexnet")
    with pytest.raises(ValueError, match="no architecture zoo for dataset 'svhn'"):
        build_arch("svhn", "mlp")
    with pytest.raises(ValueError, match="unknown model source 'onnx'"):
        get_source("onnx")
    assert "train" in SOURCES


def test_build_from_spec_passes_arch_kwargs_and_checks_them():
    m = build_from_spec(
        {"dataset": "fashion_mnist", "arch": "mlp", "arch_kwargs": {"hidden": [32]}}
    )
    assert _n_params(m) == 784 * 32 + 32 + 32 * 10 + 10
    with pytest.raises(ValueError, match="do not fit arch 'mlp'"):
        build_from_spec({"dataset": "fashion_mnist", "arch": "mlp", "arch_kwargs": {"depth": 3}})
    with pytest.raises(ValueError, match="no 'arch' entry"):
        build_from_spec({"dataset": "fashion_mnist"})


def test_parse_spec_reads_inline_json_and_files(tmp_path):
    assert parse_spec('{"arch": "mlp"}') == {"arch": "mlp"}
    (tmp_path / "s.json").write_text('{"arch": "lenet5"}')
    assert parse_spec(str(tmp_path / "s.json")) == {"arch": "lenet5"}
    (tmp_path / "s.yaml").write_text("arch: vgg_small\ntraining: {epochs: 2}\n")
    assert parse_spec(str(tmp_path / "s.yaml")) == {"arch": "vgg_small", "training": {"epochs": 2}}
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_spec('{"arch": }')
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ValueError, match="one mapping"):
        parse_spec(str(tmp_path / "list.json"))
    with pytest.raises(FileNotFoundError, match="neither inline JSON"):
        parse_spec(str(tmp_path / "missing.json"))


def test_resolve_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == expected
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="not a torch device"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU is available"):
            resolve_device("cuda")
