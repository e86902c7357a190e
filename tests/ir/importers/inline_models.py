"""Small models written inline, one per family issue 32 measures (torchvision and
transformers are not dependencies of the tests): a ResNet block, MobileNetV3 and
EfficientNet blocks, a ViT, rotary attention with RMS norm, a detection head, LSTM / GRU /
bidirectional LSTM taggers, a transformer encoder layer, an MLP block, a transformer decoder
and a token embedding under a linear layer; and two with an op GraphIR lacks (an MoE layer's
scatter, Swin's roll)."""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


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
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class InPlaceResBlock(nn.Module):
    """torchvision's BasicBlock form: ReLU(inplace=True) and the residual `out += identity`
    (ATen `relu_`, `add_`)."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class OtherEpsNorms(nn.Module):
    """Norms with another epsilon than GraphIR's: batch norm 1e-3 (GoogLeNet, MobileNet v3),
    layer norm 1e-6 over one and two dims, with and without affine (ConvNeXt, ViT)."""

    def __init__(self, c: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3)
        self.bn = nn.BatchNorm2d(c, eps=1e-3)
        self.ln = nn.LayerNorm(6, eps=1e-6)
        self.ln2 = nn.LayerNorm([6, 6], eps=1e-6, elementwise_affine=False)
        with torch.no_grad():  # running statistics away from 0 and 1
            self.bn.running_mean.uniform_(-1.0, 1.0)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        return self.ln2(self.ln(y))


class MaskedAttention(nn.Module):
    """A fused qkv split by unbind (ViT), causal attention and attention under a boolean mask
    (decoders, BERT), group norm (detection heads)."""

    def __init__(self, d: int = 8):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.norm = nn.GroupNorm(2, 4)
        self.register_buffer("mask", torch.rand(5, 5) > 0.3)
        self.mask[:, 0] = True  # no row wholly masked (torch gives NaN there)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, 2, d // 2).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        m = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
        return self.norm((a + m).transpose(1, 2).reshape(b, n, 2, d // 2).transpose(1, 2)
                         .reshape(b, 2, n, d // 2).repeat(1, 2, 1, 1))


class StackedRnns(nn.Module):
    """A two-layer LSTM, then a three-layer bidirectional GRU (batch first): one instruction
    per layer, the final states of all layers concatenated."""

    def __init__(self, d: int = 6, h: int = 5):
        super().__init__()
        self.lstm = nn.LSTM(d, h, num_layers=2)
        self.gru = nn.GRU(h, h, num_layers=3, bidirectional=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, (h, c) = self.lstm(x)
        z, g = self.gru(y.transpose(0, 1))
        return z.sum() + h.sum() * c.mean() + g.mean()


class SqueezeExcite(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))


class MobileNetV3Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16)
        self.depthwise = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
        self.se = SqueezeExcite(16)
        self.project = nn.Conv2d(16, 24, 1)
        self.drop, self.fc = nn.Dropout(0.2), nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.hardswish(self.bn(self.stem(x)))
        x = self.project(self.se(F.relu6(self.depthwise(x))))
        return self.fc(self.drop(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)))


class MBConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.expand, self.bn = nn.Conv2d(8, 32, 1, bias=False), nn.BatchNorm2d(32)
        self.depthwise = nn.Conv2d(32, 32, 5, padding=2, groups=32)
        self.se, self.project = SqueezeExcite(32), nn.Conv2d(32, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.depthwise(F.silu(self.bn(self.expand(x)))))
        return x + self.project(self.se(y))


class ViT(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d))
        self.encoder = nn.TransformerEncoderLayer(d, 4, 64, activation="gelu", batch_first=True,
                                                  norm_first=True)
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


class RotaryAttention(nn.Module):
    """Rotary positions (tables computed from arange: folded to constants), RMS norm."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.norm = nn.RMSNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t, d = x.shape[1], x.shape[2]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(t).float(), inv)
        cos, sin = freqs.cos(), freqs.sin()

        def rotate(y: torch.Tensor) -> torch.Tensor:
            y1, y2 = y[..., ::2], y[..., 1::2]
            return torch.cat([y1 * cos - y2 * sin, y1 * sin + y2 * cos], -1)

        x = self.norm(x)
        q, k = rotate(self.q(x)), rotate(self.k(x))
        return torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, -1) @ self.v(x)


class DetectionHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.cls, self.box = nn.Conv2d(16, 3 * 5, 1), nn.Conv2d(16, 3 * 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv(x))
        n = x.shape[0]
        c = self.cls(x).permute(0, 2, 3, 1).reshape(n, -1, 5)
        b = self.box(x).permute(0, 2, 3, 1).reshape(n, -1, 4)
        return torch.cat([torch.sigmoid(c), b], -1)


class LstmNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.lstm(x)[0][-1])


class GruNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.gru(x)[0][:, -1])


class BiLstmTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
        self.out = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.out(self.lstm(x)[0]), -1)


class MlpBlock(nn.Module):
    """A transformer's feed-forward half: linear, GELU, linear, residual, layer norm."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.norm(x + self.fc2(F.gelu(self.fc1(x)))), dim=-1)


class Decoder(nn.Module):
    """Token embedding (GraphIR's embedding: data-dependent indices), a decoder layer with a
    causal mask (an additive float mask: folded, added to the scores)."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Embedding(50, d)
        self.layer = nn.TransformerDecoderLayer(d, 4, 64, batch_first=True)
        self.out = nn.Linear(d, 50)

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        return self.out(self.layer(self.embed(tokens), memory, tgt_mask=mask))


class EmbeddingLinear(nn.Module):
    """A token embedding (data-dependent indices: GraphIR's embedding) then a linear layer."""

    def __init__(self, vocab: int = 20, d: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.out = nn.Linear(d, 5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens))


class MoE(nn.Module):
    """Top-2 gating over 4 experts (the gates scattered: unmapped)."""

    def __init__(self, d: int = 16, experts: int = 4):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))
                                     for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.softmax(self.gate(x), -1)
        top, idx = torch.topk(w, 2, -1)
        out = torch.stack([e(x) for e in self.experts], -2)
        mask = torch.zeros_like(w).scatter(-1, idx, top)
        return (out * mask.unsqueeze(-1)).sum(-2)


class SwinBlock(nn.Module):
    """Shifted windows (torch.roll: unmapped), window attention."""

    def __init__(self, d: int = 16):
        super().__init__()
        self.norm, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        y = torch.roll(self.norm(x), (-2, -2), (1, 2))
        y = y.view(b, h // 4, 4, w // 4, 4, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, c)
        q, k, v = self.qkv(y).chunk(3, -1)
        a = self.proj(F.scaled_dot_product_attention(q, k, v))
        return x + a.view(b, h // 4, w // 4, 4, 4, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)


Factory = Callable[[], tuple[nn.Module, tuple]]

#: fully mapped: name -> (model, example inputs)
MAPPED: dict[str, Factory] = {
    "resnet_block": lambda: (ResBlock(), (torch.randn(2, 3, 16, 16),)),
    "inplace_resnet_block": lambda: (InPlaceResBlock(), (torch.randn(2, 8, 8, 8),)),
    "other_eps_norms": lambda: (OtherEpsNorms(), (torch.randn(2, 3, 8, 8),)),
    "masked_attention": lambda: (MaskedAttention(), (torch.randn(2, 5, 8),)),
    "stacked_rnns": lambda: (StackedRnns(), (torch.randn(4, 3, 6),)),
    "mobilenet_v3_block": lambda: (MobileNetV3Block(), (torch.randn(2, 3, 32, 32),)),
    "efficientnet_mbconv": lambda: (MBConv(), (torch.randn(2, 8, 16, 16),)),
    "vit_tiny": lambda: (ViT(), (torch.randn(2, 3, 16, 16),)),
    "rotary_attention": lambda: (RotaryAttention(), (torch.randn(2, 6, 16),)),
    "detection_head": lambda: (DetectionHead(), (torch.randn(2, 16, 8, 8),)),
    "lstm": lambda: (LstmNet(), (torch.randn(5, 2, 8),)),
    "gru": lambda: (GruNet(), (torch.randn(2, 5, 8),)),
    "bilstm_tagger": lambda: (BiLstmTagger(), (torch.randn(2, 7, 8),)),
    "mlp_block": lambda: (MlpBlock(), (torch.randn(2, 5, 16),)),
    "transformer_encoder": lambda: (nn.TransformerEncoderLayer(16, 4, 32, batch_first=True),
                                    (torch.randn(2, 5, 16),)),
    "transformer_decoder": lambda: (Decoder(), (torch.randint(0, 50, (2, 6)), torch.randn(2, 5, 32))),
    "embedding_linear": lambda: (EmbeddingLinear(), (torch.randint(0, 20, (2, 6)),)),
}

#: with an op GraphIR lacks: name -> (model, example inputs), the unmapped ops
PARTLY: dict[str, tuple[Factory, dict[str, int]]] = {
    "moe_layer": (lambda: (MoE(), (torch.randn(2, 5, 16),)), {"aten.scatter": 1}),
    "swin_block": (lambda: (SwinBlock(), (torch.randn(2, 8, 8, 16),)), {"aten.roll": 1}),
}
