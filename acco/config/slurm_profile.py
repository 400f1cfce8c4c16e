"""What a launcher profile (conf/launcher/<name>.yaml) says beyond a job's shape, read the same way for
the generated sbatch scripts and for submitit:

    setup:          shell lines run before the ranks start   (`module load cuda`, `source venv/bin/activate`)
    sbatch_options: extra #SBATCH options, long form        (`--exclusive`, `--gres=nvme:1`, `--mem=0`; not
                                                             GPUs: acco asks for them, --gpus-per-node)
    env:            variables the job gets                  (`HF_HOME`: the submitting shell's value,
                                                             `NCCL_SOCKET_IFNAME=ib0`: that value)

An option acco sets itself from other keys (the shape, the time limit, the signal, the logs) is an
error naming the key to set instead, so a script never holds two different values of one option."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping

from .validate import ConfigError

# variables every job gets when they are set where it is submitted: where the data, models and caches
# are (the jobs read them when they compose their config and when they open the hub cache)
PASSTHROUGH_ENV = ("ACCO_CACHE", "ACCO_MODELS", "HF_HOME", "HF_HUB_CACHE")
PATH_VARS = ("ACCO_CACHE", "ACCO_MODELS", "HF_HOME", "HF_HUB_CACHE")  # made absolute: the job may start elsewhere
# Jobs run with the hub switched off: experiments/prepare_data.py fetches what they need on the login
# node beforehand, into the hub cache they read. A profile entry of the same name (`HF_HUB_OFFLINE=0`,
# for compute nodes that do reach the hub) replaces the default.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# What a failed job should leave in its log: NCCL's warnings (a timeout, a network error, the
# communicator set-up) and a Python traceback of every thread on a fatal signal (SIGSEGV, SIGABRT from
# NCCL's watchdog). A profile entry of the same name replaces one (`NCCL_DEBUG=INFO` for more).
DIAGNOSTIC_ENV = {"NCCL_DEBUG": "WARN", "PYTHONFAULTHANDLER": "1"}
# sbatch options acco writes from the run and the profile: the key to set instead
ACCO_SETS = {
    "job-name": "the run (its name is the job's)",
    "nodes": "layout or launcher.nodes",
    "ntasks-per-node": "layout or launcher.tasks_per_node",
    "ntasks": "layout or launcher.tasks_per_node",
    "gpus-per-node": "launcher.gpus_per_node",
    "cpus-per-task": "launcher.cpus_per_task",
    "time": "launcher.time_min",
    "signal": "launcher.signal_delay_s",
    "requeue": "launcher.max_requeues",
    "no-requeue": "launcher.max_requeues=0",
    "output": "launcher.log_dir",
    "error": "launcher.log_dir",
    "open-mode": "nothing (requeued jobs append to their log)",
    "array": "nothing (experiments/submit.py makes the arrays)",
}
# options the profile also has a key for: one or the other
PROFILE_KEYS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "constraint": "constraint",
    "mem": "mem_gb",
}
_OPTION = re.compile(r"--([A-Za-z][A-Za-z0-9-]*)(?:=(.*))?$", re.S)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def sbatch_options(profile: dict) -> list[tuple[str, str | None]]:
    """launcher.sbatch_options as (option, value or None for a flag); bad ones raise ConfigError."""
    out: list[tuple[str, str | None]] = []
    for raw in profile.get("sbatch_options") or []:
        text = str(raw).strip()
        match = _OPTION.match(text if text.startswith("--") else f"--{text}")
        if not match or "\n" in text:
            raise ConfigError(
                f"launcher.sbatch_options: {raw!r} is not an sbatch option; write the long form, "
                f"e.g. --reservation=mine or --exclusive"
            )
        key, value = match.group(1), match.group(2)
        if key in ACCO_SETS:
            raise ConfigError(f"launcher.sbatch_options: --{key} is set by acco; set {ACCO_SETS[key]} instead")
        own = PROFILE_KEYS.get(key)
        if own and profile.get(own) not in (None, ""):
            raise ConfigError(
                f"launcher.sbatch_options has --{key} and launcher.{own}={profile[own]} says it too; keep one"
            )
        if any(key == k for k, _ in out):
            raise ConfigError(f"launcher.sbatch_options has --{key} twice; keep one")
        out.append((key, value))
    return out


def job_env(
    profile: dict, environ: Mapping[str, str] | None = None, repo_root: str | None = None
) -> list[tuple[str, str]]:
    """(name, value) of every variable the job exports: OFFLINE_ENV, DIAGNOSTIC_ENV, PASSTHROUGH_ENV
    and the profile's `NAME` entries when set in `environ` (default os.environ), the profile's
    `NAME=value` entries as given."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    out: dict[str, str] = {**OFFLINE_ENV, **DIAGNOSTIC_ENV}
    entries = [*PASSTHROUGH_ENV, *(profile.get("env") or [])]
    for entry in entries:
        name, eq, value = str(entry).partition("=")
        name = name.strip()
        if not _NAME.match(name):
            raise ConfigError(
                f"launcher.env: {entry!r} is not a variable name; write NAME (passed on) or NAME=value (set)"
            )
        if not eq:
            if not env.get(name):
                continue
            value = env[name]
        if name in PATH_VARS and value:
            value = os.path.normpath(os.path.join(repo_root or os.getcwd(), os.path.expanduser(value)))
        out[name] = value
    return list(out.items())


def whole_node_options(profile: dict, gpus_per_node: int) -> list[tuple[str, str | None]]:
    """The options that ask for whole nodes for a GPU job (launcher.whole_nodes, default true):
    --exclusive, and --mem=0 (all of the node's memory) unless launcher.mem_gb says how much; none
    the profile's sbatch_options already give. None for a CPU job (the local cluster's virtual nodes
    share one machine)."""
    if not gpus_per_node or profile.get("whole_nodes") is False:
        return []
    given = {key for key, _ in sbatch_options(profile)}
    out: list[tuple[str, str | None]] = []
    if "exclusive" not in given:
        out.append(("exclusive", None))
    if "mem" not in given and not profile.get("mem_gb"):
        out.append(("mem", "0"))
    return out


def setup_lines(profile: dict) -> list[str]:
    """launcher.setup as shell lines (one entry may hold several)."""
    lines = []
    for entry in profile.get("setup") or []:
        if not isinstance(entry, str):
            raise ConfigError(f"launcher.setup: {entry!r} is not a shell line; write e.g. 'module load cuda'")
        lines += str(entry).splitlines()
    return lines


def check_profile(profile: dict) -> None:
    """Everything above, and the signal against the time limit, up front (acco.config.validate)."""
    sbatch_options(profile)
    job_env(profile, environ={})
    setup_lines(profile)
    delay, minutes = profile.get("signal_delay_s"), profile.get("time_min")
    if delay is not None and (not isinstance(delay, int) or delay < 1 or delay > 65535):
        raise ConfigError(f"launcher.signal_delay_s must be 1..65535 seconds or null, got {delay!r}")
    if delay is not None and minutes and delay >= int(minutes) * 60:
        raise ConfigError(
            f"launcher.signal_delay_s={delay} is not below the time limit launcher.time_min={minutes} "
            f"({int(minutes) * 60} s): the job would be signalled at its start; raise time_min"
        )
    requeues = profile.get("max_requeues")
    if requeues is not None and (not isinstance(requeues, int) or requeues < 0):
        raise ConfigError(f"launcher.max_requeues must be 0 or more, got {requeues!r}")
    speed = profile.get("checkpoint_write_gb_s")
    if speed is not None and not (isinstance(speed, (int, float)) and speed > 0):
        raise ConfigError(f"launcher.checkpoint_write_gb_s must be a positive number (GB/s), got {speed!r}")


@contextlib.contextmanager
def as_the_job_sees_the_hub(profile: dict):
    """Inside: the hub switches (OFFLINE_ENV) and hub cache variables as the job will have them, so a
    check made before submission finds what the job will find: with the hub
    off, a hub id passes only when its snapshot is in the prepared cache."""
    names = (*OFFLINE_ENV, "HF_HOME", "HF_HUB_CACHE")
    wanted = {k: v for k, v in job_env(profile) if k in names}
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
