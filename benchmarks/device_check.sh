#!/usr/bin/env bash
# One prepared GPU device check (issue #8): GEMM max-achievable (bf16, fp16, fp8),
# device-to-device copy bandwidth, attention, the Triton softmax vs torch, and a
# short transformer_lm run; prints "achieved vs datasheet" last.
#
#   bash benchmarks/device_check.sh                 # on a GPU machine, from the repo root
#   bash benchmarks/device_check.sh --cpu-smoke     # tiny sizes on the CPU (exercises the path)
#   bash benchmarks/device_check.sh --steps gemm_bf16,triton
#
# Budget: the Python driver gives each step a hard time limit (sum 420 s, see
# GPU_PLAN in device_check.py) and stops starting steps past --total-s, so the
# whole script ends in under 8 minutes on one H200 (installs included).
# Results: $OUT/store (a hweval results store), $OUT/device_check.json,
# $OUT/fingerprint.json, $OUT/device_check.log; without $OUT, ./out/device_check (git-ignored).
# Commits nothing.
#
# Packages: uses what the machine has (torch, triton, nvidia-ml-py, pyarrow, ...).
# Missing pure-Python ones can travel as wheels in ./.whl (see the device
# README: pip download --only-binary=:all: --python-version 3.12 ... -d .whl);
# they are installed into /tmp/site, never over the machine's torch.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
REPO="$(pwd)"
PY="${PYTHON:-python3}"
if [ -x "$REPO/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && [ -z "${OUT:-}" ]; then
  PY="$REPO/.venv/bin/python"   # a dev checkout (not the device machine) uses its venv
fi
OUT_DIR="${OUT:-$REPO/out/device_check}"
mkdir -p "$OUT_DIR"
t0=$(date +%s)

if [ -d "$REPO/.whl" ] && ls "$REPO"/.whl/*.whl >/dev/null 2>&1; then
  echo "installing $(ls "$REPO"/.whl/*.whl | wc -l) wheel(s) from .whl into /tmp/site"
  timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.whl/*.whl || echo "WARNING: wheel install failed; continuing with what is installed"
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# JAX (imported by some kernel modules) must not grab 75% of the GPU on first use
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export HWEVAL_STORE="$OUT_DIR/store"

# what the check needs, and what it can do without
"$PY" - <<'EOF' || exit 1
import importlib, sys
need = ["numpy", "torch", "pyarrow", "click"]
opt = {"triton": "Triton step fails with a clear reason", "pynvml": "no GPU telemetry (nvidia-ml-py)",
       "psutil": "fingerprint lacks memory figures", "duckdb": "results can be written but not queried here"}
missing = [m for m in need if importlib.util.find_spec(m) is None]
if missing:
    print("device_check: missing required packages: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
for m, why in opt.items():
    if importlib.util.find_spec(m) is None:
        print(f"device_check: note: {m} absent: {why}")
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
EOF

command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv

"$PY" "$REPO/benchmarks/device_check.py" --out "$OUT_DIR" "$@"
rc=$?
echo "device_check.sh: done in $(( $(date +%s) - t0 )) s (rc=$rc); results under $OUT_DIR"
exit $rc
