"""Differential test: backplane's selection rules against Transformers and Accelerate themselves.

Each case runs the oracle (transformers 5.24 / accelerate 1.15 functions, in a forked child so
that PartialState and the environment start fresh) and `hwprobe select --json` with the same
input, and compares what both decided. Where availability decides, the oracle's availability
checks are monkeypatched and hwprobe gets a simulated topology with the same device types.

Known, documented divergences (selection.hpp) are rows of their own: they assert what each side
does, so a change on either side shows up here.

Usage: differential.py --hwprobe PATH --plugin-path DIR
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

import torch  # noqa: F401  (imported once, before forking)
import transformers
import accelerate
from accelerate.state import AcceleratorState, PartialState
from transformers import TrainingArguments
from transformers.integrations.accelerate import check_and_set_device_map
from transformers.pipelines import base as pipeline_base

# Variables either side reads; every case starts with none of them.
VARIABLES = [
    "LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK",
    "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "ACCELERATE_USE_CPU", "ACCELERATE_TORCH_DEVICE", "ACCELERATE_MIXED_PRECISION",
    "BACKPLANE_DEVICE", "BACKPLANE_SIM_TOPOLOGY", "CUDA_VISIBLE_DEVICES",
]

failures = []
checks = 0


def check(name, what, ours, theirs):
    global checks
    checks += 1
    if ours != theirs:
        failures.append(f"{name}: {what}: backplane {ours!r}, transformers/accelerate {theirs!r}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_child(function, env):
    """Runs function() in a forked child with `env` on top of a clean environment."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            for name in VARIABLES:
                os.environ.pop(name, None)
            os.environ.update(env)
            try:
                result = {"ok": True, **function()}
            except Exception as e:  # the oracle's error is a result
                result = {"ok": False, "error": str(e), "type": type(e).__name__}
            os.write(write, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write)
    return pid, read


def collect(pid, read):
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"ok": false, "error": "child died"}')


def network_failure(result):
    """A failed loopback rendezvous: torch's DistNetworkError or a socket error in its text."""
    text = result.get("error", "")
    return (result.get("type", "").startswith("Dist") or "Connection reset" in text
            or "Connection refused" in text or "timed out" in text.lower() or "child died" in text)


def oracle(function, env):
    return collect(*in_child(function, env))


def hwprobe(args, env):
    full = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    full.update(HWPROBE_ENV)
    full.update(env)
    r = subprocess.run([HWPROBE, "select", *args, "--json"], env=full, capture_output=True,
                       text=True, timeout=60)
    if r.returncode == 0:
        return {"ok": True, **json.loads(r.stdout)}
    # Only the newline goes: transformers' messages may end in a space.
    return {"ok": False, "exit": r.returncode, "error": r.stderr.rstrip("\n")}


def ours_error(result):
    prefix = "hwprobe select: "
    return result["error"][len(prefix):] if result["error"].startswith(prefix) else result["error"]


# ---- Training: TrainingArguments._setup_devices -------------------------------------------------

def training_oracle(use_cpu=False, ddp_backend=None, patch=None):
    def run():
        if patch:
            patch()
        AcceleratorState._reset_state(reset_partial_state=True)
        args = TrainingArguments(output_dir=tempfile.mkdtemp(), use_cpu=use_cpu,
                                 ddp_backend=ddp_backend, report_to=[])
        state = args.distributed_state
        return {
            "device": str(args.device),
            "n_gpu": args.n_gpu,
            "world_size": args.world_size,
            "rank": args.process_index,
            "local_rank": args.local_process_index,
            "distributed_type": str(state.distributed_type),
            "backend": state.backend,
        }
    return run


def compare_training(name, ours, theirs):
    check(name, "succeeds", ours["ok"], theirs["ok"])
    if not (ours["ok"] and theirs["ok"]):
        if not ours["ok"] and not theirs["ok"]:
            # Accelerate's and transformers' messages, verbatim inside ours.
            check(name, "error message contains the oracle's", theirs["error"] in ours_error(ours),
                  True)
        return
    check(name, "device", ours["device"], theirs["device"])
    check(name, "world size", ours["world_size"], theirs["world_size"])
    check(name, "rank", ours["rank"], theirs["rank"])
    check(name, "local rank", ours["local_rank"], theirs["local_rank"])
    check(name, "collective backend", ours["collective_backend"], theirs["backend"])
    check(name, "data-parallel devices (n_gpu)", len(ours["devices"]), max(1, theirs["n_gpu"]))


def torchrun(rank=0, world=1, port=None):
    return {"LOCAL_RANK": str(rank), "RANK": str(rank), "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port or free_port())}


def training_cases():
    single = [
        ("plain", {}, {}, []),
        ("use_cpu", {"use_cpu": True}, {}, ["--use-cpu"]),
        ("ACCELERATE_USE_CPU", {}, {"ACCELERATE_USE_CPU": "true"}, []),
        ("ACCELERATE_USE_CPU=no", {}, {"ACCELERATE_USE_CPU": "no"}, []),
        ("ACCELERATE_TORCH_DEVICE=meta", {}, {"ACCELERATE_TORCH_DEVICE": "meta"}, []),
        ("ACCELERATE_TORCH_DEVICE=cpu", {}, {"ACCELERATE_TORCH_DEVICE": "cpu"}, []),
        ("bad truth value", {}, {"ACCELERATE_USE_CPU": "maybe"}, []),
        ("torchrun use_cpu", {"use_cpu": True}, torchrun(), ["--use-cpu"]),
        ("torchrun ACCELERATE_USE_CPU", {}, {**torchrun(), "ACCELERATE_USE_CPU": "1"}, []),
        ("torchrun use_cpu gloo", {"use_cpu": True, "ddp_backend": "gloo"}, torchrun(),
         ["--use-cpu", "--backend", "gloo"]),
        ("torchrun use_cpu nccl", {"use_cpu": True, "ddp_backend": "nccl"}, torchrun(),
         ["--use-cpu", "--backend", "nccl"]),
        ("torchrun use_cpu mpi", {"use_cpu": True, "ddp_backend": "mpi"}, torchrun(),
         ["--use-cpu", "--backend", "mpi"]),
        ("malformed LOCAL_RANK", {"use_cpu": True}, {"LOCAL_RANK": "abc"}, ["--use-cpu"]),
        ("malformed WORLD_SIZE", {"use_cpu": True}, {"WORLD_SIZE": "4x"}, ["--use-cpu"]),
    ]
    for name, kwargs, env, args in single:
        theirs = oracle(training_oracle(**kwargs), env)
        ours = hwprobe(["--for", "training", *args], env)
        compare_training(name, ours, theirs)

    # Several processes, each started as its launcher would, rendezvous over loopback (gloo).
    def mpi_env(rank, port):
        return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2",
                "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port)}

    def pmi_over_ompi_env(rank, port):
        # PMI_* come first in Accelerate's lists; Open MPI's say the opposite rank.
        return {"PMI_RANK": str(rank), "PMI_SIZE": "2", "MPI_LOCALRANKID": str(rank),
                "OMPI_COMM_WORLD_RANK": str(1 - rank), "OMPI_COMM_WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}

    def torchrun_env(rank, port):
        return torchrun(rank, 2, port)

    def rendezvous(make_env):
        """Both ranks' oracle results. A loopback rendezvous that a network error broke (another
        test took the port, a reset under load) is not an answer of the oracle: retry it."""
        for _ in range(3):
            port = free_port()
            children = [in_child(training_oracle(use_cpu=True), make_env(r, port)) for r in range(2)]
            results = [collect(*child) for child in children]
            if not any(not r["ok"] and network_failure(r) for r in results):
                break
        return port, results

    for name, make_env in [("open mpi x2", mpi_env), ("pmi over open mpi x2", pmi_over_ompi_env),
                           ("torchrun x2", torchrun_env)]:
        port, results = rendezvous(make_env)
        for rank, theirs in enumerate(results):
            ours = hwprobe(["--for", "training", "--use-cpu"], make_env(rank, port))
            compare_training(f"{name} rank {rank}", ours, theirs)


def divergence_cases():
    # Trainer distributes a CPU run only with use_cpu / ACCELERATE_USE_CPU; backplane distributes
    # whatever a launcher started (selection.hpp). Both halves are asserted.
    env = torchrun()
    theirs = oracle(training_oracle(), env)
    ours = hwprobe(["--for", "training"], env)
    check("divergence torchrun without use_cpu", "oracle", (theirs["device"],
          theirs["distributed_type"], theirs["backend"]), ("cpu", "DistributedType.NO", None))
    check("divergence torchrun without use_cpu", "backplane",
          (ours["device"], ours["collective_backend"]), ("cpu:0", "gloo"))


# ---- Training order with availability monkeypatched (single process) ----------------------------

TOPOLOGY_DEVICE = {
    "cuda": {"type": "cuda", "vendor": "nvidia", "name": "NVIDIA A100-SXM4-80GB",
             "memory": "80GiB", "compute_capability": "8.0"},
    "xpu": {"type": "xpu", "vendor": "intel", "name": "Intel(R) Data Center GPU Max 1100",
            "memory": "48GiB"},
    "hpu": {"type": "hpu", "vendor": "intel", "name": "Intel Gaudi 2", "memory": "96GiB"},
    "mps": {"type": "mps", "vendor": "apple", "name": "Apple M2 Ultra", "memory": "192GiB"},
    "npu": {"type": "npu", "vendor": "huawei", "name": "Ascend 910B", "memory": "64GiB"},
    "mlu": {"type": "mlu", "vendor": "cambricon", "name": "MLU370-X8", "memory": "48GiB"},
    "musa": {"type": "musa", "vendor": "moore threads", "name": "MTT S4000", "memory": "48GiB"},
    "neuron": {"type": "neuron", "vendor": "aws", "name": "Trainium", "memory": "32GiB"},
}


def topology(types, folder, count=2):
    devices = []
    for t in types:
        for i in range(1 if t == "mps" else count):
            d = dict(TOPOLOGY_DEVICE[t])
            d["pci_bus_id"] = f"0000:{len(devices) + 16:02x}:00.0"
            devices.append(d)
    path = os.path.join(folder, "-".join(types) or "none") + ".json"
    with open(path, "w") as f:
        json.dump({"name": " + ".join(types), "devices": devices}, f)
    return path


class FakeDeviceModule:
    def __init__(self, count):
        self.count = count

    def set_device(self, device):
        pass

    def device_count(self):
        return self.count

    def current_device(self):
        return 0


def patch_training(types):
    def patch():
        import accelerate.state
        import transformers.training_args as ta
        ta.is_torch_mps_available = lambda *a, **k: "mps" in types
        ta.is_torch_xpu_available = lambda *a, **k: "xpu" in types
        ta.is_torch_hpu_available = lambda *a, **k: "hpu" in types
        ta.is_torch_mlu_available = lambda *a, **k: False
        ta.is_torch_musa_available = lambda *a, **k: False
        ta.is_torch_npu_available = lambda *a, **k: False
        ta.is_torch_neuron_available = lambda *a, **k: False
        ta.is_torch_tpu_available = lambda *a, **k: False
        torch.cuda.is_available = lambda: "cuda" in types
        torch.cuda.device_count = lambda: 2 if "cuda" in types else 0
        torch.cuda.set_device = lambda d: None
        torch.xpu.set_device = lambda d: None
        torch.hpu = FakeDeviceModule(2)
        accelerate.state.check_cuda_p2p_ib_support = lambda: True
    return patch


def training_order_cases(folder):
    # Device types PyTorch itself knows (torch.device("mlu") fails without torch_mlu).
    for types in [["cuda"], ["hpu", "cuda"], ["xpu", "hpu"], ["xpu", "cuda"], ["mps", "cuda"],
                  ["mps"], ["xpu"]]:
        path = topology(types, folder)
        theirs = oracle(training_oracle(patch=patch_training(types)), {})
        ours = hwprobe(["--for", "training", "--sim", path], {})
        compare_training("training order " + "+".join(types), ours, theirs)


# ---- pipeline(): the int -> device mapping, availability monkeypatched --------------------------

class DummyModel:
    device = torch.device("cpu")
    input_modalities = ()

    def to(self, device):
        return self

    def can_generate(self):
        return False


class DummyPipeline(pipeline_base.Pipeline):
    _pipeline_calls_generate = False

    def _sanitize_parameters(self, **kwargs):
        return {}, {}, {}

    def preprocess(self, inputs):
        return inputs

    def _forward(self, inputs):
        return inputs

    def postprocess(self, outputs):
        return outputs


class _DeviceType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.device)


class _NamedDevice:
    """A device of a type stock PyTorch does not know (mlu, musa, npu): just its name."""

    def __init__(self, name):
        self.name = name
        self.type = name.split(":")[0]

    def __str__(self):
        return self.name


class _Device(metaclass=_DeviceType):
    def __new__(cls, *args):
        try:
            return torch.device(*args)
        except RuntimeError:
            return _NamedDevice(str(args[0]))


class _TorchShim:
    """pipelines/base.py's `torch`, whose torch.device also names mlu, musa and npu devices."""

    device = _Device

    def __getattr__(self, name):
        return getattr(torch, name)


def pipeline_oracle(types, device):
    def run():
        pipeline_base.torch = _TorchShim()
        for t in ["mlu", "musa", "cuda", "npu", "hpu", "xpu", "mps"]:
            setattr(pipeline_base, f"is_torch_{t}_available",
                    (lambda present: lambda *a, **k: present)(t in types))
        pipeline_base._is_torch_distributed_initialized = lambda: False
        kwargs = {} if device is None else {"device": device}
        return {"device": str(DummyPipeline(model=DummyModel(), **kwargs).device)}
    return run


def pipeline_cases(folder):
    sets = [[], ["cuda"], ["mlu", "cuda"], ["musa", "cuda"], ["npu", "hpu"], ["hpu", "xpu"],
            ["xpu", "mps"], ["mps"], ["neuron"], ["cuda", "hpu"]]
    devices = [None, 0, 1, -1, "cpu", "xpu", "hpu:0"]
    for types in sets:
        path = topology(types, folder)
        for device in devices:
            name = f"pipeline {'+'.join(types) or 'cpu'} device={device!r}"
            theirs = oracle(pipeline_oracle(types, device), {})
            args = ["--for", "pipeline", "--sim", path]
            if device is not None:
                args.append(f"--device={device}")
            ours = hwprobe(args, {})
            if types == ["mps"] and device == 1:
                # Divergence: transformers builds "mps:1" without asking whether it exists (the
                # model's .to() fails later); backplane refuses a device that is not there.
                check(name, "oracle", theirs.get("device"), "mps:1")
                check(name, "backplane", "'mps:1' does not exist" in ours.get("error", ""), True)
                continue
            check(name, "succeeds", ours["ok"], theirs["ok"])
            if ours["ok"] and theirs["ok"]:
                check(name, "device", ours["device"], theirs["device"])
            elif not ours["ok"] and not theirs["ok"]:
                check(name, "error", ours_error(ours), theirs["error"])


# ---- from_pretrained's device_map argument (check_and_set_device_map) ---------------------------

def device_map_oracle(value):
    def run():
        result = check_and_set_device_map(value)
        if isinstance(result, str):
            return {"kind": "strategy", "value": result}
        target = result[""]
        return {"kind": "index" if isinstance(target, int) else "device", "value": str(target)}
    return run


def device_map_cases():
    sim = "h100x8"
    valid = ["auto", "balanced", "balanced_low_0", "sequential", "cpu", "meta", "cuda", "cuda:3"]
    invalid = ["foo", "", "CUDA", "Auto", "cuda:01", "cuda:-1", "cuda:", "disk", " cuda",
               "cuda:1:2", "balanced_low_1", "cuda:99999999999"]
    for value in valid + invalid:
        name = f"device_map={value!r}"
        theirs = oracle(device_map_oracle(value), {})
        # "--device-map=" cannot carry an empty value; a separate word cannot start with '-'.
        option = ["--device-map", value] if value == "" else [f"--device-map={value}"]
        ours = hwprobe(["--for", "inference", "--sim", sim, *option], {})
        check(name, "succeeds", ours["ok"], theirs["ok"])
        if not ours["ok"] and not theirs["ok"]:
            check(name, "error", ours_error(ours), theirs["error"])
        elif ours["ok"] and theirs["ok"]:
            if theirs["kind"] == "strategy":
                check(name, "strategy", "automatic placement" in ours["reason"], True)
            else:
                # check_and_set_device_map turns "cuda" into cuda:LOCAL_RANK (0 here).
                check(name, "device", ours["device"], theirs["value"])
    # Ints, through the Python int form and our text form.
    for value in [0, 3, -1, -5]:
        name = f"device_map={value}"
        theirs = oracle(device_map_oracle(value), {})
        ours = hwprobe(["--for", "inference", "--sim", sim, f"--device-map={value}"], {})
        check(name, "succeeds", ours["ok"], theirs["ok"])
        if ours["ok"] and theirs["ok"]:
            check(name, "index", ours["device"], f"cuda:{theirs['value']}")
        elif not ours["ok"] and not theirs["ok"]:
            check(name, "error", ours_error(ours), theirs["error"])
    # device_map="cuda" is cuda:LOCAL_RANK.
    for local_rank in ["2", "-1"]:
        name = f"device_map='cuda' LOCAL_RANK={local_rank}"
        env = {"LOCAL_RANK": local_rank}
        theirs = oracle(device_map_oracle("cuda"), env)
        ours = hwprobe(["--for", "inference", "--sim", sim, "--device-map=cuda"], env)
        check(name, "succeeds", ours["ok"], theirs["ok"])
        if ours["ok"] and theirs["ok"]:
            check(name, "device", ours["device"], theirs["value"])
        elif not ours["ok"] and not theirs["ok"]:
            check(name, "error", ours_error(ours), theirs["error"])


def main():
    global HWPROBE, HWPROBE_ENV
    parser = argparse.ArgumentParser()
    parser.add_argument("--hwprobe", required=True)
    parser.add_argument("--plugin-path", required=True)
    options = parser.parse_args()
    HWPROBE = options.hwprobe
    # Every plugin built: on a machine with accelerators both sides see them.
    HWPROBE_ENV = {"BACKPLANE_PLUGIN_PATH": options.plugin_path, "BACKPLANE_LOG": "error"}
    print(f"oracles: transformers {transformers.__version__}, accelerate {accelerate.__version__}, "
          f"torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        device_map_cases()
        training_cases()
        divergence_cases()
        training_order_cases(folder)
        pipeline_cases(folder)
    for failure in failures:
        print("MISMATCH", failure)
    print(f"{checks} checks, {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
