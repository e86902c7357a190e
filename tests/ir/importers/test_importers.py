"""The importers on real models and on what they cannot map: the one-line message of unmapped
ops, keep_windows, the mapped share of small torchvision-like models (written inline: a ResNet
block, an LSTM, a GRU, a transformer encoder layer), imported through torch.export and through
ONNX (torch.onnx's TorchScript exporter), each imported graph computing what the model does."""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from ir.core.verify import verify
from ir.importers.common import ImportResult, UnsupportedOps, rules_for, supported
from ir.importers.onnx_model import import_onnx
from ir.importers.torch_export import import_torch
from ir.materialize.to_torch import GraphModule


class Unsupported(nn.Module):
    """Three rolls and an einsum between supported ops."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.roll(torch.relu(x), 1, 0)
        b = torch.roll(a * 2.0, 2, 1)
        c = torch.roll(torch.tanh(b), 1, 1)
        d = torch.einsum("ij,jk->ik", c, y)
        return torch.sigmoid(d) + 1.0


ARGS = (torch.randn(4, 4), torch.randn(4, 3))


def test_unmapped_ops_are_listed_in_one_message_with_their_counts():
    with pytest.raises(UnsupportedOps) as e:
        import_torch(Unsupported(), ARGS, "rolls")
    assert str(e.value) == "unsupported: aten.roll (3), aten.einsum (1)"
    assert e.value.unmapped == {"aten.roll": 3, "aten.einsum": 1}


def test_keep_windows_returns_the_supported_windows_and_no_error():
    result = import_torch(Unsupported(), ARGS, "rolls", keep_windows=True)
    assert result.graph is None and result.unmapped == {"aten.roll": 3, "aten.einsum": 1}
    assert result.mapped == 5 and result.source == "rolls"
    (window,) = result.windows  # sigmoid, + 1.0: the others are cut apart by the rolls
    verify(window)
    assert [i.op.name for i in window.insts] == ["sigmoid", "add"]
    assert all(p.name in result.params for p in window.params)


def _onnx_of(module: nn.Module, args: tuple) -> onnx.ModelProto:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, dynamo=False)  # type: ignore[arg-type]
    return onnx.load_from_string(f.getvalue())


def test_onnx_unmapped_ops_and_windows():
    model = _onnx_of(Unsupported(), ARGS)
    with pytest.raises(UnsupportedOps, match=r"^unsupported: Einsum \(1\)$"):
        import_onnx(model, "rolls")
    result = import_onnx(model, "rolls", keep_windows=True)
    assert result.graph is None and result.unmapped == {"Einsum": 1} and result.windows


def test_the_rules_registry_is_built_from_the_ops():
    assert [c.name for c in rules_for("aten", "aten.add.Tensor")] == ["batch_norm", "add"]
    assert [c.name for c in rules_for("onnx", "Add")] == ["linear", "add"]
    assert "aten.conv2d.default" in supported("aten") and "Conv" in supported("onnx")


# ---- small models written inline ------------------------------------------------------------

class ResBlock(nn.Module):
    def __init__(self, c: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, c, 1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(x + self.bn2(self.conv2(x)))
        x = self.pool(self.conv3(x))
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class LstmNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.fc(y[-1])


class GruNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(x)
        return self.fc(y[:, -1])


class MlpBlock(nn.Module):
    """A transformer's feed-forward half: linear, GELU, linear, residual, layer norm."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.norm(x + self.fc2(nn.functional.gelu(self.fc1(x)))), dim=-1)


def _models() -> dict[str, tuple[nn.Module, tuple]]:
    torch.manual_seed(0)
    return {
        "resnet_block": (ResBlock(), (torch.randn(2, 3, 16, 16),)),
        "lstm": (LstmNet(), (torch.randn(5, 2, 8),)),
        "gru": (GruNet(), (torch.randn(2, 5, 8),)),
        "mlp_block": (MlpBlock(), (torch.randn(2, 5, 16),)),
        "transformer_encoder": (nn.TransformerEncoderLayer(16, 4, 32, batch_first=True),
                                (torch.randn(2, 5, 16),)),
    }


def _same_outputs(result: ImportResult, module: nn.Module, args: tuple) -> None:
    assert result.graph is not None
    verify(result.graph)
    got = GraphModule(result.graph, result.params)(*args)[0]
    want = module(*args)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(_models()))
def test_small_models_import_through_torch_export(name: str):
    module, args = _models()[name]
    module.eval()
    result = import_torch(module, args, name)
    assert result.mapped_share == 1.0 and result.mapped > 0
    _same_outputs(result, module, args)


@pytest.mark.parametrize("name", ["resnet_block", "mlp_block"])
def test_small_models_import_through_onnx(name: str):
    module, args = _models()[name]
    module.eval()
    result = import_onnx(_onnx_of(module, args), name, keep_windows=True)
    assert result.mapped_share >= 0.9, (result.unmapped, result.mapped)
    if result.graph is not None:
        _same_outputs(result, module, args)
