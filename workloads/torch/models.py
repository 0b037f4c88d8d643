"""torch models of the workloads; parameter counts match :mod:`workloads.flops` exactly."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    """Pre-LN decoder block: causal self-attention + GELU MLP, bias-free linears."""

    def __init__(self, width: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, mlp_ratio * width, bias=False)
        self.fc2 = nn.Linear(mlp_ratio * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TransformerLM(nn.Module):
    """Decoder-only LM with learned positions and a tied unembedding (nanoGPT's layout)."""

    def __init__(self, *, layers: int, width: int, heads: int, seq_len: int, vocab: int, mlp_ratio: int,
                 checkpointing: bool = False) -> None:
        super().__init__()
        self.checkpointing = checkpointing
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq_len, width))
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.checkpointing and self.training else blk(x)
        return self.ln_f(x) @ self.tok.weight.t()

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self(x)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


class GRUForecaster(nn.Module):
    """Stacked GRU over the context window; a linear head maps the last state to the horizon."""

    def __init__(self, *, hidden: int, layers: int, horizon: int, checkpointing: bool = False) -> None:
        super().__init__()
        self.checkpointing = checkpointing
        self.gru = nn.GRU(1, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, horizon)

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.gru(x)[0][:, -1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(self._encode, x, use_reentrant=False) if self.checkpointing and self.training \
            else self._encode(x)
        return self.head(h)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self(x).float(), y.float())


class MLPRegressor(nn.Module):
    def __init__(self, *, features: int, hidden: int, depth: int, checkpointing: bool = False) -> None:
        super().__init__()
        self.checkpointing = checkpointing
        dims = [features] + [hidden] * depth
        layers: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(self.body, x, use_reentrant=False) if self.checkpointing and self.training else self.body(x)
        return self.out(h)

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self(x).float(), y.float())
