"""Launching a run's ranks (the harness): the distributed start, three ways with the same worker code:

- local: the entry point spawns `world_size` worker processes on this machine;
- torchrun: RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT are already set;
- srun: rank, world size and local rank from SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID,
  the master is the first node of the step's node list, the port derived from the job id.

The functions here that read the environment take `environ=None` and look up os.environ when
called, never as a default bound at import: `datasets`' map(num_proc=...) rebinds os.environ to a
copy, after which a bound default reads (and writes) a stale environment. The settings of the training
process group that a rank's own code needs (acco.Overlapped's too) are the library's:
acco/runtime/process_group.py."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from ..runtime.process_group import FLIGHT_RECORDER_FILE, deterministic_cuda


@dataclass
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int
    source: str  # local | torchrun | slurm

    def export(self) -> None:
        os.environ.update(
            {
                "RANK": str(self.rank),
                "WORLD_SIZE": str(self.world_size),
                "LOCAL_RANK": str(self.local_rank),
                "LOCAL_WORLD_SIZE": str(self.local_world_size),
                "MASTER_ADDR": self.master_addr,
                "MASTER_PORT": str(self.master_port),
            }
        )

    def as_dict(self) -> dict:
        return asdict(self)


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compressed host list ('n[1-3,7],gpu05') -> ['n1', 'n2', 'n3', 'n7', 'gpu05']."""
    if shutil.which("scontrol"):
        try:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10, check=True
            ).stdout.split()
            if out:
                return out
        except (subprocess.SubprocessError, OSError):
            pass
    hosts = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", nodelist):
        m = re.fullmatch(r"(.*)\[(.*)\](.*)", part)
        if not m:
            hosts.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if hi:
                for i in range(int(lo), int(hi) + 1):
                    hosts.append(f"{prefix}{str(i).zfill(len(lo))}{suffix}")
            else:
                hosts.append(f"{prefix}{lo}{suffix}")
    return hosts


def _leading_count(text: str) -> str:
    """Slurm's tasks per node, "4(x2)": the 4."""
    match = re.match(r"\d+", text)
    if match is None:
        raise ValueError(f"no task count in {text!r}")
    return match.group()


def external_env(environ=None) -> DistEnv | None:
    """The distributed environment set up by torchrun or srun, or None when started by hand."""
    environ = os.environ if environ is None else environ
    # torchrun's variables (or submitit's, exported from Slurm's); inside a Slurm step only when
    # torchrun set them (srun torchrun ...) or they agree with Slurm's: a RANK left in the
    # environment by something else does not override SLURM_PROCID
    torchrun = (
        "TORCHELASTIC_RUN_ID" in environ
        or "SLURM_PROCID" not in environ
        or environ.get("RANK") == environ["SLURM_PROCID"]
    )
    if torchrun and "RANK" in environ and "WORLD_SIZE" in environ and "MASTER_ADDR" in environ:
        world = int(environ["WORLD_SIZE"])
        return DistEnv(
            int(environ["RANK"]),
            world,
            int(environ.get("LOCAL_RANK", 0)),
            int(environ.get("LOCAL_WORLD_SIZE", world)),
            environ["MASTER_ADDR"],
            int(environ.get("MASTER_PORT", 29500)),
            "torchrun",
        )
    # SLURM_STEP_ID is set for srun steps, not for the batch script itself
    tasks = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS")
    if "SLURM_PROCID" in environ and "SLURM_STEP_ID" in environ and tasks and int(tasks) > 1:
        nodes = expand_nodelist(environ.get("SLURM_STEP_NODELIST") or environ["SLURM_JOB_NODELIST"])
        local_world = environ.get("SLURM_STEP_TASKS_PER_NODE") or environ.get("SLURM_NTASKS_PER_NODE") or "1"
        return DistEnv(
            int(environ["SLURM_PROCID"]),
            int(tasks),
            int(environ.get("SLURM_LOCALID", 0)),
            int(_leading_count(local_world)),
            environ.get("MASTER_ADDR", nodes[0]),
            int(environ.get("MASTER_PORT") or slurm_master_port(environ)),
            "slurm",
        )
    return None


def slurm_master_port(environ=None) -> int:
    """The rendezvous port of a Slurm job, the same in every task: from the job id (unique per array
    task, so jobs running side by side get different ports) and below Linux's default ephemeral
    range (32768-60999), so no outgoing connection of another job on the node holds it (seen on
    the local cluster: a port drawn inside that range was taken: EADDRINUSE)."""
    environ = os.environ if environ is None else environ
    return 20000 + int(environ.get("SLURM_JOB_ID") or 0) % 12768


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_envs(world_size: int) -> list[DistEnv]:
    port = free_port()
    return [DistEnv(r, world_size, r, world_size, "127.0.0.1", port, "local") for r in range(world_size)]


START_METHODS = ("auto", "fork", "spawn", "forkserver")


def worker_start_method(requested: str, device: str) -> str:
    """How the local launcher starts its workers. auto: fork where they compute on CPU (the launcher
    has imported torch, transformers and the task once, so a worker starts in a moment instead of
    spending ~6 s of CPU importing them again, on cores the other workers need too); spawn where
    they use CUDA (a forked child cannot use CUDA once the parent has touched it)."""
    if requested != "auto":
        return requested
    uses_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    return "spawn" if uses_cuda else "fork"


def pick_device(
    requested: str, local_rank: int, local_world_size: int | None = None, shared: bool = False
) -> torch.device:
    """One GPU per rank: the rank's local rank is its device (acco.config.validate refuses more
    ranks on a node than GPUs before any worker starts; this is the last guard). `shared`
    (dist.backend=gloo): ranks beyond the GPUs take them in turn."""
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        count = torch.cuda.device_count()
        if shared and count:
            return torch.device("cuda", local_rank % count)
        local_world = local_rank + 1 if local_world_size is None else local_world_size
        problem = gpu_shortage(local_world, count)
        if problem:
            raise RuntimeError(problem)
        # a task bound to GPUs of its own (gpu_shortage) sees only those: it takes the first
        return torch.device("cuda", local_rank if count >= local_world else 0)
    return torch.device("cpu")


def gpu_shortage(local_world_size: int, visible_gpus: int, environ=None) -> str | None:
    """Why `local_world_size` ranks on this node cannot each have a GPU of their own, or None.
    Two ranks on one GPU make NCCL fail ("Duplicate GPU detected") or hang. Where Slurm bound a
    share of the node's GPUs to each task (--gpus-per-task, --gpu-bind: each task sees only its
    own, so fewer than the node's tasks), rank i uses its first visible one."""
    if visible_gpus >= local_world_size:
        return None
    environ = os.environ if environ is None else environ
    step_gpus = environ.get("SLURM_STEP_GPUS") or environ.get("SLURM_JOB_GPUS") or ""
    node_gpus = len([g for g in step_gpus.split(",") if g])
    if visible_gpus >= 1 and (environ.get("SLURM_GPUS_PER_TASK") or visible_gpus * local_world_size <= node_gpus):
        return None
    return (
        f"{local_world_size} ranks on this node but {visible_gpus} GPU(s) visible: two ranks on one GPU "
        f"make NCCL fail or hang; run at most {visible_gpus} ranks per node (world_size/layout), or device=cpu"
    )


# What NCCL does with a collective that outlives its timeout. The host waits for a sync's device
# work at most dist.step_timeout_s (acco.engine.device_clock.wait_for: once per sync, where it
# ends) and raises on the waiting thread, so the run's own failure path runs and names it. NCCL's
# watchdog stays on behind it, with a longer timeout (acco.runtime.process_group.Timeouts): error handling 2
# (CleanUpOnly) lets it abort the timed-out communicators (freeing a peer stuck in a kernel)
# without killing the process, and its flight recorder keeps the last collectives and dumps them
# on a timeout (<out_dir>/nccl_trace_rank_<r>). Not TORCH_NCCL_BLOCKING_WAIT: with it ProcessGroupNCCL
# makes no watchdog (no abort, no dump) and every collective's wait polls the host in 1 ms sleeps.
# torch 2.11-2.13 read these names (and the older ones without TORCH_, which a user may still set:
# theirs wins).
NCCL_ERROR_HANDLING = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
}
NCCL_DUMP_FILE = FLIGHT_RECORDER_FILE


# the communication thread's stream allocates beside the compute stream: expandable segments keep
# the two streams' freed blocks from fragmenting the caching allocator's pool (a 7B run is tight)
ALLOCATOR_SETTING = "expandable_segments:True"


def nccl_error_handling(environ=None, dump_dir: str | None = None) -> None:
    """Before any NCCL process group is created (ProcessGroupNCCL reads them at construction).
    `dump_dir`: where the flight recorder's dumps go (the run's folder)."""
    environ = os.environ if environ is None else environ
    for name, value in NCCL_ERROR_HANDLING.items():
        if name not in environ and name.removeprefix("TORCH_") not in environ:
            environ[name] = value
    if dump_dir and NCCL_DUMP_FILE not in environ:
        environ[NCCL_DUMP_FILE] = os.path.join(dump_dir, "nccl_trace_rank_")


def cuda_allocator_settings(environ=None) -> None:
    """Before CUDA's caching allocator is first used in this process (it reads its settings once);
    a user's own PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF is kept as it is."""
    environ = os.environ if environ is None else environ
    if "PYTORCH_ALLOC_CONF" not in environ and "PYTORCH_CUDA_ALLOC_CONF" not in environ:
        environ["PYTORCH_CUDA_ALLOC_CONF"] = ALLOCATOR_SETTING


def init_process_group(
    env: DistEnv,
    device: torch.device,
    timeout_s: float,
    backend: str = "auto",
    deterministic: bool = False,
    dump_dir: str | None = None,
) -> str:
    """dist.backend: auto is NCCL on CUDA, gloo on CPU; gloo on CUDA runs the training
    collectives through host copies. `deterministic`
    (train.deterministic) on CUDA: deterministic kernels set before the first group."""
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        if deterministic:
            deterministic_cuda()
        nccl_error_handling(dump_dir=dump_dir)
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    return backend


def usable_cores() -> int:
    """The cores this process may run on (a Slurm or cgroup CPU set, not the whole machine)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_threads(requested, local_world_size: int) -> int:
    """Intra-op threads per worker: the cores this process may run on shared out among this
    machine's workers."""
    if requested not in (None, "auto"):
        return int(requested)
    return max(1, usable_cores() // max(1, local_world_size))
