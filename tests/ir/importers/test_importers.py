"""The importers on real models and on what they cannot map: the one-line message of unmapped
ops, keep_windows, the mapped share of small torchvision-like models (inline_models.py),
imported through torch.export and through ONNX (torch.onnx's TorchScript exporter), each
imported graph computing what the model does."""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from inline_models import MAPPED, PARTLY
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


# ---- small models written inline (inline_models.py) ---------------------------------------

def _same_outputs(result: ImportResult, module: nn.Module, args: tuple) -> None:
    assert result.graph is not None
    verify(result.graph)
    got = GraphModule(result.graph, result.params)(*args)[0]
    want = module(*args)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(MAPPED))
def test_small_models_import_through_torch_export(name: str):
    torch.manual_seed(0)
    module, args = MAPPED[name]()
    module.eval()
    result = import_torch(module, args, name)
    assert result.mapped_share == 1.0 and result.mapped > 0
    _same_outputs(result, module, args)


def test_in_place_aten_ops_import_as_graphirs_in_place_ops():
    """`aten.relu_` and `aten.add_` (torchvision's residual blocks) are relu_ and add_, each
    imported by its pure twin's rule (`InPlace.__init_subclass__`)."""
    torch.manual_seed(0)
    module, args = MAPPED["inplace_resnet_block"]()
    result = import_torch(module.eval(), args, "inplace_resnet_block")
    assert result.graph is not None
    ops = [i.op.name for i in result.graph.insts]
    assert ops.count("relu_") == 2 and ops.count("add_") == 1, ops


@pytest.mark.parametrize("kernel,stride,padding,size", [
    (3, 2, 0, 15), (3, 2, 0, 14), (3, 2, 1, 8), (2, 2, 0, 7), (3, 3, 1, 10), (3, 1, 0, 6)])
def test_a_ceil_mode_max_pool_is_a_pad_then_the_floor_mode_pool(kernel, stride, padding, size):
    """GoogLeNet's and SqueezeNet's pools: the end padded with the lowest value where torch's
    ceil mode adds a window (none where it adds none, or where that window would start in the
    padding), each output equal to torch's."""
    m = nn.MaxPool2d(kernel, stride, padding, ceil_mode=True).eval()
    x = torch.randn(1, 2, size, size + 1)
    result = import_torch(m, (x,), "pool")
    assert result.graph is not None
    verify(result.graph)
    got = GraphModule(result.graph, result.params)(x)[0]
    np.testing.assert_array_equal(got.numpy(), m(x).numpy())
    floor = nn.MaxPool2d(kernel, stride, padding)(x)
    ops = [i.op.name for i in result.graph.insts]
    assert ops == (["maxpool2d"] if floor.shape == m(x).shape else ["pad_constant", "maxpool2d"])


def test_norms_with_another_epsilon_keep_their_formula():
    """batch_norm's epsilon goes into the variance (an add before it); layer_norm's is its
    formula in GraphIR's ops: no layer_norm instruction is left (its EPS is GraphIR's)."""
    torch.manual_seed(0)
    module, args = MAPPED["other_eps_norms"]()
    result = import_torch(module.eval(), args, "other_eps_norms")
    assert result.graph is not None
    ops = [i.op.name for i in result.graph.insts]
    assert "layer_norm" not in ops and ops.count("sqrt") == 2, ops
    bn = ops.index("batch_norm")
    assert ops[bn - 1] == "add", ops


@pytest.mark.parametrize("name", list(PARTLY))
def test_models_with_ops_graphir_lacks_keep_their_windows(name: str):
    make, unmapped = PARTLY[name]
    torch.manual_seed(0)
    module, args = make()
    result = import_torch(module.eval(), args, name, keep_windows=True)
    assert result.unmapped == unmapped and result.mapped_share >= 0.9
    assert result.graph is None and result.windows
    for w in result.windows:
        verify(w)


@pytest.mark.parametrize("name", ["resnet_block", "mlp_block", "other_eps_norms", "embedding_linear"])
def test_small_models_import_through_onnx(name: str):
    torch.manual_seed(0)
    module, args = MAPPED[name]()
    module.eval()
    result = import_onnx(_onnx_of(module, args), name, keep_windows=True)
    assert result.mapped_share >= 0.9, (result.unmapped, result.mapped)
    if result.graph is not None:
        _same_outputs(result, module, args)


# ---- token embeddings -----------------------------------------------------------------------


def test_token_embeddings_import_as_embedding_through_torch_export_and_onnx():
    """nn.Embedding (aten.embedding, its padding_idx dropped: it only masks the gradient; ONNX
    Gather of the table by data-dependent indices) is GraphIR's embedding, with the indices
    an int64 graph input."""
    torch.manual_seed(0)
    module, args = MAPPED["embedding_linear"]()
    module.eval()
    for result, ops in ((import_torch(module, args, "emb"), ["embedding", "linear"]),
                        (import_onnx(_onnx_of(module, args), "emb"), ["embedding", "matmul", "add"])):
        assert result.graph is not None
        assert [i.op.name for i in result.graph.insts] == ops
        assert [str(v.type) for v in result.graph.inputs] == ["i64[2,6]"]
        _same_outputs(result, module, args)


class _ScaledGradEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(10, 4))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.w, scale_grad_by_freq=True) * 2.0


def test_an_embedding_scaling_its_gradient_by_frequency_is_not_mapped():
    with pytest.raises(UnsupportedOps, match=r"^unsupported: aten.embedding \(1\)$"):
        import_torch(_ScaledGradEmbedding(), (torch.randint(0, 10, (3,)),), "scaled")


def test_onnx_gather_by_constant_indices_stays_gather():
    class Rows(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.index_select(0, torch.tensor([2, 0])) + x[torch.tensor([[1, -1]])].sum(0)

    x = torch.randn(4, 3)
    result = import_onnx(_onnx_of(Rows(), (x,)), "rows")
    assert result.graph is not None
    assert [i.op.name for i in result.graph.insts if i.op.name in ("gather", "embedding")] == \
        ["gather", "embedding"]
    _same_outputs(result, Rows(), (x,))
