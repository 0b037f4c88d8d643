"""What is trained: a decoder-only transformer spec, presets, and the suite's own workloads.

``ModelSpec`` holds the shape of a decoder-only transformer; ``n_params()``
counts its weights (embedding, per-layer attention and MLP, norms). Presets
are plain functions, each citing where its numbers come from. ``parse_spec``
reads a preset name or ``key=value,...`` pairs (the ``--model`` option of
``hweval predict`` and the ``model`` column of ``data/reference/training_runs.csv``).

Parameter count (weights only; biases are left out as in the sources' own
counts, except where a preset says otherwise)::

    attention  = d*q (q; q = n_heads*head_dim = d unless head_dim is set) + 2*d*d_kv (k, v; d_kv =
                 n_kv_heads*head_dim) + q*d (out)
    mlp        = (3 if glu else 2) * d * ffn_dim      (SwiGLU has gate, up, down)
    norms      = 2 * d per layer (+ biases when norm == "layernorm": 4 * d) and d (final)
    embedding  = vocab * d (+ vocab * d unembedding when not tied) (+ seq_len * d learned positions)

The suite's own CPU workloads (``workloads/``) are described by
:func:`from_workload`: ``transformer_lm`` becomes a ``ModelSpec``;
``timeseries_forecaster`` (a GRU) and ``mlp_regressor`` become a
``GenericSpec``: a list of GEMMs and element-wise ops per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from hwmodels.errors import ModelInputError, choices_error

NORMS = ("layernorm", "rmsnorm")


def _pos(name: str, value: Any, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelInputError(f"{name}: expected a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ModelInputError(f"{name}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer; see the module docstring for the parameter count."""

    d_model: int
    n_layers: int
    n_heads: int
    vocab: int
    n_kv_heads: int | None = None  # None = n_heads (multi-head attention); fewer = GQA/MQA
    head_dim: int | None = None  # None = d_model / n_heads; MaxText's scaled models set it apart
    ffn_dim: int | None = None  # None = ffn_mult * d_model
    ffn_mult: float = 4.0
    glu: bool = False  # gated MLP (SwiGLU): three matrices instead of two
    seq_len: int = 2048
    tied_embeddings: bool = False
    learned_positions: bool = False  # a seq_len x d_model position table (GPT-2/MPT style)
    norm: str = "rmsnorm"
    #: dropout layers present in training: their 1-byte masks are stored activations (Korthikanti et al. 2022).
    #: True unless a source says the model trains without (Llama: attention and hidden dropout 0).
    dropout: bool = True
    name: str = "custom"
    source: str = "given on the command line"

    def __post_init__(self) -> None:
        for f in ("d_model", "n_layers", "n_heads", "vocab", "seq_len"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ModelInputError(f"model.{f}: expected an integer, got {v!r}")
            _pos(f"model.{f}", v)
        _pos("model.ffn_mult", self.ffn_mult)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        _pos("model.n_kv_heads", self.n_kv_heads)
        if self.n_heads % self.n_kv_heads:
            raise ModelInputError(f"model.n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ModelInputError(f"model.n_heads ({self.n_heads}) must divide d_model ({self.d_model}) "
                                      "(or give head_dim)")
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        _pos("model.head_dim", self.head_dim)
        if self.ffn_dim is None:
            object.__setattr__(self, "ffn_dim", int(round(self.ffn_mult * self.d_model)))
        _pos("model.ffn_dim", self.ffn_dim)
        if self.norm not in NORMS:
            raise choices_error("model.norm", self.norm, NORMS)

    # -- derived shapes -------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of Q (and of the attention output): n_heads x head_dim (= d_model unless head_dim is set)."""
        return self.n_heads * self.head_dim

    @property
    def d_kv(self) -> int:
        """Width of K (and of V): n_kv_heads x head_dim."""
        return self.n_kv_heads * self.head_dim

    def layer_params(self) -> int:
        c = self.__dict__.get("_layer_params")
        if c is not None:
            return c
        c = self._layer_params_uncached()
        self.__dict__["_layer_params"] = c  # frozen dataclass: cache outside the fields (the search calls this often)
        return c

    def _layer_params_uncached(self) -> int:
        d = self.d_model
        attn = 2 * d * self.q_dim + 2 * d * self.d_kv
        mlp = (3 if self.glu else 2) * d * self.ffn_dim
        norms = (4 if self.norm == "layernorm" else 2) * d
        return attn + mlp + norms

    def embedding_params(self) -> int:
        e = self.vocab * self.d_model * (1 if self.tied_embeddings else 2)
        if self.learned_positions:
            e += self.seq_len * self.d_model
        return e

    def n_params(self) -> int:
        """All weights: layers + embeddings (+ unembedding unless tied) + final norm."""
        c = self.__dict__.get("_n_params")
        if c is None:
            c = self.__dict__["_n_params"] = self._n_params_uncached()
        return c

    def _n_params_uncached(self) -> int:
        final = (2 if self.norm == "layernorm" else 1) * self.d_model
        return self.n_layers * self.layer_params() + self.embedding_params() + final

    def matmul_params(self) -> int:
        """Weights a token is multiplied by (the N of 6N): layer GEMMs + the unembedding."""
        c = self.__dict__.get("_matmul_params")
        if c is None:
            c = self.__dict__["_matmul_params"] = self._matmul_params_uncached()
        return c

    def _matmul_params_uncached(self) -> int:
        d = self.d_model
        per_layer = 2 * d * self.q_dim + 2 * d * self.d_kv + (3 if self.glu else 2) * d * self.ffn_dim
        return self.n_layers * per_layer + self.vocab * d

    def model_flops_per_token(self, seq_len: int | None = None) -> float:
        """PaLM appendix B: 6 N_matmul + 12 L T d (attention QK^T and AV, fwd+bwd, causal half not removed).

        With ``head_dim`` set apart from d_model / n_heads the attention width is n_heads x head_dim.
        """
        t = seq_len or self.seq_len
        return 6.0 * self.matmul_params() + 12.0 * self.n_layers * t * self.q_dim

    # -- host ops (eager frameworks on a serial-dispatch node) ------------------------------------------
    def host_ops_per_layer(self) -> int:
        """Autograd nodes one layer records in the forward pass (each dispatched forward and run backward),
        counted from the suite's torch block (``workloads/torch/models.py`` ``Block.forward``; the test walks
        the real graph): 2 norms; 4 per linear on a batched 3-D input (transpose of the weight, view, matmul,
        unsafe view) for fused QKV, output projection and the MLP's two (SwiGLU: three, + the multiply); the
        split, 3 head views, 4 transposes, the reshape, the attention call, 2 residual adds, the activation.
        Separate K/V projections (GQA) add 2 linears. 31 for the suite's LM."""
        linears = (2 if self.n_kv_heads == self.n_heads else 4) + (3 if self.glu else 2)
        return 2 + 4 * linears + 1 + 3 + 4 + 1 + 1 + 2 + 1 + (1 if self.glu else 0)

    def host_ops_outside_layers(self) -> int:
        """Autograd nodes outside the layers (``TransformerLM.forward`` and ``loss``): the token embedding, the
        position slice and add (learned positions), the final norm, the unembedding (4, a linear), the loss's
        view, log-softmax and NLL."""
        return 1 + (2 if self.learned_positions else 0) + 1 + 4 + 3

    def param_tensors(self) -> int:
        """Parameter tensors (the optimizer phase's per-tensor host cost): per layer the norms' weights (and
        biases for LayerNorm) and one tensor per weight matrix (fused QKV when K/V heads equal Q heads);
        embeddings, position table, final norm."""
        norm = 2 if self.norm == "layernorm" else 1
        outside = 1 + (0 if self.tied_embeddings else 1) + (1 if self.learned_positions else 0) + norm
        return self.n_layers * self.param_tensors_per_layer() + outside

    def param_tensors_per_layer(self) -> int:
        """One layer's parameter tensors: its two norms' weights (and biases for LayerNorm) and its weight
        matrices (fused QKV when K/V heads equal Q heads)."""
        norm = 2 if self.norm == "layernorm" else 1
        return 2 * norm + (2 if self.n_kv_heads == self.n_heads else 4) + (3 if self.glu else 2)

    def with_seq_len(self, seq_len: int | None) -> ModelSpec:
        return self if not seq_len or seq_len == self.seq_len else replace(self, seq_len=int(seq_len))

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["n_params"] = self.n_params()
        return out


@dataclass(frozen=True, kw_only=True)
class GenericOp:
    """One op of a :class:`GenericSpec`, per sample: a GEMM (m per sample, n, k) or an element-wise op."""

    name: str
    kind: str  # "gemm" | "memory"
    m: int = 0  # rows per sample (e.g. time steps)
    n: int = 0
    k: int = 0
    elements: int = 0  # per sample, for memory ops
    passes: float = 3.0  # reads + writes per element (memory ops)
    sequential: int = 1  # how many dependent launches (a GRU step loop: context)
    host_ops: int = 1  # autograd nodes recorded per sequential step (a GRU cell step: 12 gate ops)


@dataclass(frozen=True, kw_only=True)
class GenericSpec:
    """A non-transformer workload as a list of per-sample ops (the GRU and the MLP of ``workloads/``)."""

    name: str
    ops: tuple[GenericOp, ...]
    params: int
    tokens_per_sample: int = 1
    source: str = ""
    host_ops_other: int = 0  # forward ops outside ``ops`` (the loss, slicing)
    param_tensors: int = 0

    def n_params(self) -> int:
        return self.params

    def host_ops(self, serial: bool = True) -> int:
        """Differentiable eager ops of one forward pass (each with its backward node). ``serial=False`` (a GPU):
        a recurrent loop (ops with ``sequential`` > 1) runs inside one library call (cuDNN's RNN, launched from
        C++), so its steps dispatch no ops of their own (:meth:`sequential_launches` counts their kernels)."""
        return sum(o.host_ops * o.sequential for o in self.ops if serial or o.sequential == 1) + self.host_ops_other

    def sequential_launches(self) -> int:
        """Kernels a recurrent loop launches per step on a GPU (cuDNN's RNN): for each recurrent op, a forward
        and a backward kernel per time step (the recurrent GEMM and its data gradient; the cell and its gradient);
        the recurrent weight gradient is one GEMM over all steps."""
        return sum(2 * o.sequential for o in self.ops if o.sequential > 1)

    def model_flops_per_sample(self) -> float:
        return 6.0 * sum(o.m * o.n * o.k for o in self.ops if o.kind == "gemm")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "n_params": self.params, "ops": [o.__dict__ for o in self.ops],
                "source": self.source}


# ----------------------------------------------------------------------------- presets
_GPT3 = ("Brown et al. 2020, 'Language Models are Few-Shot Learners', arXiv:2005.14165, Table 2.1 "
         "(n_layers, d_model, n_heads; n_ctx 2048); vocab 50257 (GPT-2 BPE, Radford et al. 2019)")
_MEGATRON = ("Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters', "
             "arXiv:2104.04473, Table 1 (hidden size, layers, heads; seq 2048, vocab 51200)")
_LLAMA2 = ("Touvron et al. 2023, 'Llama 2', arXiv:2307.09288, Table 1 and the released params.json "
           "(dim, n_layers, n_heads, n_kv_heads; SwiGLU hidden 11008/13824/28672; vocab 32000; context 4096)")
_LLAMA3 = ("Llama Team 2024, 'The Llama 3 Herd of Models', arXiv:2407.21783, Table 3 (layers, model dim, "
           "FFN dim, heads, KV heads 8, vocab 128,000 -> 128256 in the released tokenizer; seq 8192)")

_LLAMA_NO_DROPOUT = ("no dropout: the released model code (meta-llama/llama model.py) has no dropout layer; "
                     "Megatron-Bridge's Llama bridge (src/megatron/bridge/models/llama/llama_bridge.py @067f987) "
                     "sets hidden_dropout=0.0 and the Hugging Face Llama config's attention_dropout is 0.0")


def _gpt3(d: int, L: int, h: int, name: str) -> Callable[[], ModelSpec]:
    def f() -> ModelSpec:
        return ModelSpec(name=name, d_model=d, n_layers=L, n_heads=h, vocab=50257, seq_len=2048,
                         ffn_mult=4, glu=False, tied_embeddings=True, learned_positions=True,
                         norm="layernorm", source=_GPT3)
    return f


def _megatron(d: int, L: int, h: int, name: str) -> Callable[[], ModelSpec]:
    def f() -> ModelSpec:
        return ModelSpec(name=name, d_model=d, n_layers=L, n_heads=h, vocab=51200, seq_len=2048,
                         ffn_mult=4, glu=False, tied_embeddings=False, learned_positions=True,
                         norm="layernorm", source=_MEGATRON)
    return f


def _llama(d: int, L: int, h: int, kv: int, ffn: int, vocab: int, seq: int, name: str,
           src: str) -> Callable[[], ModelSpec]:
    def f() -> ModelSpec:
        return ModelSpec(name=name, d_model=d, n_layers=L, n_heads=h, n_kv_heads=kv, ffn_dim=ffn, glu=True,
                         vocab=vocab, seq_len=seq, tied_embeddings=False, norm="rmsnorm", dropout=False,
                         source=src + "; " + _LLAMA_NO_DROPOUT)
    return f


PRESETS: dict[str, Callable[[], ModelSpec]] = {
    "gpt3-125m": _gpt3(768, 12, 12, "gpt3-125m"),
    "gpt3-350m": _gpt3(1024, 24, 16, "gpt3-350m"),
    "gpt3-1.3b": _gpt3(2048, 24, 16, "gpt3-1.3b"),  # Table 2.1 lists 24 heads of 128; 16 x 128 = 2048 used
    "gpt3-2.7b": _gpt3(2560, 32, 32, "gpt3-2.7b"),
    "gpt3-6.7b": _gpt3(4096, 32, 32, "gpt3-6.7b"),
    "gpt3-13b": _gpt3(5120, 40, 40, "gpt3-13b"),  # Table 2.1 says d_model 5140; 5120 = 40 x 128 as trained
    "gpt3-175b": _gpt3(12288, 96, 96, "gpt3-175b"),
    "megatron-1.7b": _megatron(2304, 24, 24, "megatron-1.7b"),
    "megatron-3.6b": _megatron(3072, 30, 32, "megatron-3.6b"),
    "megatron-7.5b": _megatron(4096, 36, 32, "megatron-7.5b"),
    "megatron-18b": _megatron(6144, 40, 48, "megatron-18b"),
    "megatron-39b": _megatron(8192, 48, 64, "megatron-39b"),
    "megatron-76b": _megatron(10240, 60, 80, "megatron-76b"),
    "megatron-145b": _megatron(12288, 80, 96, "megatron-145b"),
    "megatron-310b": _megatron(16384, 96, 128, "megatron-310b"),
    "megatron-530b": _megatron(20480, 105, 128, "megatron-530b"),
    "megatron-1t": _megatron(25600, 128, 160, "megatron-1t"),
    "llama2-7b": _llama(4096, 32, 32, 32, 11008, 32000, 4096, "llama2-7b", _LLAMA2),
    "llama2-13b": _llama(5120, 40, 40, 40, 13824, 32000, 4096, "llama2-13b", _LLAMA2),
    "llama2-70b": _llama(8192, 80, 64, 8, 28672, 32000, 4096, "llama2-70b", _LLAMA2),
    "llama3-8b": _llama(4096, 32, 32, 8, 14336, 128256, 8192, "llama3-8b", _LLAMA3),
    "llama3-70b": _llama(8192, 80, 64, 8, 28672, 128256, 8192, "llama3-70b", _LLAMA3),
    "llama3-405b": _llama(16384, 126, 128, 8, 53248, 128256, 8192, "llama3-405b", _LLAMA3),
}

_SPEC_KEYS = {f.name: f.type for f in fields(ModelSpec)} | {"preset": "str"}
_INT_KEYS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "vocab", "seq_len")
_BOOL_KEYS = ("glu", "tied_embeddings", "learned_positions", "dropout")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def preset(name: str) -> ModelSpec:
    if name not in PRESETS:
        raise choices_error("model", name, PRESETS)
    return PRESETS[name]()


def parse_spec(text: str, *, field: str = "model") -> ModelSpec:
    """A preset name, or ``key=value,...`` (optionally starting from ``preset=NAME``)."""
    if not isinstance(text, str) or not text.strip():
        raise ModelInputError(f"{field}: empty; give a preset ({', '.join(sorted(PRESETS))}) or key=value pairs")
    s = text.strip()
    if "=" not in s:
        if s not in PRESETS:
            raise choices_error(field, s, PRESETS)
        return PRESETS[s]()
    vals: dict[str, Any] = {}
    base: dict[str, Any] = {}
    valid = ", ".join(sorted(k for k in _SPEC_KEYS if k not in ("name", "source")))
    for part in s.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise ModelInputError(f"{field}: {part.strip()!r} is not key=value; valid keys: {valid}")
        k, v = (x.strip() for x in part.split("=", 1))
        if k not in _SPEC_KEYS or k in ("name", "source"):
            raise ModelInputError(f"{field}: unknown key {k!r}; valid keys: {valid}")
        if k == "preset":
            base = {f.name: getattr(preset(v), f.name) for f in fields(ModelSpec)}
            continue
        try:
            if k in _INT_KEYS:
                vals[k] = int(v)
            elif k == "ffn_mult":
                vals[k] = float(v)
            elif k in _BOOL_KEYS:
                if v.lower() not in _TRUE + _FALSE:
                    raise ValueError
                vals[k] = v.lower() in _TRUE
            else:
                vals[k] = v
        except ValueError:
            raise ModelInputError(f"{field}.{k}: cannot read {v!r} as "
                                  f"{'an integer' if k in _INT_KEYS else 'true/false' if k in _BOOL_KEYS else 'a number'}"
                                  ) from None
    if "ffn_mult" in vals and "ffn_dim" not in vals:
        base.pop("ffn_dim", None)
    merged = {**base, **vals}
    for req in ("d_model", "n_layers", "n_heads", "vocab"):
        if req not in merged:
            raise ModelInputError(f"{field}: missing key {req!r} (required: d_model, n_layers, n_heads, vocab)")
    if not base:
        merged.setdefault("name", "custom")
        merged.setdefault("source", f"spec {s!r}")
    try:
        return ModelSpec(**merged)
    except ModelInputError as exc:
        raise ModelInputError(str(exc).replace("model.", f"{field}.", 1)) from None


# --------------------------------------------------------------------- suite workloads
WORKLOADS = ("transformer_lm", "timeseries_forecaster", "mlp_regressor")
# defaults of workloads/registry.py (kept in step by tests/test_predict_workloads)
_TS_INPUT = 1
_MLP_FEATURES, _MLP_OUTPUTS = 8, 1


def from_workload(name: str, config: Mapping[str, Any]) -> ModelSpec | GenericSpec:
    """Describe one of the suite's workloads from its config dict (``TrainKnobs.to_dict()``).

    transformer_lm (workloads/flops.py ``transformer``): LayerNorm with bias,
    learned positions, tied embedding, GELU MLP of ratio ``mlp_ratio``.
    timeseries_forecaster: stacked GRU over ``context`` steps (3 gates x
    (W_ih x + W_hh h) per step: torch.nn.GRU equations) + linear head.
    mlp_regressor: ``depth`` Linear+ReLU layers + linear output.
    """
    c = dict(config)
    if name == "transformer_lm":
        return ModelSpec(name="transformer_lm", d_model=int(c.get("width", 64)), n_layers=int(c.get("layers", 2)),
                         n_heads=int(c.get("heads", 4)), vocab=int(c.get("vocab", 256)),
                         seq_len=int(c.get("seq_len", 64)), ffn_mult=float(c.get("mlp_ratio", 4)), glu=False,
                         tied_embeddings=True, learned_positions=True, norm="layernorm",
                         source="workloads/registry.py TransformerLMConfig")
    if name == "timeseries_forecaster":
        h, L = int(c.get("hidden", 32)), int(c.get("layers", 1))
        T, H = int(c.get("context", 64)), int(c.get("horizon", 8))
        ops, params = [], 0
        for i in range(L):
            fan_in = _TS_INPUT if i == 0 else h
            # input projection batched over time; recurrent GEMM one step at a time (dependent launches)
            # host ops, counted from a torch.profiler trace of torch 2.13's CPU GRU (autograd nodes per step):
            # the recurrent linear (addmm + t) and 12 gate ops (2 chunk splits, 4 adds, 2 sigmoids, 2 muls,
            # sub, tanh); the input projection is one matmul over all steps
            ops.append(GenericOp(name=f"gru{i}.ih", kind="gemm", m=T, n=3 * h, k=fan_in, host_ops=4))
            ops.append(GenericOp(name=f"gru{i}.hh", kind="gemm", m=T, n=3 * h, k=h, sequential=T, host_ops=2))
            ops.append(GenericOp(name=f"gru{i}.gates", kind="memory", elements=T * 4 * h, passes=4.0,
                                 sequential=T, host_ops=12))
            params += 3 * (fan_in * h + h * h + 2 * h)
        ops.append(GenericOp(name="head", kind="gemm", m=1, n=H, k=h, host_ops=2))
        params += h * H + H
        # outside: the GRU call's output stacking, the last-step select, mse_loss
        return GenericSpec(name=name, ops=tuple(ops), params=params, tokens_per_sample=1,
                           source="workloads/registry.py TimeseriesConfig; torch.nn.GRU equations",
                           host_ops_other=5, param_tensors=4 * L + 2)
    if name == "mlp_regressor":
        h, depth = int(c.get("hidden", 64)), int(c.get("depth", 2))
        dims = [int(c.get("features", _MLP_FEATURES))] + [h] * depth + [int(c.get("outputs", _MLP_OUTPUTS))]
        ops = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            ops.append(GenericOp(name=f"fc{i}", kind="gemm", m=1, n=b, k=a, host_ops=2))  # addmm + t
            if i < len(dims) - 2:
                ops.append(GenericOp(name=f"relu{i}", kind="memory", elements=b, passes=2.0))
        params = sum(a * b + b for a, b in zip(dims[:-1], dims[1:], strict=True))
        return GenericSpec(name=name, ops=tuple(ops), params=params, tokens_per_sample=1,
                           source="workloads/registry.py MLPConfig", host_ops_other=1,
                           param_tensors=2 * (len(dims) - 1))
    raise choices_error("workload", name, WORKLOADS)


def spec_summary(spec: ModelSpec | GenericSpec) -> str:
    n = spec.n_params()
    scale = f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n}"
    return f"{spec.name} ({scale} params)"


__all__ = ["ModelSpec", "GenericSpec", "GenericOp", "PRESETS", "preset", "parse_spec", "from_workload",
           "spec_summary", "WORKLOADS"]
