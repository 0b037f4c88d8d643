"""GPU telemetry on CPU: a fake NVML module drives the throttle logic."""

from __future__ import annotations

import sys
import threading
import time
import types
import warnings

import pytest

from hwcore import telemetry
from hwcore.errors import InputError
from hwcore.telemetry import Telemetry, ThrottlingWarning, decode_reasons


class FakeNVMLError(Exception):
    pass


class FakeNVML(types.ModuleType):
    """The subset of pynvml that telemetry uses, scripted per call.

    ``script`` yields one state dict per sample of the device: sm/mem clocks
    (MHz), power (mW), temperature (C), utilization (%), reasons (bitmask).
    The last state repeats once the script is exhausted.
    """

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, script, *, max_sm=1980, max_mem=3201, power_limit_mw=700_000, count=1,
                 init_error=None, name="NVIDIA H200"):
        super().__init__("pynvml")
        self.script = list(script)
        self.max_sm, self.max_mem, self.power_limit_mw = max_sm, max_mem, power_limit_mw
        self.count = count
        self.init_error = init_error
        self.name = name
        self.reads = 0
        self.inited = 0
        self.shutdowns = 0
        self._lock = threading.Lock()

    def _state(self):
        with self._lock:
            i = min(self.reads, len(self.script) - 1)
        return self.script[i]

    # lifecycle
    def nvmlInit(self):
        if self.init_error:
            raise FakeNVMLError(self.init_error)
        self.inited += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    # devices
    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("h", i)

    def nvmlDeviceGetName(self, h):
        return self.name.encode()

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-fake-{h[1]}"

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self.max_sm if kind == self.NVML_CLOCK_SM else self.max_mem

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.power_limit_mw

    # readings (the clock read starts a new sample)
    def nvmlDeviceGetClockInfo(self, h, kind):
        st = self._state()
        if kind == self.NVML_CLOCK_SM:
            return st["sm"]
        return st.get("mem", self.max_mem)

    def nvmlDeviceGetPowerUsage(self, h):
        return st_get(self._state(), "power", 300_000)

    def nvmlDeviceGetTemperature(self, h, kind):
        return st_get(self._state(), "temp", 45)

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=st_get(self._state(), "util", 0), memory=0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        st = self._state()
        with self._lock:
            self.reads += 1  # last counter read of a sample: advance the script
        return st.get("reasons", 0)


def st_get(st, k, default):
    return st.get(k, default)


IDLE = {"sm": 345, "util": 0, "reasons": 0x1, "power": 80_000, "temp": 30}
BUSY_FULL = {"sm": 1980, "util": 100, "reasons": 0x0, "power": 650_000, "temp": 60}
BUSY_CAPPED = {"sm": 1500, "util": 100, "reasons": 0x4, "power": 700_000, "temp": 70}  # sw_power_cap


def run_region(fake, seconds=0.12, **kw):
    kw.setdefault("interval_s", 0.02)
    with Telemetry(0, nvml=fake, by_cuda_index=False, **kw) as tel:
        time.sleep(seconds)
    return tel.result


def test_decode_reasons():
    assert decode_reasons(0) == ()
    assert decode_reasons(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert decode_reasons(0x40) == ("hw_thermal_slowdown",)
    assert decode_reasons(0x1000)[-1] == "other_0x1000"


def test_full_clocks_under_load_no_warning():
    fake = FakeNVML([IDLE] + [BUSY_FULL] * 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThrottlingWarning)
        res = run_region(fake)
    assert res.available and not res.throttle_warning and res.throttle_message is None
    phases = [s.phase for s in res.samples]
    assert phases[0] == "before" and phases[-1] == "after" and "during" in phases
    m = res.metrics()
    assert m["gpu_sm_clock_hz_median"] == pytest.approx(1980e6)
    assert m["gpu_sm_clock_ratio"] == pytest.approx(1.0)
    assert m["gpu_power_w_max"] == pytest.approx(650.0)
    assert m["gpu_power_limit_w"] == pytest.approx(700.0)
    assert m["gpu_temperature_c_max"] == pytest.approx(60.0)
    assert res.devices[0].name == "NVIDIA H200"
    assert fake.inited == 1 and fake.shutdowns == 1


def test_idle_low_clocks_before_load_are_not_throttling():
    # the "before" sample is idle at 345 MHz (17% of max): must not count
    fake = FakeNVML([IDLE, IDLE] + [BUSY_FULL] * 50)
    res = run_region(fake)
    assert not res.throttle_warning
    assert all(s.util_pct >= 50 for s in res.loaded())


def test_clock_drop_under_load_warns():
    slow = {"sm": 1600, "util": 99, "reasons": 0x0}  # 81% of 1980 MHz, no reason bit
    fake = FakeNVML([IDLE] + [slow] * 50)
    with pytest.warns(ThrottlingWarning, match=r"median SM clock under load 1600 MHz = 81% of max 1980 MHz"):
        res = run_region(fake)
    assert res.throttle_warning
    assert res.metrics()["gpu_sm_clock_ratio"] == pytest.approx(1600 / 1980)
    assert res.metrics()["gpu_throttle_warning"] is True


def test_power_cap_reason_warns_even_at_high_clock():
    capped_fast = {"sm": 1900, "util": 100, "reasons": 0x4}
    fake = FakeNVML([IDLE] + [capped_fast] * 50)
    with pytest.warns(ThrottlingWarning, match="sw_power_cap"):
        res = run_region(fake)
    assert res.throttle_warning and "median SM clock" not in res.throttle_message


def test_thermal_and_clock_drop_both_reported():
    fake = FakeNVML([IDLE] + [BUSY_CAPPED, {"sm": 1400, "util": 100, "reasons": 0x40}] * 30)
    res = run_region(fake, warn=False)
    assert res.throttle_warning
    assert "sw_power_cap" in res.throttle_message and "hw_thermal_slowdown" in res.throttle_message
    assert "median SM clock" in res.throttle_message


def test_threshold_is_configurable():
    slow = {"sm": 1600, "util": 99, "reasons": 0x0}
    fake = FakeNVML([IDLE] + [slow] * 50)
    res = run_region(fake, clock_ratio=0.8)
    assert not res.throttle_warning


def test_low_utilization_samples_are_ignored():
    light = {"sm": 900, "util": 10, "reasons": 0x0}  # a latency-bound op: clocks low, util low
    fake = FakeNVML([IDLE] + [light] * 50)
    res = run_region(fake)
    assert not res.throttle_warning and res.loaded() == []
    assert res.metrics()["gpu_loaded_samples"] == 0


def test_background_thread_samples_during_region():
    fake = FakeNVML([IDLE] + [BUSY_FULL] * 200)
    res = run_region(fake, seconds=0.25, interval_s=0.02)
    during = [s for s in res.samples if s.phase == "during"]
    assert len(during) >= 3  # loose: a loaded 2-core machine still wakes the thread a few times
    assert all(0 <= s.t_s < 5 for s in res.samples)
    ts = [s.t_s for s in res.samples]
    assert ts == sorted(ts)


def test_no_pynvml_module_is_a_clean_noop(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with Telemetry(0) as tel:
        pass
    res = tel.result
    assert res.available is False and "pynvml not importable" in res.reason
    assert res.metrics() == {"gpu_telemetry": False, "gpu_throttle_warning": False}
    assert res.to_dict()["samples"] == []


def test_fake_pynvml_in_sys_modules_is_used(monkeypatch):
    fake = FakeNVML([IDLE] + [BUSY_CAPPED] * 50)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.warns(ThrottlingWarning):
        with Telemetry(0, interval_s=0.02, by_cuda_index=False) as tel:
            time.sleep(0.08)
    assert tel.result.available and tel.result.throttle_warning


def test_nvml_init_failure_is_a_clean_noop():
    fake = FakeNVML([IDLE], init_error="Driver Not Loaded")
    res = run_region(fake, seconds=0.0)
    assert not res.available and "Driver Not Loaded" in res.reason


def test_failing_counter_reads_none_not_crash():
    fake = FakeNVML([IDLE] + [BUSY_FULL] * 20)

    def boom(h):
        raise FakeNVMLError("Not Supported")

    fake.nvmlDeviceGetPowerUsage = boom
    res = run_region(fake)
    assert res.available and all(s.power_w is None for s in res.samples)
    assert res.metrics()["gpu_power_w_max"] is None


def test_bad_config_names_field():
    with pytest.raises(InputError, match="telemetry.interval_s"):
        Telemetry(0, interval_s=0)
    with pytest.raises(InputError, match="telemetry.clock_ratio"):
        Telemetry(0, clock_ratio=1.5)
    with pytest.raises(InputError, match="telemetry.device"):
        Telemetry("tpu:0")
    fake = FakeNVML([IDLE], count=1)
    with pytest.raises(InputError, match="out of range"):
        Telemetry(3, nvml=fake, by_cuda_index=False).start()


def test_cuda_device_string_and_all_devices():
    fake = FakeNVML([IDLE] + [BUSY_FULL] * 50, count=2)
    with Telemetry("cuda:1", nvml=fake, by_cuda_index=False, interval_s=0.02) as tel:
        time.sleep(0.03)
    assert {s.index for s in tel.result.samples} == {1}
    with Telemetry(None, nvml=fake, by_cuda_index=False, interval_s=0.02) as tel:
        time.sleep(0.03)
    assert {s.index for s in tel.result.samples} == {0, 1}


def test_measure_and_snapshot():
    fake = FakeNVML([IDLE] + [BUSY_FULL] * 50)
    out, res = telemetry.measure(lambda: 42, device=0, nvml=fake, by_cuda_index=False, interval_s=0.02)
    assert out == 42 and res.available
    snap = telemetry.snapshot(0, nvml=FakeNVML([IDLE]))
    assert snap.available and {s.phase for s in snap.samples} <= {"before", "after"}
    d = snap.to_dict()
    assert d["devices"][0]["max_sm_clock_hz"] == pytest.approx(1980e6)


def test_for_device_is_noop_on_cpu_and_real_on_cuda():
    with telemetry.for_device("cpu") as tel:
        pass
    assert not tel.result.available and "cpu" in tel.result.reason
    assert tel.result.metrics()["gpu_telemetry"] is False
    fake = FakeNVML([IDLE] + [BUSY_CAPPED] * 20)
    with pytest.warns(ThrottlingWarning):
        with telemetry.for_device("cuda:0", nvml=fake, by_cuda_index=False, interval_s=0.02) as tel:
            time.sleep(0.05)
    assert tel.result.available and tel.result.metrics()["gpu_throttle_warning"] is True
