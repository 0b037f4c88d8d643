"""Node fingerprint recorded with every result.

Hardware identity (CPU model, cores, ISA flags, memory, caches, GPUs) gives a
stable ``node_id``; the software stack (OS, Python, framework and BLAS
versions, performance-relevant environment variables, the suite's git sha)
gives a ``stack_id``. :func:`compare` flags two results whose stacks differ,
since such a comparison mixes hardware and software effects.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Environment variables that change performance.
PERF_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "KMP_AFFINITY",
    "GOMP_CPU_AFFINITY",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "JAX_PLATFORMS",
    "TF_CPP_MIN_LOG_LEVEL",
    "HIP_VISIBLE_DEVICES",
)

#: ISA flags worth recording (as /proc/cpuinfo spells them).
CPU_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "sve",
    "asimd",
)

#: Packages whose versions make up the software stack.
STACK_PACKAGES = ("numpy", "scipy", "torch", "jax", "jaxlib", "triton", "duckdb", "pyarrow", "pandas")

#: Fingerprint fields that define the software stack (compared by :func:`compare`).
STACK_FIELDS = ("os", "python", "packages", "blas", "env", "torch_config")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _cpuinfo_fields() -> dict[str, Any]:
    text = _read("/proc/cpuinfo") or ""
    model, flags = None, set()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key in ("model name", "Processor", "cpu model") and model is None:
            model = val.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(val.split())
    if model is None:
        try:
            import cpuinfo

            model = cpuinfo.get_cpu_info().get("brand_raw")
        except Exception:  # noqa: BLE001 - py-cpuinfo probes subprocesses, raises anything; name falls back
            model = platform.processor() or "unknown"
    return {"cpu_model": model, "cpu_flags": {f: (f in flags) for f in CPU_FLAGS}}


def cache_sizes() -> dict[str, int]:
    """Per-core cache sizes in bytes by level name (``L1d``, ``L2``, ``L3``)."""
    out: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    if not base.exists():
        return out
    for idx in sorted(base.glob("index*")):
        level = (_read(str(idx / "level")) or "").strip()
        ctype = (_read(str(idx / "type")) or "").strip()
        size = (_read(str(idx / "size")) or "").strip()
        if not level or not size or ctype == "Instruction":
            continue
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1], 1)
        num = int(size[:-1]) if size[-1] in "KMG" else int(size)
        name = f"L{level}d" if ctype == "Data" else f"L{level}"
        out[name] = num * mult
    return out


def last_level_cache_bytes() -> int:
    """Size of the last-level cache seen by core 0 (32 MiB if unknown)."""
    sizes = cache_sizes()
    return max(sizes.values()) if sizes else 32 * 2**20


def _memory_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except (ImportError, OSError, RuntimeError):  # no psutil, or /proc unreadable: sysconf gives the same total
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _cores() -> dict[str, int | None]:
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except (ImportError, OSError, RuntimeError):  # no psutil or no /proc: physical cores unknown (None)
        physical = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return {"cores_logical": os.cpu_count(), "cores_physical": physical, "cores_usable": usable}


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in STACK_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _blas() -> list[dict[str, Any]]:
    try:
        import numpy  # noqa: F401 - loads numpy's BLAS so threadpoolctl sees it
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("internal_api", "version", "num_threads", "threading_layer", "architecture", "user_api")
    return [{k: info.get(k) for k in keep} for info in threadpool_info()]


def _torch_info() -> dict[str, Any]:
    """Torch build facts and CUDA devices (only when torch is installed)."""
    try:
        import torch
    except ImportError:
        return {"gpus": []}
    cfg = {
        "threads": torch.get_num_threads(),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "cuda_build": torch.version.cuda,
        "hip_build": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    gpus = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpus.append(
                {
                    "index": i,
                    "name": p.name,
                    "memory_bytes": int(p.total_memory),
                    "sm_count": int(p.multi_processor_count),
                    "capability": f"{p.major}.{p.minor}",
                    "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0),
                }
            )
    return {"torch_config": cfg, "gpus": gpus}


def _nvml() -> dict[str, Any]:
    """Driver and clocks through nvidia-ml-py, when it and a driver are present."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no driver / library: the fingerprint has no NVML section
        return {}
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            devices.append(
                {
                    "index": i,
                    "name": pynvml.nvmlDeviceGetName(h),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                    "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
                    "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
                }
            )
        return {"driver": driver if isinstance(driver, str) else driver.decode(), "nvml_devices": devices}
    finally:
        pynvml.nvmlShutdown()


def git_sha() -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, text=True, timeout=5
        )
        sha = proc.stdout.strip() if proc.returncode == 0 else ""
        dirty = bool(
            subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        )
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}
    return {"sha": sha or None, "dirty": dirty if sha else None}


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def collect() -> dict[str, Any]:
    """Gather a fresh fingerprint (uncached)."""
    fp: dict[str, Any] = {"hostname": socket.gethostname()}
    fp.update(_cpuinfo_fields())
    fp.update(_cores())
    fp["memory_bytes"] = _memory_bytes()
    fp["caches_bytes"] = cache_sizes()
    fp["machine"] = platform.machine()
    fp["os"] = f"{platform.system()} {platform.release()}"
    fp["python"] = platform.python_version()
    fp["python_implementation"] = sys.implementation.name
    fp["packages"] = package_versions()
    fp["blas"] = _blas()
    fp.update(_torch_info())
    nv = _nvml()
    fp["gpu_driver"] = nv.get("driver")
    if nv.get("nvml_devices"):
        fp["nvml_devices"] = nv["nvml_devices"]
    fp["gpu_count"] = len(fp["gpus"])
    fp["env"] = {k: os.environ[k] for k in PERF_ENV_VARS if k in os.environ}
    fp["suite_git"] = git_sha()
    hw = {
        "hostname": fp["hostname"],
        "cpu_model": fp["cpu_model"],
        "cores_logical": fp["cores_logical"],
        "memory_gib": round(fp["memory_bytes"] / 2**30),
        "gpus": [(g["name"], round(g["memory_bytes"] / 2**30)) for g in fp["gpus"]],
    }
    fp["node_id"] = _hash(hw)
    fp["stack_id"] = _hash({k: fp.get(k) for k in STACK_FIELDS})
    return fp


@functools.lru_cache(maxsize=1)
def _cached() -> str:
    return json.dumps(collect(), sort_keys=True, default=str)


def fingerprint(refresh: bool = False) -> dict[str, Any]:
    """The node fingerprint (cached per process; ``refresh=True`` re-reads it)."""
    if refresh:
        _cached.cache_clear()
    return json.loads(_cached())


def node_id() -> str:
    return fingerprint()["node_id"]


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Differences between two fingerprints' software stacks.

    Returns ``{"same_node": bool, "stack_differs": bool, "differences": {field: (a, b)}}``.
    Packages are compared one by one, so the message names the package.
    """
    diffs: dict[str, tuple[Any, Any]] = {}
    for key in STACK_FIELDS:
        va, vb = a.get(key), b.get(key)
        if key == "packages" and isinstance(va, dict) and isinstance(vb, dict):
            for pkg in sorted(set(va) | set(vb)):
                if va.get(pkg) != vb.get(pkg):
                    diffs[f"packages.{pkg}"] = (va.get(pkg), vb.get(pkg))
        elif va != vb:
            diffs[key] = (va, vb)
    return {
        "same_node": a.get("node_id") == b.get("node_id"),
        "stack_differs": bool(diffs),
        "differences": diffs,
    }


def stack_warning(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """One-line warning when two results' software stacks differ, else ``None``."""
    cmp = compare(a, b)
    if not cmp["stack_differs"]:
        return None
    parts = [f"{k}: {va!r} vs {vb!r}" for k, (va, vb) in list(cmp["differences"].items())[:4]]
    more = len(cmp["differences"]) - len(parts)
    return "software stacks differ (" + "; ".join(parts) + (f"; +{more} more" if more > 0 else "") + ")"
