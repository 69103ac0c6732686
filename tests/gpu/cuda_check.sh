#!/usr/bin/env bash
# The cuda plugin on a machine WITH NVIDIA GPUs: builds hwprobe and the cuda plugin, then for
# several CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER settings compares `hwprobe --json` with
#   - the CUDA runtime's own device list under the same environment (cuda_devices.cu, built
#     with nvcc): same count, and per index the same UUID, PCI bus id and compute capability;
#   - nvidia-smi (NVML, which ignores the visibility variables): each device's physical_index
#     names the nvidia-smi row with its UUID and PCI bus id;
#   - what the setting must give: the device count, and under CUDA_DEVICE_ORDER=PCI_BUS_ID the
#     physical index of every logical index; visibility_variable set exactly when
#     CUDA_VISIBLE_DEVICES is.
# Prints PASS/FAIL per setting; exits non-zero on any mismatch. Takes well under 5 minutes
# (the whole run is capped at 290 s).
#
# Usage: tests/gpu/cuda_check.sh [build-dir]      (default: build-gpu-check in the repo)
#   SKIP_BUILD=1  reuse an existing build;  NVCC=/path/to/nvcc  (default: nvcc on PATH, else
#   /usr/local/cuda/bin/nvcc)
#   HWPROBE=<hwprobe> CUDA_DEVICES=<cuda_devices>  use these programs (a bundle's, tests/gpu/
#   bundle.sh) and build nothing; nvcc is then not needed. CHECK_WORK=<folder> for the files.
# PCI ids are compared in the plugin's form, "0000:18:00.0" (lower-case, 4-digit domain);
# nvidia-smi prints "00000000:18:00.0" and is normalised before comparing.
set -euo pipefail

if [[ -z "${CUDA_CHECK_TIMED:-}" ]]; then
  CUDA_CHECK_TIMED=1 exec timeout --kill-after=5 290 bash "$0" "$@"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build-gpu-check}
work=${CHECK_WORK:-$build/gpu-check}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$work"

die() {
  echo "FAIL: $*" >&2
  exit 1
}

command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this script needs an NVIDIA GPU"
command -v python3 >/dev/null || die "python3 not found"

if [[ -n "${HWPROBE:-}" && -n "${CUDA_DEVICES:-}" ]]; then
  hwprobe=$HWPROBE
  cuda_devices=$CUDA_DEVICES
else
  [[ -x "$nvcc" ]] || die "nvcc not found (set NVCC)"
  # ---- build ----
  if [[ -z "${SKIP_BUILD:-}" ]]; then
    echo "== building hwprobe and the cuda plugin in $build"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBACKPLANE_BUILD_TESTS=OFF \
      >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; die "configure"; }
    ninja -C "$build" hwprobe backplane-cuda >"$work/build.log" 2>&1 ||
      { tail -50 "$work/build.log"; die "build"; }
  fi
  hwprobe=$build/bin/hwprobe
  cuda_devices=$work/cuda_devices
  "$nvcc" -O2 -o "$cuda_devices" "$root/tests/gpu/cuda_devices.cu" >"$work/nvcc.log" 2>&1 ||
    { cat "$work/nvcc.log"; die "nvcc cuda_devices.cu"; }
fi
[[ -x "$hwprobe" ]] || die "no $hwprobe"
[[ -x "$cuda_devices" ]] || die "no $cuda_devices"

# ---- what NVML sees ----
env -u CUDA_VISIBLE_DEVICES nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader \
  >"$work/smi.csv" || die "nvidia-smi --query-gpu"
gpus=$(grep -c . "$work/smi.csv" || true)
((gpus > 0)) || die "nvidia-smi lists no GPU"
echo "== nvidia-smi: $gpus GPU(s)"
cat "$work/smi.csv"
if nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null | grep -q Enabled; then
  echo "note: MIG is enabled: CUDA lists MIG instances; they are matched through parent_uuid"
fi
last=$((gpus - 1))
last_uuid=$(awk -F', ' -v i="$last" '$1 == i {print $2}' "$work/smi.csv")
# A UUID prefix that names only the last GPU: the shortest of 8, 13, ... characters after GPU-.
prefix=$last_uuid
for n in 12 17 22 27; do
  candidate=${last_uuid:0:n}
  if (($(grep -c -- ", $candidate" "$work/smi.csv") == 1)); then
    prefix=$candidate
    break
  fi
done
reversed=$(seq -s, "$last" -1 0)

# ---- settings: name | environment | expected count | physical index per logical index ----
settings=(
  "unset||$gpus|-"
  "pci-order|CUDA_DEVICE_ORDER=PCI_BUS_ID|$gpus|$(seq -s, 0 "$last")"
  "visible-0|CUDA_VISIBLE_DEVICES=0|1|-"
  "visible-0-pci-order|CUDA_VISIBLE_DEVICES=0 CUDA_DEVICE_ORDER=PCI_BUS_ID|1|0"
)
if ((gpus >= 2)); then
  settings+=("reversed-pci-order|CUDA_VISIBLE_DEVICES=$reversed CUDA_DEVICE_ORDER=PCI_BUS_ID|$gpus|$reversed")
fi
settings+=(
  "uuid-prefix|CUDA_VISIBLE_DEVICES=$prefix|1|$last"
  "empty|CUDA_VISIBLE_DEVICES=|0|-"
)
# A MIG instance by its UUID, where the GPU has MIG on.
mig_uuid=$(nvidia-smi -L 2>/dev/null | grep -o 'MIG-[0-9a-f-]*' | head -1 || true)
if [[ -n "$mig_uuid" ]]; then
  settings+=("mig-uuid|CUDA_VISIBLE_DEVICES=$mig_uuid|1|-")
else
  echo "note: no MIG instance on this GPU; the MIG-<uuid> form is not checked"
fi

failures=0
for setting in "${settings[@]}"; do
  IFS='|' read -r name assignments count mapping <<<"$setting"
  read -r -a vars <<<"$assignments"
  run=(env -u CUDA_VISIBLE_DEVICES -u CUDA_DEVICE_ORDER BACKPLANE_PLUGINS=cuda "${vars[@]}")
  visible_set=0
  [[ "$assignments" == *CUDA_VISIBLE_DEVICES=* ]] && visible_set=1
  out=$work/$name
  ok=1
  timeout 60 "${run[@]}" "$hwprobe" --json >"$out.hwprobe.json" 2>"$out.hwprobe.err" || ok=0
  timeout 60 "${run[@]}" "$cuda_devices" >"$out.runtime.tsv" 2>"$out.runtime.err" || ok=0
  if ((ok == 0)); then
    echo "FAIL $name [$assignments]: hwprobe or cuda_devices failed"
    cat "$out.hwprobe.err" "$out.runtime.err"
    failures=$((failures + 1))
    continue
  fi
  if python3 - "$name" "$assignments" "$out.hwprobe.json" "$out.runtime.tsv" "$work/smi.csv" \
    "$count" "$mapping" "$visible_set" <<'PY'; then
import json
import sys

name, assignments, hwprobe_file, runtime_file, smi_file, count, mapping, visible_set = sys.argv[1:]
count, visible_set = int(count), visible_set == "1"
mapping = None if mapping == "-" else [int(i) for i in mapping.split(",")]
problems = []


def pci(bus_id):
    """The plugin's form: lower-case, 4-digit domain (nvidia-smi prints 8 digits)."""
    bus_id = bus_id.strip().lower()
    domain, rest = bus_id.split(":", 1)
    if len(domain) > 4:
        domain = domain[-4:] if domain[:-4].strip("0") == "" else domain
    return domain + ":" + rest


def bare(uuid):  # the 16 bytes, without the GPU-/MIG- prefix
    return uuid.split("-", 1)[1].lower()


report = json.load(open(hwprobe_file))
backends = [b for b in report["backends"] if b["type"] == "cuda"]
devices = [d for d in report["devices"] if d["type"] == "cuda"]
runtime = [line.rstrip("\n").split("\t") for line in open(runtime_file) if line.strip()]
smi = {}
for line in open(smi_file):
    index, uuid, bus_id = [f.strip() for f in line.split(",")]
    smi[int(index)] = (uuid, pci(bus_id))

if len(backends) != 1:
    problems.append(f"hwprobe lists {len(backends)} cuda backends")
elif count == 0:
    if backends[0]["available"]:
        problems.append("cuda is available, expected unavailable")
    elif "CUDA_VISIBLE_DEVICES" not in (backends[0]["reason"] or ""):
        problems.append(f"reason does not name CUDA_VISIBLE_DEVICES: {backends[0]['reason']}")
    else:
        print(f"  reason: {backends[0]['reason']}")
elif not backends[0]["available"]:
    problems.append(f"cuda is unavailable: {backends[0]['reason']}")

if len(devices) != count:
    problems.append(f"hwprobe lists {len(devices)} cuda devices, expected {count}")
if len(runtime) != count:
    problems.append(f"the CUDA runtime lists {len(runtime)} devices, expected {count}")

for k, d in enumerate(devices):
    label = f"cuda:{k}"
    if d["index"] != k:
        problems.append(f"{label}: index {d['index']}")
    if k < len(runtime):
        _, r_uuid, r_pci, r_cc, r_name = runtime[k]
        if bare(d["uuid"]) != bare(r_uuid):
            problems.append(f"{label}: uuid {d['uuid']}, the runtime says {r_uuid}")
        if d["pci_bus_id"] != pci(r_pci):
            problems.append(f"{label}: pci {d['pci_bus_id']}, the runtime says {pci(r_pci)}")
        if d["compute_capability"] != r_cc:
            problems.append(f"{label}: compute capability {d['compute_capability']} != {r_cc}")
        if d["arch"] != "sm_" + r_cc.replace(".", ""):
            problems.append(f"{label}: arch {d['arch']} for compute capability {r_cc}")
    physical = d["physical_index"]
    if physical is None:
        problems.append(f"{label}: no physical_index (NVML unusable?)")
    elif physical not in smi:
        problems.append(f"{label}: physical_index {physical} is not an nvidia-smi index")
    else:
        gpu_uuid = d["properties"].get("parent_uuid", d["uuid"])
        if gpu_uuid != smi[physical][0]:
            problems.append(f"{label}: physical_index {physical} is {smi[physical][0]} in "
                            f"nvidia-smi, the plugin says {gpu_uuid}")
        if d["pci_bus_id"] != smi[physical][1]:
            problems.append(f"{label}: pci {d['pci_bus_id']}, nvidia-smi row {physical} says "
                            f"{smi[physical][1]}")
    if mapping is not None and k < len(mapping) and physical != mapping[k]:
        problems.append(f"{label}: physical_index {physical}, expected {mapping[k]}")
    expected_variable = "CUDA_VISIBLE_DEVICES" if visible_set else None
    if d["visibility_variable"] != expected_variable:
        problems.append(f"{label}: visibility_variable {d['visibility_variable']!r}")
    print(f"  {label}: {d['uuid']} {d['pci_bus_id']} {d['arch']} physical {physical}")

print(("PASS" if not problems else "FAIL") + f" {name} [{assignments}]")
for p in problems:
    print("  - " + p)
sys.exit(1 if problems else 0)
PY
    :
  else
    failures=$((failures + 1))
  fi
done

echo "== $((${#settings[@]} - failures)) of ${#settings[@]} settings passed"
((failures == 0))
