"""Distributed start, three ways with the same worker code:

- local: the entry point spawns `world_size` worker processes on this machine;
- torchrun: RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT are already set;
- srun: rank, world size and local rank from SLURM_PROCID / SLURM_STEP_NUM_TASKS / SLURM_LOCALID,
  the master is the first node of the step's node list, the port derived from the job id."""

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


def external_env(environ=os.environ) -> DistEnv | None:
    """The distributed environment set up by torchrun or srun, or None when started by hand."""
    if "RANK" in environ and "WORLD_SIZE" in environ and "MASTER_ADDR" in environ:
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
            int(re.match(r"\d+", local_world).group()),
            environ.get("MASTER_ADDR", nodes[0]),
            int(environ.get("MASTER_PORT") or slurm_master_port(environ)),
            "slurm",
        )
    return None


def slurm_master_port(environ=os.environ) -> int:
    """The rendezvous port of a Slurm job, the same in every task: from the job id (unique per array
    task, so jobs running side by side get different ports) and below Linux's default ephemeral
    range (32768-60999), so no outgoing connection of another job on the node holds it (seen on
    the local cluster: a port drawn inside that range was taken: EADDRINUSE)."""
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
    return "spawn" if pick_device(device, 0).type == "cuda" else "fork"


def pick_device(requested: str, local_rank: int) -> torch.device:
    if requested == "cuda" or (requested == "auto" and torch.cuda.is_available()):
        return torch.device("cuda", local_rank % max(1, torch.cuda.device_count()))
    return torch.device("cpu")


def init_process_group(env: DistEnv, device: torch.device, timeout_s: float) -> str:
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    return backend


def cpu_threads(requested, local_world_size: int) -> int:
    """Intra-op threads per worker: the cores this process may run on (a Slurm or cgroup CPU set,
    not the whole machine) shared out among this machine's workers."""
    if requested not in (None, "auto"):
        return int(requested)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, local_world_size))
