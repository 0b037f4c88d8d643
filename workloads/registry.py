"""The workload registry: what each workload trains, on which data, to which target.

``get(name)`` returns a :class:`Workload` (unknown names raise ``InputError``
listing the valid ones); ``config_from_params(name, raw)`` builds its
validated config from ``--set`` strings or typed values, starting from the
preset named by ``raw["preset"]`` (default ``small``). Presets are plain
functions returning a config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from hwcore.errors import InputError, choices_error
from hwcore.params import Int, Type
from workloads import flops
from workloads.config import TrainKnobs, parse_params


# ---------------------------------------------------------------------------------
# configs
# ---------------------------------------------------------------------------------
@dataclass(kw_only=True)
class TransformerLMConfig(TrainKnobs):
    workload: ClassVar[str] = "transformer_lm"
    frameworks: ClassVar[tuple[str, ...]] = ("torch", "jax")

    layers: int = 2
    width: int = 64
    heads: int = 4
    seq_len: int = 64
    vocab: int = 256  # byte-level; < 256 keeps the most frequent bytes + UNK
    mlp_ratio: int = 4
    corpus_bytes: int = 2_000_000

    RANGES: ClassVar[dict[str, Type]] = {
        **{n: Int(min=1) for n in ("layers", "width", "heads", "seq_len", "mlp_ratio", "corpus_bytes")},
        "vocab": Int(min=2, max=256),  # byte-level corpus
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.width % self.heads:
            raise self._err(f"heads ({self.heads}) must divide width ({self.width})")
        if self.corpus_bytes < 20 * self.seq_len:
            raise self._err(f"corpus_bytes ({self.corpus_bytes}) must be >= 20 * seq_len ({20 * self.seq_len})")


@dataclass(kw_only=True)
class TimeseriesConfig(TrainKnobs):
    workload: ClassVar[str] = "timeseries_forecaster"

    hidden: int = 32
    layers: int = 1
    context: int = 64  # weeks of history per window
    horizon: int = 8  # weeks forecast
    lr: float = 3e-3

    RANGES: ClassVar[dict[str, Type]] = {n: Int(min=1) for n in ("hidden", "layers", "context", "horizon")}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context + self.horizon > 400:
            raise self._err(f"context + horizon ({self.context + self.horizon}) must be <= 400 "
                            "(the held-out window is 456 weeks)")


@dataclass(kw_only=True)
class MLPConfig(TrainKnobs):
    workload: ClassVar[str] = "mlp_regressor"

    hidden: int = 64
    depth: int = 2
    batch_size: int = 64

    RANGES: ClassVar[dict[str, Type]] = {n: Int(min=1) for n in ("hidden", "depth")}


# ---------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Workload:
    name: str
    description: str
    data: str
    model: str
    target: str  # what the target metric is, and where its default comes from
    config_cls: type
    presets: dict[str, Callable[[], TrainKnobs]]
    split: Callable[[Any], Any]  # cfg -> workloads.data.Split
    flops: Callable[[Any], flops.FlopCount]  # cfg -> analytic count
    default_target: Callable[[Any, Any], float]  # (cfg, split) -> eval-loss target
    torch_module: Callable[[Any, Any], Any]  # (cfg, split) -> torch.nn.Module with .loss(*batch)
    samples_unit: str = "samples"
    tokens_per_sample: Callable[[Any], int | None] = field(default=lambda cfg: None)

    def params(self) -> list[str]:
        return sorted(f.name for f in fields(self.config_cls))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "data": self.data, "model": self.model,
                "target": self.target, "presets": sorted(self.presets),
                "frameworks": list(self.config_cls.frameworks)}


# -- transformer_lm ---------------------------------------------------------------------
def lm_tiny() -> TransformerLMConfig:
    return TransformerLMConfig(layers=2, width=32, heads=2, seq_len=32, batch_size=8, corpus_bytes=300_000,
                               max_steps=60, eval_every=10, eval_batches=2, lr=3e-3, target_loss=3.0)


def lm_small() -> TransformerLMConfig:
    return TransformerLMConfig(layers=4, width=128, heads=4, seq_len=128, batch_size=16, max_steps=300,
                               eval_every=25, eval_batches=4, lr=2e-3, warmup_steps=20, target_loss=2.4)


def lm_medium() -> TransformerLMConfig:
    return TransformerLMConfig(layers=8, width=512, heads=8, seq_len=256, batch_size=32, max_steps=2000,
                               eval_every=100, eval_batches=8, lr=6e-4, warmup_steps=100, target_loss=1.3,
                               corpus_bytes=8_000_000)


def _lm_split(cfg):
    from workloads.data import lm_split

    return lm_split(cfg.corpus_bytes, cfg.vocab, cfg.seq_len)


def _lm_flops(cfg):
    return flops.transformer(layers=cfg.layers, width=cfg.width, heads=cfg.heads, seq_len=cfg.seq_len,
                             vocab=cfg.vocab, mlp_ratio=cfg.mlp_ratio, batch_size=cfg.batch_size,
                             checkpointing=cfg.activation_checkpointing)


def _lm_module(cfg, split):
    from workloads.torch.models import TransformerLM

    return TransformerLM(layers=cfg.layers, width=cfg.width, heads=cfg.heads, seq_len=cfg.seq_len,
                         vocab=cfg.vocab, mlp_ratio=cfg.mlp_ratio, checkpointing=cfg.activation_checkpointing)


# -- timeseries_forecaster ------------------------------------------------------------------
def ts_tiny() -> TimeseriesConfig:
    return TimeseriesConfig(hidden=16, context=32, horizon=8, batch_size=16, max_steps=60, eval_every=10,
                            eval_batches=4, lr=1e-2)


def ts_small() -> TimeseriesConfig:
    return TimeseriesConfig(hidden=64, layers=2, context=64, horizon=8, batch_size=32, max_steps=400,
                            eval_every=20, eval_batches=8, lr=3e-3)


def _ts_split(cfg):
    from workloads.data import co2_series

    return co2_series(cfg.context, cfg.horizon)


def _ts_flops(cfg):
    return flops.gru(input_size=1, hidden=cfg.hidden, layers=cfg.layers, context=cfg.context, horizon=cfg.horizon,
                     batch_size=cfg.batch_size, checkpointing=cfg.activation_checkpointing)


def _ts_module(cfg, split):
    from workloads.torch.models import GRUForecaster

    return GRUForecaster(hidden=cfg.hidden, layers=cfg.layers, horizon=cfg.horizon,
                         checkpointing=cfg.activation_checkpointing)


# -- mlp_regressor ------------------------------------------------------------------------
def mlp_tiny() -> MLPConfig:
    return MLPConfig(hidden=32, depth=2, batch_size=32, max_steps=150, eval_every=15, eval_batches=8, lr=3e-3)


def mlp_small() -> MLPConfig:
    return MLPConfig(hidden=128, depth=3, batch_size=64, max_steps=600, eval_every=30, eval_batches=20, lr=2e-3)


def _mlp_split(cfg):
    from workloads.data import fair_tabular

    return fair_tabular()


def _mlp_flops(cfg):
    return flops.mlp(features=8, hidden=cfg.hidden, depth=cfg.depth, outputs=1, batch_size=cfg.batch_size,
                     checkpointing=cfg.activation_checkpointing)


def _mlp_module(cfg, split):
    from workloads.torch.models import MLPRegressor

    return MLPRegressor(features=split.train[0].shape[1], hidden=cfg.hidden, depth=cfg.depth,
                        checkpointing=cfg.activation_checkpointing)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="transformer_lm",
            description="decoder-only transformer language model, byte level",
            data="the Python standard library's own *.py files as bytes; held-out files by crc32(name) % 10",
            model="pre-LN GPT (learned positions, tied unembedding, bias-free linears); torch or pure JAX+optax",
            target="held-out cross-entropy in nats/byte (preset target_loss)",
            config_cls=TransformerLMConfig,
            presets={"tiny": lm_tiny, "small": lm_small, "medium": lm_medium},
            split=_lm_split, flops=_lm_flops, default_target=lambda cfg, split: 2.4,  # nats/byte; a 4x128 model reaches it in ~300 steps
            torch_module=_lm_module, samples_unit="sequences",
            tokens_per_sample=lambda cfg: cfg.seq_len,
        ),
        Workload(
            name="timeseries_forecaster",
            description="GRU forecasting the Mauna Loa CO2 series `horizon` weeks ahead",
            data="statsmodels.datasets.co2 (weekly, 1958-2001); last 20% held out",
            model="stacked GRU + linear head over the context window (values relative to the last one)",
            target="held-out MSE (scaled units) <= 0.5 x the naive no-change forecast's MSE",
            config_cls=TimeseriesConfig,
            presets={"tiny": ts_tiny, "small": ts_small},
            split=_ts_split, flops=_ts_flops,
            default_target=lambda cfg, split: 0.5 * split.info["naive_mse"],
            torch_module=_ts_module, samples_unit="windows",
        ),
        Workload(
            name="mlp_regressor",
            description="small tabular MLP regression (latency-bound: tiny matmuls per step)",
            data="statsmodels.datasets.fair (6366 rows), target yrs_married; every 5th row held out",
            model="ReLU MLP",
            target="held-out MSE (standardized target) <= ordinary least squares' held-out MSE",
            config_cls=MLPConfig,
            presets={"tiny": mlp_tiny, "small": mlp_small},
            split=_mlp_split, flops=_mlp_flops,
            default_target=lambda cfg, split: split.info["ols_mse"],
            torch_module=_mlp_module, samples_unit="rows",
        ),
    )
}

DEFAULT_PRESET = "small"


def list_workloads() -> list[str]:
    return sorted(WORKLOADS)


def get(name: str) -> Workload:
    if name not in WORKLOADS:
        raise InputError(f"no workload named {name!r}; valid choices: {', '.join(list_workloads())}")
    return WORKLOADS[name]


def preset(name: str, preset_name: str) -> TrainKnobs:
    w = get(name)
    if preset_name not in w.presets:
        raise choices_error(f"{name}.preset", preset_name, w.presets)
    return w.presets[preset_name]()


def config_from_params(name: str, raw: dict[str, Any] | None = None) -> TrainKnobs:
    """The validated config of workload ``name``: its preset (``raw['preset']``, default ``small``) + ``raw``."""
    w = get(name)
    raw = dict(raw or {})
    pname = str(raw.pop("preset", DEFAULT_PRESET))
    base = preset(name, pname).to_dict()
    return parse_params(w.config_cls, raw, base=base)
