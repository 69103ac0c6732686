#!/usr/bin/env bash
# The one command of the GPU machine: every GPU check of a bundle (tests/gpu/bundle.sh) and the
# speed figures, printed and written to REPORT_DIR. Depends on nothing but the bundle, the NVIDIA
# driver and, for the PyTorch comparison only, python3 with torch. Under 8 minutes of wall time:
#   1. the GPU and the bundle (nvidia-smi, BUILD_INFO, hwprobe);
#   2. the cuda plugin against nvidia-smi and the CUDA runtime, under CUDA_VISIBLE_DEVICES /
#      CUDA_DEVICE_ORDER settings, UUID and MIG forms where the GPU allows (cuda_check.sh);
#   3. every attention case against the cpu plugin's float32 sdpa (attention_gpu_check);
#   4. every CUDA layer kernel against the CPU kernel on the same inputs (layer_kernels_check);
#   5. speed: gpu_bench, then torch_peers.py sets PyTorch beside it on the same GPU, with this
#      GPU's bf16 matmul rate and copy bandwidth measured in the same run.
# A part that cannot run says why in one line. Exit 0 exactly when every correctness check
# (2-4) passed; speed is reported, never judged here.
#
# Usage: run_all.sh BUNDLE [REPORT_DIR]      (REPORT_DIR default: $OUT when set, else ./gpu-report)
#   the bundle's scripts/run_all.sh finds its bundle by itself: scripts/run_all.sh "" [REPORT_DIR]
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundle=${1:-}
if [[ -z "$bundle" && -x "$here/../bin/hwprobe" ]]; then bundle=$here/..; fi
[[ -n "$bundle" && -x "$bundle/bin/hwprobe" ]] ||
  { echo "run_all.sh: '$bundle' is not a bundle (tests/gpu/bundle.sh OUTDIR makes one)" >&2; exit 2; }
bundle=$(cd "$bundle" && pwd)
report=${2:-${OUT:-$PWD/gpu-report}}
mkdir -p "$report"
report=$(cd "$report" && pwd)
scripts=$bundle/scripts
started=$(date +%s)
failed=()
passed=()

log() { echo "$*" | tee -a "$report/summary.txt"; }
# step NAME SECONDS COMMAND...: runs it capped, its output to the screen and REPORT_DIR/NAME.log.
step() {
  local name=$1 seconds=$2
  shift 2
  log "== $name (at most ${seconds} s)"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=5 "$seconds" "$@" 2>&1 | tee "$report/$name.log"
  rc=${PIPESTATUS[0]}
  if ((rc == 124 || rc == 137)); then
    log "FAIL $name: no result within ${seconds} s"
  elif ((rc != 0)); then
    log "FAIL $name: exit $rc (see $report/$name.log)"
  else
    log "PASS $name ($(($(date +%s) - t0)) s)"
  fi
  return "$rc"
}

: >"$report/summary.txt"
log "backplane GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), bundle $bundle, report $report"
head -4 "$bundle/BUILD_INFO" 2>/dev/null | tee -a "$report/summary.txt"

if ! command -v nvidia-smi >/dev/null; then
  log "FAIL: nvidia-smi not found: no NVIDIA driver on this machine, so no GPU check can run"
  exit 1
fi
nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,mig.mode.current \
  --format=csv | tee "$report/nvidia-smi.csv" | tee -a "$report/summary.txt"
step hwprobe 60 "$bundle/bin/hwprobe" --explain
"$bundle/bin/hwprobe" --json >"$report/hwprobe.json" 2>/dev/null

if command -v python3 >/dev/null; then
  if step cuda_check 150 env HWPROBE="$bundle/bin/hwprobe" CUDA_DEVICES="$bundle/bin/cuda_devices" \
    CHECK_WORK="$report/cuda_check" bash "$scripts/cuda_check.sh"; then
    passed+=(cuda_check)
  else
    failed+=(cuda_check)
  fi
else
  log "FAIL cuda_check: python3 not found (the comparison with nvidia-smi needs it)"
  failed+=(cuda_check)
fi

# Only the cuda and cpu plugins: the reference is the cpu plugin's sdpa.
if step attention 150 env BACKPLANE_PLUGINS=cuda,cpu "$bundle/bin/attention_gpu_check"; then
  passed+=(attention)
else
  failed+=(attention)
fi
if step layer_kernels 100 "$bundle/bin/layer_kernels_check"; then
  passed+=(layer_kernels)
else
  failed+=(layer_kernels)
fi

# Speed, with what time is left (8 minutes in all).
left=$((470 - ($(date +%s) - started)))
if ((left < 60)); then
  log "SKIP speed: only ${left} s left of the 8 minutes"
else
  step gpu_bench 90 env BACKPLANE_PLUGINS=cuda,cpu "$bundle/bin/gpu_bench"
  cp "$report/gpu_bench.log" "$report/gpu_bench.jsonl"
  left=$((470 - ($(date +%s) - started)))
  if ! command -v python3 >/dev/null; then
    log "SKIP PyTorch comparison: python3 not found"
  elif ! python3 -c 'import torch' 2>/dev/null; then
    log "SKIP PyTorch comparison: python3 here has no torch"
  elif ((left < 40)); then
    log "SKIP PyTorch comparison: only ${left} s left"
  else
    step torch_peers $((left - 10)) python3 "$scripts/torch_peers.py" "$report/gpu_bench.jsonl" \
      --json "$report/torch_peers.json" --budget-seconds $((left / 2)) || true
  fi
fi

log "== correctness: passed ${passed[*]:-nothing}; failed ${failed[*]:-nothing}; $(($(date +%s) - started)) s"
((${#failed[@]} == 0))
