"""The timing harness on synthetic clocks: statistics, budgets, rotation, flushing."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hwcore import timing
from hwcore.errors import InputError
from hwcore.timing import Measurement, NoisyMeasurementWarning, benchmark, from_times


class FakeClock:
    """A clock that advances only when the timed function says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def test_statistics_match_numpy():
    times = [1.0, 2.0, 3.0, 4.0, 100.0]
    m = from_times(times, label="x")
    assert m.median_s == 3.0
    assert m.min_s == 1.0
    assert m.n == 5
    assert m.q25_s == pytest.approx(np.percentile(times, 25))
    assert m.iqr_s == pytest.approx(np.percentile(times, 75) - np.percentile(times, 25))
    assert m.noise_ratio == pytest.approx(m.iqr_s / 3.0)
    assert m.noise_warning  # IQR 2 / median 3


def test_quiet_measurement_has_no_warning():
    m = from_times([1.0, 1.01, 0.99, 1.0, 1.02, 0.98])
    assert not m.noise_warning
    assert m.noise_message is None


def test_measurement_round_trips_through_dict():
    m = from_times([0.1, 0.2, 0.3], label="r", metadata={"a": 1})
    m2 = Measurement.from_dict(m.to_dict())
    assert m2.times_s == m.times_s and m2.label == "r" and m2.metadata == {"a": 1}
    assert "median" in str(m)


def test_empty_measurement_rejected():
    with pytest.raises(ValueError, match="times_s"):
        Measurement(label="x", times_s=(), warmup_n=0, clock="c")


def test_budgets_on_synthetic_clock():
    clock = FakeClock()
    durations = iter([0.01] * 10_000)

    def op():
        clock.advance(next(durations))

    m = benchmark(op, timer=clock, warmup_ms=50, measure_ms=300, min_reps=3, warn=False)
    # 50 ms of warm-up at 10 ms a call
    assert m.warmup_n == 5
    # 10 ms calls are long enough to time one per sample; 300 ms budget -> 30 samples
    assert m.inner == 1
    assert m.n == 30
    assert m.median_s == pytest.approx(0.01)
    assert m.iqr_s == pytest.approx(0.0, abs=1e-12)
    assert m.clock == "FakeClock" or m.clock  # the clock's name is recorded


def test_short_calls_are_batched_and_per_call_times_reported():
    clock = FakeClock()

    def op():
        clock.advance(1e-6)

    m = benchmark(op, timer=clock, warmup_ms=1, measure_ms=10, warn=False)
    assert m.inner == pytest.approx(timing.MIN_SAMPLE_S / 1e-6, rel=0.01)
    assert m.median_s == pytest.approx(1e-6)


def test_min_and_max_reps_clamp():
    clock = FakeClock()
    m = benchmark(lambda: clock.advance(1.0), timer=clock, warmup_ms=0, measure_ms=1, min_reps=7, warn=False)
    assert m.n == 7
    clock2 = FakeClock()
    m2 = benchmark(lambda: clock2.advance(1e-3), timer=clock2, warmup_ms=0, measure_ms=10_000, max_reps=11, warn=False)
    assert m2.n == 11


def test_rotation_cycles_through_inputs_and_disables_batching():
    clock = FakeClock()
    seen = []

    def op(i):
        seen.append(i)
        clock.advance(1e-6)

    m = benchmark(op, inputs=[(0,), (1,), (2,)], timer=clock, warmup_ms=0, measure_ms=0.03, min_reps=9, warn=False)
    assert m.inner == 1 and m.rotation == 3
    timed = seen[m.warmup_n:]
    assert timed[:6] == [0, 1, 2, 0, 1, 2]


def test_flush_runs_before_every_sample():
    clock = FakeClock()
    calls = []
    m = benchmark(
        lambda: (calls.append("op"), clock.advance(1e-3)),
        flusher=lambda: calls.append("flush"),
        timer=clock,
        warmup_ms=0,
        measure_ms=5,
        min_reps=5,
        warn=False,
    )
    assert m.flush and m.inner == 1
    assert calls[:4] == ["flush", "op", "flush", "op"]


def test_flush_is_not_timed():
    clock = FakeClock()
    m = benchmark(
        lambda: clock.advance(1e-3),
        flusher=lambda: clock.advance(5.0),
        timer=clock,
        warmup_ms=0,
        measure_ms=5,
        min_reps=5,
        warn=False,
    )
    assert m.median_s == pytest.approx(1e-3)


def test_cpu_cache_flusher_writes_a_buffer_larger_than_llc():
    from hwcore.fingerprint import last_level_cache_bytes

    f = timing.CacheFlusher("cpu")
    assert f.nbytes >= 2 * last_level_cache_bytes()
    f()
    assert f._buf[0] == 1


def test_sync_called_with_output():
    clock = FakeClock()
    outs = []
    benchmark(lambda: 42, sync=outs.append, timer=clock, warmup_ms=0, measure_ms=1, min_reps=3, inner=1, warn=False)
    assert outs and all(o == 42 for o in outs)


def test_jax_sync_blocks():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.ones((64, 64))
    m = benchmark(lambda: x @ x, sync="jax", warmup_ms=1, measure_ms=5, warn=False)
    assert m.sync == "jax" and m.median_s > 0


def test_noise_warning_is_emitted():
    clock = FakeClock()
    seq = iter([1e-3, 3e-3] * 10_000)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = benchmark(lambda: clock.advance(next(seq)), timer=clock, warmup_ms=0, measure_ms=50, min_reps=10, inner=1)
    assert m.noise_warning
    assert any(issubclass(x.category, NoisyMeasurementWarning) for x in w)


def test_bad_arguments_are_input_errors():
    with pytest.raises(InputError, match="sync"):
        benchmark(lambda: None, sync="bogus")
    with pytest.raises(InputError, match="measure_ms"):
        benchmark(lambda: None, measure_ms=0)
    with pytest.raises(InputError, match="inputs"):
        benchmark(lambda: None, inputs=[])


def test_harness_overhead_is_small_and_measured():
    m = timing.harness_overhead()
    assert m.label == "harness_overhead"
    assert m.n >= 100
    # an empty call through the harness costs well under a millisecond even on a loaded machine
    assert 0 < m.median_s < 1e-3


def test_real_clock_measures_real_work():
    import time

    m = benchmark(lambda: time.sleep(0.002), warmup_ms=5, measure_ms=40, warn=False, overhead=True)
    assert 0.0015 < m.median_s < 0.05
    assert m.overhead_s is not None and m.overhead_s < m.median_s


def test_warmup_runs_until_the_rate_is_stable():
    # calls that speed up as caches, pages and thread pools warm, then a steady 1 ms:
    # none of the warming calls may be timed
    clock = FakeClock()
    seq = iter([10e-3, 8e-3, 6e-3, 5e-3, 4e-3, 3e-3, 2.5e-3, 2e-3, 1.6e-3, 1.3e-3, 1.1e-3] + [1e-3] * 100_000)
    m = benchmark(lambda: clock.advance(next(seq)), timer=clock, warmup_ms=1, measure_ms=20, inner=1, warn=False)
    assert m.warmup_n >= 12
    assert max(m.times_s) == pytest.approx(1e-3)
    assert m.stop_reason == "converged" and m.converged


def test_sampling_goes_on_until_the_median_converges():
    # +-5% jitter: the 20 samples of the budget leave the median's CI wider than 1%; more are taken
    rng = np.random.default_rng(0)
    clock = FakeClock()
    seq = iter(1e-3 * (1 + 0.05 * rng.standard_normal(200_000)))
    m = benchmark(lambda: clock.advance(next(seq)), timer=clock, warmup_ms=0, measure_ms=20, inner=1, rel_tol=0.01,
                  max_measure_ms=10_000, warn=False)
    assert m.n > 20
    assert m.stop_reason == "converged" and m.median_ci_rel <= 0.01
    assert m.noise_message is None


def test_time_cap_is_said():
    # alternating 1 ms / 3 ms never converges to 0.1%: sampling stops at the cap and says so
    clock = FakeClock()
    seq = iter([1e-3, 3e-3, 2e-3, 2.5e-3] * 50_000)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = benchmark(lambda: clock.advance(next(seq)), timer=clock, warmup_ms=0, measure_ms=20, inner=1,
                      rel_tol=0.001, max_measure_ms=200, warmup_cap_ms=10)
    assert m.stop_reason == "time_cap" and m.converged is False
    assert 0.2 <= sum(m.times_s) < 0.3  # the cap, not much past it
    assert m.noise_warning
    assert any("time cap" in str(x.message) or "IQR" in str(x.message) for x in w)
    d = Measurement.from_dict(m.to_dict())
    assert d.stop_reason == "time_cap" and d.rel_tol == 0.001


def test_fixed_budget_without_tolerance():
    clock = FakeClock()
    seq = iter([1e-3, 3e-3] * 50_000)
    m = benchmark(lambda: clock.advance(next(seq)), timer=clock, warmup_ms=0, measure_ms=20, inner=1, rel_tol=None,
                  warmup_cap_ms=8, warn=False)
    assert m.stop_reason == "budget" and m.converged is None
    assert m.n == 10  # 20 ms / 2 ms per call: the mean of a warm-up that never stabilised (1, 3, 1, 3 ms)


@pytest.mark.parametrize("kw", [{"measure_ms": float("nan")}, {"warmup_ms": float("inf")}, {"rel_tol": 0},
                                {"max_measure_ms": float("nan")}, {"measure_ms": True}])
def test_non_finite_budgets_are_input_errors(kw):
    with pytest.raises(InputError):
        benchmark(lambda: None, **kw)


def test_median_ci_brackets_the_median():
    xs = list(np.random.default_rng(1).normal(10, 1, 400))
    lo, hi = timing.median_ci(xs)
    assert lo < np.median(xs) < hi
    assert timing.median_ci_rel(xs[:5]) == float("inf")
