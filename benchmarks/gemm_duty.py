"""Does a GEMM run faster between memory-bound kernels than back to back? (the GPU closed loop's gap 1)

The H200 hold-out run of 2026-12-04 found the transformer's GEMM kernels at 758-841 TFLOP/s inside a training step
against 713 at best in the calibration sweep, which runs each shape back to back for a few hundred milliseconds;
the device check saw the SM clock at 1650 MHz (83% of max) under that load. The suspected cause: a power-capped GPU
clocks down under sustained GEMMs, and a step, where GEMMs alternate with memory-bound kernels, draws less power.

This measures one bf16 GEMM shape of the hold-out's size in two modes, alternating A B A B A B in one run:

* ``sustained``: the GEMM back to back;
* ``interleaved``: each GEMM followed by a device-to-device copy taking about as long (a memory-bound kernel),

each GEMM timed alone with CUDA events (median and IQR over the mode's GEMMs), the SM clock sampled through NVML
meanwhile where it is available. It prints the GEMM rate per mode and the ratio interleaved / sustained measured
side by side. ``--smoke`` runs the same path on a CPU at a tiny size (wiring only; numbers mean nothing).

Run: ``python benchmarks/gemm_duty.py [--seconds 2] [--rounds 3] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _clock_sampler(stop: threading.Event, out: list[float]) -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        while not stop.is_set():
            out.append(float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)))
            time.sleep(0.01)
    except Exception:  # noqa: BLE001 - no NVML: no clock figure, said in the output
        return


def run_mode(torch: Any, mode: str, a: Any, b: Any, src: Any, dst: Any, seconds: float, cuda: bool) -> dict[str, Any]:
    """Time each GEMM of ``mode`` for about ``seconds``; returns median/IQR seconds per GEMM and SM clocks."""
    times: list[float] = []
    clocks: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_clock_sampler, args=(stop, clocks), daemon=True) if cuda else None
    if sampler:
        sampler.start()
    t_end = time.perf_counter() + seconds
    pending: list[tuple[Any, Any]] = []
    while time.perf_counter() < t_end:
        for _ in range(20):
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                torch.mm(a, b)
                e1.record()
                pending.append((e0, e1))
            else:
                t0 = time.perf_counter()
                torch.mm(a, b)
                times.append(time.perf_counter() - t0)
            if mode == "interleaved":
                dst.copy_(src)
        if cuda:
            torch.cuda.synchronize()
            times += [e0.elapsed_time(e1) * 1e-3 for e0, e1 in pending]
            pending.clear()
    stop.set()
    if sampler:
        sampler.join(timeout=1.0)
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return {"mode": mode, "gemms": len(times), "median_s": statistics.median(times), "iqr_s": q[2] - q[0],
            "sm_clock_mhz_median": statistics.median(clocks) if clocks else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=8192)
    ap.add_argument("--n", type=int, default=12288)
    ap.add_argument("--k", type=int, default=3072)
    ap.add_argument("--seconds", type=float, default=2.0, help="per mode and round")
    ap.add_argument("--rounds", type=int, default=3, help="A B rounds, alternating")
    ap.add_argument("--smoke", action="store_true", help="the path on a CPU at a tiny size")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    import torch

    cuda = not a.smoke
    if cuda and not torch.cuda.is_available():
        print("gemm_duty: no CUDA device here; use --smoke for the path on a CPU", file=sys.stderr)
        return 2
    dev = "cuda" if cuda else "cpu"
    m, n, k = (a.m, a.n, a.k) if cuda else (64, 64, 64)
    dt = torch.bfloat16 if cuda else torch.float32
    x = torch.randn(m, k, device=dev, dtype=dt)
    w = torch.randn(k, n, device=dev, dtype=dt)
    # a copy about as long as one GEMM: bytes moved = 2 x buffer; GEMM at ~750 TFLOP/s, copy at ~4 TB/s
    flops = 2.0 * m * n * k
    nbytes = int(flops / 750e12 * 4e12 / 2) if cuda else 4096
    src = torch.empty(max(nbytes // 4, 1), device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    for _ in range(10):  # warm-up
        torch.mm(x, w)
        dst.copy_(src)
    if cuda:
        torch.cuda.synchronize()
    rows = []
    for r in range(a.rounds):
        for mode in ("sustained", "interleaved"):
            res = run_mode(torch, mode, x, w, src, dst, a.seconds if cuda else 0.05, cuda)
            res.update(round=r, tflops=flops / res["median_s"] / 1e12)
            rows.append(res)
            clk = f"{res['sm_clock_mhz_median']:.0f} MHz" if res["sm_clock_mhz_median"] else "no clock"
            print(f"round {r} {mode:12s} {res['gemms']:6d} GEMMs  median {res['median_s'] * 1e3:8.3f} ms "
                  f"(IQR {res['iqr_s'] * 1e3:.3f})  {res['tflops']:8.1f} TFLOP/s  SM {clk}", flush=True)
    med = {mode: statistics.median(r["tflops"] for r in rows if r["mode"] == mode)
           for mode in ("sustained", "interleaved")}
    ratio = med["interleaved"] / med["sustained"]
    print(f"GEMM {m}x{n}x{k} {'bf16' if cuda else 'fp32 (smoke)'}: sustained {med['sustained']:.1f}, interleaved "
          f"{med['interleaved']:.1f} TFLOP/s (median of {a.rounds} rounds); interleaved / sustained = {ratio:.3f}")
    if a.json:
        meta = {"device": torch.cuda.get_device_name(0) if cuda else "cpu (smoke)", "torch": torch.__version__,
                "shape": [m, n, k], "copy_bytes": 2 * src.numel() * 4, "date_utc": time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows, "median_tflops": med, "ratio": ratio},
                                           indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
