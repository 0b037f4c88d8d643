#!/usr/bin/env bash
# The one prepared call on a lent GPU (issue #11, with the device check of issue #8):
#   1. the predictor's closed loop on that GPU (benchmarks/predictor_closed_loop.py --device cuda): calibrate
#      from this GPU's kernel sweeps only (bf16 GEMM shapes, copy/triad, causal attention, element-wise, host
#      dispatch), then predict and measure the suite's own workloads at 12 configurations never calibrated on,
#      with the profiled breakdown beside the predicted one;
#   1b. the same on the hold-out configs (--holdout, GPU_HOLDOUT_CONFIGS; held out from the GPU step terms of
#      51e627f; a step-model change after 2026-12-04 makes them development data: add a fresh set then);
#   2. the device check (benchmarks/device_check.sh): GEMM max-achievable bf16/fp16/fp8, copy bandwidth,
#      attention, Triton softmax, a short transformer_lm run, achieved vs datasheet;
#   3. benchmarks/gemm_duty.py: one GEMM shape back to back vs between copies (prepared 2026-12-04, not yet run on
#      a GPU: the loan ended first).
#
#   run(command="bash benchmarks/device_run.sh", carry=[".whl"], timeout_s=600)      # on the device tool
#   PYTHON=.venv/bin/python OUT=/tmp/dr bash benchmarks/device_run.sh --smoke   # the path on this CPU
#
# Each part has a hard time limit (closed loop 200 s, hold-out 150 s, device check 150 s; 2026-12-04 they took
# about 100, 85 and 45 s; the GEMM duty check below, capped at 60 s, takes ~20), so the call ends inside 10
# minutes; what a part wrote before its limit stays. Files back under $OUT (at most 8, flat): closed_loop_gpu.json,
# holdout_gpu.json, device_check.json, device_check_store.tgz, gemm_duty.json, and logs.tgz (every log and
# nvidia_smi.txt).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
REPO="$(pwd)"
PY="${PYTHON:-python3}"
OUT_DIR="${OUT:-$REPO/out/device_run}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
# the device image lacks duckdb (the results store's query engine): it travels as a wheel in ./.whl (carry .whl;
# benchmarks/README.md says how to fetch it) and goes into /tmp/site, never over the image's packages
if [ -d "$REPO/.whl" ] && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
  timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.whl/*.whl && export PYTHONPATH="/tmp/site:$PYTHONPATH" \
    || echo "WARNING: wheel install failed; continuing with what is installed"
fi
SMOKE=0
[ "${1:-}" = "--smoke" ] && SMOKE=1
t0=$(date +%s)

{ date -u; command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi \
    --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  "$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
} > "$OUT_DIR/nvidia_smi.txt" 2>&1
cat "$OUT_DIR/nvidia_smi.txt"

echo "== 1. predictor closed loop on the GPU"
if [ "$SMOKE" = 1 ]; then
  CL_ARGS=(--gpu-smoke --node cpu-epyc-zen4-2c --timed-steps 3 --measure-ms 20)
else
  CL_ARGS=(--device cuda --node h200-sxm --timed-steps 12 --measure-ms 200)
fi
timeout -k 10 200 "$PY" "$REPO/benchmarks/predictor_closed_loop.py" "${CL_ARGS[@]}" \
  --json "$OUT_DIR/closed_loop_gpu.json" > "$OUT_DIR/closed_loop_gpu.log" 2>&1
echo "closed loop rc=$? after $(( $(date +%s) - t0 )) s"
tail -n 12 "$OUT_DIR/closed_loop_gpu.log"

echo "== 1b. predictor closed loop on the hold-out configs"
if [ "$SMOKE" = 1 ]; then echo "(skipped in --smoke: the hold-out plan has no tiny sizes)"; else
  timeout -k 10 150 "$PY" "$REPO/benchmarks/predictor_closed_loop.py" "${CL_ARGS[@]}" --holdout \
    --json "$OUT_DIR/holdout_gpu.json" > "$OUT_DIR/holdout_gpu.log" 2>&1
  echo "hold-out rc=$? after $(( $(date +%s) - t0 )) s"
  tail -n 12 "$OUT_DIR/holdout_gpu.log"
fi

echo "== 2. device check"
DC=/tmp/hweval_device_check
rm -rf "$DC"
if [ "$SMOKE" = 1 ]; then DC_ARGS=(--cpu-smoke --steps env,copy_d2d); else
  DC_ARGS=(--total-s 130 --steps env,gemm_bf16,gemm_fp8,copy_d2d,attention); fi
OUT="$DC" timeout -k 10 150 bash "$REPO/benchmarks/device_check.sh" "${DC_ARGS[@]}" > "$OUT_DIR/device_check.log" 2>&1
echo "device check rc=$? after $(( $(date +%s) - t0 )) s"
[ -f "$DC/device_check.json" ] && cp "$DC/device_check.json" "$OUT_DIR/"  # it holds the fingerprint too
[ -d "$DC/store" ] && tar -czf "$OUT_DIR/device_check_store.tgz" -C "$DC" store
tail -n 30 "$OUT_DIR/device_check.log"

echo "== 3. GEMM back to back vs between memory-bound kernels (benchmarks/gemm_duty.py; the closed loop's gap 1)"
DUTY_ARGS=(--seconds 2 --rounds 3); [ "$SMOKE" = 1 ] && DUTY_ARGS=(--smoke --rounds 1)
timeout -k 5 60 "$PY" "$REPO/benchmarks/gemm_duty.py" "${DUTY_ARGS[@]}" --json "$OUT_DIR/gemm_duty.json" \
  > "$OUT_DIR/gemm_duty.log" 2>&1
echo "gemm duty rc=$? after $(( $(date +%s) - t0 )) s"
tail -n 7 "$OUT_DIR/gemm_duty.log"
# the logs travel as one archive (at most 8 files come back)
tar -czf "$OUT_DIR/logs.tgz" -C "$OUT_DIR" nvidia_smi.txt closed_loop_gpu.log device_check.log gemm_duty.log \
  $( [ -f "$OUT_DIR/holdout_gpu.log" ] && echo holdout_gpu.log ) \
  && rm -f "$OUT_DIR"/nvidia_smi.txt "$OUT_DIR"/*.log
echo "device_run.sh: done in $(( $(date +%s) - t0 )) s; files under $OUT_DIR"
