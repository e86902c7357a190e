"""The corpus of real architectures (issue 32 point 4): windows of imported models, committed as
`.gir` files (`seeds/models/<arch>.w<i>.gir`, with `<arch>.w<i>.npz` of the model's weights
when they are small), so that a fresh clone and CI need no model library.

    python -m mutators.model_corpus --out seeds/models          # regenerate, print the table
    python -m mutators.model_corpus --only resnet18,moe --table  # the mapped-share table only

Architectures come from torchvision, timm and transformers (the `[models]` extra; random weights,
small configurations: `mutators.model_seeds`) and from the modules defined here (a recurrent
language model and tagger, a transformer encoder and a decoder with rotary positions, a
mixture-of-experts layer, a detection head, a U-Net block, a temporal convolution network, a
Conv-LSTM captioner). Each of these is also a factory entry for `mutation.seeds`
(`mutators.model_corpus:moe`). For each architecture the table says how many op instances the
importer met, the share it mapped, and what it did not map (op: instances).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

#: an .npz of a window's weights is written when they hold at most this many elements
MAX_NPZ_ELEMS = 20_000


# ---- inline architectures (factories: () -> (module, example inputs)) ---------------------------


def _seeded() -> None:
    import torch

    torch.manual_seed(0)


def lstm_lm() -> tuple[Any, tuple[Any, ...]]:
    """A word-level LSTM language model: embedding, two-layer LSTM, tied-size decoder."""
    import torch
    from torch import nn

    class LSTMLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 16)
            self.rnn = nn.LSTM(16, 24, num_layers=2)
            self.drop = nn.Dropout(0.1)
            self.out = nn.Linear(24, 100)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            y, _ = self.rnn(self.emb(ids))
            return torch.log_softmax(self.out(self.drop(y)), dim=-1)

    _seeded()
    return LSTMLM(), (torch.randint(0, 100, (8, 2)),)


def gru_tagger() -> tuple[Any, tuple[Any, ...]]:
    """A bidirectional GRU sequence tagger over features."""
    import torch
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(12, 16)
            self.rnn = nn.GRU(16, 16, bidirectional=True)
            self.head = nn.Linear(32, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.rnn(torch.tanh(self.proj(x)))
            return torch.softmax(self.head(y), dim=-1)

    _seeded()
    return Tagger(), (torch.randn(6, 2, 12),)


def transformer_encoder() -> tuple[Any, tuple[Any, ...]]:
    """torch's TransformerEncoder: self-attention, layer norm, GELU feed-forward, learned
    positions."""
    import torch
    from torch import nn

    class Enc(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos = nn.Parameter(torch.randn(1, 8, 32) * 0.02)
            layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(self.enc(x + self.pos))

    _seeded()
    return Enc(), (torch.randn(2, 8, 32),)


def _rotary(x: Any, cos: Any, sin: Any) -> Any:
    import torch

    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rotary_decoder() -> tuple[Any, tuple[Any, ...]]:
    """A decoder-only transformer block with rotary positions, causal attention, RMS-style
    layer norm and a GELU MLP (a small GPT/LLaMA layer written out)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int = 32, heads: int = 2, t: int = 8) -> None:
            super().__init__()
            self.h, self.dh = heads, d // heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            pos = torch.arange(t, dtype=torch.float32)[:, None]
            freq = 1.0 / (10000 ** (torch.arange(0, self.dh, 2, dtype=torch.float32) / self.dh))
            ang = torch.cat([pos * freq, pos * freq], dim=-1)
            self.register_buffer("cos", ang.cos())
            self.register_buffer("sin", ang.sin())
            self.register_buffer("mask", torch.triu(torch.full((t, t), -1e9), diagonal=1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q = q.reshape(b, t, self.h, self.dh).transpose(1, 2)
            k = k.reshape(b, t, self.h, self.dh).transpose(1, 2)
            v = v.reshape(b, t, self.h, self.dh).transpose(1, 2)
            q, k = _rotary(q, self.cos, self.sin), _rotary(k, self.cos, self.sin)
            att = torch.softmax(q @ k.transpose(-1, -2) / self.dh ** 0.5 + self.mask, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.o(y)
            return x + self.mlp(self.ln2(x))

    _seeded()
    return Block(), (torch.randn(2, 8, 32),)


def moe() -> tuple[Any, tuple[Any, ...]]:
    """A mixture-of-experts feed-forward layer: a softmax router, top-2 gating (the gates at or
    above each token's second largest, renormalized), four GELU experts computed densely as
    batched matmuls and mixed by the gates (as exportable MoE layers are written)."""
    import torch
    from torch import nn

    class MoE(nn.Module):
        def __init__(self, d: int = 16, experts: int = 4) -> None:
            super().__init__()
            self.router = nn.Linear(d, experts)
            self.w1 = nn.Parameter(torch.randn(experts, d, 32) * 0.1)
            self.w2 = nn.Parameter(torch.randn(experts, 32, d) * 0.1)
            self.norm = nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            gates = torch.softmax(self.router(x), dim=-1)  # [t, e]
            kth = torch.topk(gates, 2, dim=-1).values[:, 1:]  # [t, 1]
            mask = gates * (gates >= kth).to(gates.dtype)
            mask = mask / mask.sum(-1, keepdim=True)
            h = torch.nn.functional.gelu(torch.matmul(x.unsqueeze(0), self.w1))  # [e, t, 32]
            y = torch.matmul(h, self.w2)  # [e, t, d]
            return self.norm(x + (y * mask.t().unsqueeze(-1)).sum(0))

    _seeded()
    return MoE(), (torch.randn(8, 16),)


def detection_head() -> tuple[Any, tuple[Any, ...]]:
    """A RetinaNet/FCOS-style detection head on two FPN levels: a lateral 1x1 conv, a top-down
    upsampled sum, and shared class and box towers (conv, group norm, ReLU) with sigmoid
    class scores and ReLU box distances."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self, c: int = 16, classes: int = 5) -> None:
            super().__init__()
            self.lat4, self.lat5 = nn.Conv2d(24, c, 1), nn.Conv2d(32, c, 1)
            self.cls = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(4, c), nn.ReLU(),
                                     nn.Conv2d(c, classes, 3, padding=1))
            self.box = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.GroupNorm(4, c), nn.ReLU(),
                                     nn.Conv2d(c, 4, 3, padding=1))

        def forward(self, c4: torch.Tensor, c5: torch.Tensor) -> tuple[torch.Tensor, ...]:
            p5 = self.lat5(c5)
            p4 = self.lat4(c4) + nn.functional.interpolate(p5, scale_factor=2.0, mode="nearest")
            outs = []
            for p in (p4, p5):
                outs.append(torch.sigmoid(self.cls(p)).flatten(2))
                outs.append(torch.relu(self.box(p)).flatten(2))
            return torch.cat(outs[0::2], dim=2), torch.cat(outs[1::2], dim=2)

    _seeded()
    return Head(), (torch.randn(1, 24, 8, 8), torch.randn(1, 32, 4, 4))


def unet_block() -> tuple[Any, tuple[Any, ...]]:
    """A U-Net level: two conv-BN-ReLU, max-pool down, the level below, transposed-conv up,
    skip concatenation."""
    import torch
    from torch import nn

    def cbr(i: int, o: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d1, self.d2 = nn.Sequential(cbr(3, 8), cbr(8, 8)), nn.Sequential(cbr(8, 16))
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.u1 = nn.Sequential(cbr(16, 8), nn.Conv2d(8, 2, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            return self.u1(torch.cat([a, self.up(b)], dim=1))

    _seeded()
    return UNet().eval(), (torch.randn(1, 3, 16, 16),)


def tcn() -> tuple[Any, tuple[Any, ...]]:
    """A temporal convolution network (Bai et al.'s TCN): dilated causal conv1d residual
    blocks, each conv padded on both sides and its last steps chomped off."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c: int, dil: int) -> None:
            super().__init__()
            self.chomp = (3 - 1) * dil
            self.c1 = nn.Conv1d(c, c, 3, dilation=dil, padding=self.chomp)
            self.c2 = nn.Conv1d(c, c, 3, dilation=dil, padding=self.chomp)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.c1(x)[:, :, :-self.chomp])
            y = torch.relu(self.c2(y)[:, :, :-self.chomp])
            return torch.relu(x + y)

    class TCN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Conv1d(4, 12, 1)
            self.blocks = nn.Sequential(Block(12, 1), Block(12, 2), Block(12, 4))
            self.out = nn.Linear(12, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.out(self.blocks(self.inp(x))[:, :, -1])

    _seeded()
    return TCN(), (torch.randn(2, 4, 24),)


def conv_lstm_captioner() -> tuple[Any, tuple[Any, ...]]:
    """A CNN encoder (conv, BN, ReLU, adaptive average pool) feeding an LSTM decoder over
    embedded tokens (show-and-tell)."""
    import torch
    from torch import nn

    class Cap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                                     nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.img = nn.Linear(8, 16)
            self.emb = nn.Embedding(50, 16)
            self.rnn = nn.LSTM(16, 16, batch_first=True)
            self.out = nn.Linear(16, 50)

        def forward(self, image: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
            v = self.img(self.cnn(image)).unsqueeze(1)
            y, _ = self.rnn(torch.cat([v, self.emb(ids)], dim=1))
            return self.out(y)

    _seeded()
    return Cap().eval(), (torch.randn(2, 3, 16, 16), torch.randint(0, 50, (2, 6)))


def mlp_mixer() -> tuple[Any, tuple[Any, ...]]:
    """An MLP-Mixer block pair: patch embedding by a strided conv, token- and channel-mixing
    MLPs with layer norm and GELU."""
    import torch
    from torch import nn

    class Mixer(nn.Module):
        def __init__(self, c: int = 16, tokens: int = 16) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, c, 4, stride=4)
            self.n1, self.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.tok = nn.Sequential(nn.Linear(tokens, 32), nn.GELU(), nn.Linear(32, tokens))
            self.ch = nn.Sequential(nn.Linear(c, 32), nn.GELU(), nn.Linear(32, c))
            self.head = nn.Linear(c, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.patch(x).flatten(2).transpose(1, 2)  # [b, tokens, c]
            x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
            x = x + self.ch(self.n2(x))
            return self.head(x.mean(1))

    _seeded()
    return Mixer(), (torch.randn(2, 3, 16, 16),)


#: the inline architectures, by name
INLINE = {f.__name__: f for f in (lstm_lm, gru_tagger, transformer_encoder, rotary_decoder, moe,
                                  detection_head, unet_block, tcn, conv_lstm_captioner, mlp_mixer)}

#: architecture -> `mutation.seeds` entry
ARCHITECTURES: dict[str, str] = {
    **{n: f"torchvision:{n}" for n in (
        "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "vgg11_bn", "alexnet",
        "squeezenet1_1", "densenet121", "googlenet", "mobilenet_v2", "mobilenet_v3_small",
        "mnasnet0_5", "shufflenet_v2_x0_5", "efficientnet_b0", "regnet_x_400mf",
        "convnext_tiny", "regnet_y_400mf")},
    # ViT and Swin in small configurations (torchvision's are 768 wide)
    "vit_tiny": "timm:vit_tiny_patch16_224", "swin_tiny": "timm:swin_tiny_patch4_window7_224",
    **{f"hf_{n}": f"transformers:{n}" for n in ("bert", "gpt2", "llama", "mistral", "qwen2",
                                                 "mixtral", "t5", "vit")},
    **{n: f"mutators.model_corpus:{n}" for n in INLINE},
}


def convert(arch: str, entry: str, count: int, k_min: int, k_max: int) -> tuple[Any, list[Any]]:
    """(ImportResult, windows) of one architecture."""
    from mutators.model_seeds import WindowOptions, import_model, model_windows

    result = import_model(entry)
    return result, model_windows(result, arch, WindowOptions(count, k_min, k_max))


def write_windows(out: Path, arch: str, windows: list[Any], params: dict[str, np.ndarray]) -> int:
    """`<out>/<arch>.w<i>.gir` (+ `.npz` of small weights); returns the files' bytes."""
    from ir.core.npz import npz_bytes

    size = 0
    for old in list(out.glob(f"{arch}.w*.gir")) + list(out.glob(f"{arch}.w*.npz")):
        old.unlink()
    for i, w in enumerate(windows):
        gir = out / f"{arch}.w{i}.gir"
        gir.write_text(w.text())
        size += gir.stat().st_size
        weights = w.weights(params)
        if weights and sum(a.size for a in weights.values()) <= MAX_NPZ_ELEMS:
            npz = out / f"{arch}.w{i}.npz"
            npz.write_bytes(npz_bytes(weights))
            size += npz.stat().st_size
    return size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="seeds/models", help="folder of the corpus")
    ap.add_argument("--only", default="", help="comma-separated architectures")
    ap.add_argument("--table", action="store_true", help="print the table, write nothing")
    ap.add_argument("--windows", type=int, default=3, help="windows per architecture")
    ap.add_argument("--k-min", type=int, default=5)
    ap.add_argument("--k-max", type=int, default=30)
    a = ap.parse_args(argv)
    archs = [x for x in a.only.split(",") if x] or list(ARCHITECTURES)
    out = Path(a.out)
    if not a.table:
        out.mkdir(parents=True, exist_ok=True)
    rows = []
    for arch in archs:
        t0 = time.perf_counter()
        try:
            result, windows = convert(arch, ARCHITECTURES[arch], a.windows, a.k_min, a.k_max)
        except Exception as e:  # one architecture failing is a row of the table, not the end
            rows.append((arch, 0, 0.0, f"FAILED: {str(e).splitlines()[0][:150]}", 0, 0))
            print(f"{arch}: failed: {str(e).splitlines()[0][:200]}", file=sys.stderr, flush=True)
            continue
        size = 0 if a.table else write_windows(out, arch, windows, result.params)
        total = result.mapped + sum(result.unmapped.values())
        missing = ", ".join(f"{op} ({n})" for op, n in
                            sorted(Counter(result.unmapped).items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append((arch, total, result.mapped_share, missing, len(windows), size))
        print(f"{arch}: {total} op instances, {result.mapped_share:.1%} mapped, "
              f"{len(windows)} windows, {time.perf_counter() - t0:.1f} s", file=sys.stderr,
              flush=True)
    print("| architecture | op instances | mapped | windows | unmapped (instances) |")
    print("|---|---|---|---|---|")
    for arch, total, share, missing, nw, _ in rows:
        print(f"| {arch} | {total} | {share:.1%} | {nw} | {missing or '-'} |")
    good = sum(1 for r in rows if r[1] and r[2] >= 0.9)
    print(f"\n{good} of {len(rows)} architectures at 90% or more; "
          f"{sum(r[4] for r in rows)} windows, {sum(r[5] for r in rows) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
