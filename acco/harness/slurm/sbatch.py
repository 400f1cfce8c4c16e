"""Readable sbatch scripts, one per run, in the spirit of the paper's appendix listing:

    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=4
    #SBATCH --gpus-per-node=4
    ...
    srun python experiments/train.py experiment=fig8/paper method=acco layout=2x4 out_dir='...'

Each task srun starts is one rank (acco.harness.launch reads SLURM_PROCID / SLURM_STEP_NUM_TASKS /
SLURM_LOCALID). The scripts are plain text that `sbatch` accepts unchanged; experiments/make_sbatch.py
writes them (`make sbatch-<experiment>`)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Mapping

from ...config.schema import typed
from ...config.slurm_profile import job_env, sbatch_options, setup_lines, whole_node_options
from ...runtime.files import PREEMPTED_EXIT

# a profile's keys the scripts read, with the values used when a profile leaves one out
DEFAULT_PROFILE: dict[str, object] = {
    "partition": None,
    "account": None,
    "qos": None,
    "constraint": None,
    "time_min": 60,
    "mem_gb": None,
    "cpus_per_task": 1,
    "nodes": None,
    "tasks_per_node": None,
    "gpus_per_node": None,
    "signal_delay_s": None,  # null: acco.harness.run.plan.signal_delay
    "max_requeues": 3,
    "log_dir": None,
    "setup": [],
    "sbatch_options": [],
    "env": [],
    "checkpoint_write_gb_s": 1.0,
    "whole_nodes": True,
}
# overrides not passed on to the train command as given: the run's folder is (absolute, quoted). The launcher
# profile is: the ranks size their step timeout, their checks and their GPU preset from it
NOT_PASSED = ("out_dir",)
JOB_NAME_MAX = 120


def script_shape(cfg: dict, profile: dict) -> dict:
    """nodes, tasks per node (one rank per task, one GPU per task on GPU runs), GPUs per node."""
    from ...config.validate import parse_layout
    from .dispatch import job_shape

    if cfg.get("layout"):
        nodes, per_node = parse_layout(cfg["layout"])
        world = nodes * per_node
    else:
        world = int(cfg.get("world_size") or 1)
    return dict(job_shape(cfg, world, profile), world_size=world)


def job_name(cfg: dict, overrides: list[str]) -> str:
    """acco-<experiment>-<run name>, with only characters that are safe in file names and in
    #SBATCH lines; long names are cut and end with a hash of the full one."""
    from ...config.experiments import run_name

    exp = cfg.get("experiment") or {}
    parts = ["acco", str(exp["id"])] if exp.get("id") else ["acco"]
    # an experiment's run: its folder's name (a run list's label)
    run = os.path.basename(os.path.normpath(cfg["out_dir"])) if exp.get("id") and cfg.get("out_dir") else ""
    name = re.sub(r"[^A-Za-z0-9._=+-]", "-", "-".join([*parts, run or run_name(cfg, overrides)]))
    if len(name) > JOB_NAME_MAX:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: JOB_NAME_MAX - 9]}-{digest}"
    return name


def shell_quote(arg: str) -> str:
    """shlex.quote, but an argument holding single quotes (out_dir='...') and nothing special inside
    double quotes is written "like this" rather than with shlex's '"'"' splices."""
    quoted = shlex.quote(arg)
    if "'" in arg and not re.search(r'[$`"\\!\n]', arg):
        return f'"{arg}"'
    return quoted


def hydra_quote(value: str) -> str:
    """A string as a quoted value of Hydra's override grammar (run folder names hold '=', which the
    grammar rejects unquoted)."""
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise ValueError(f"cannot quote {value!r} for Hydra: it holds both kinds of quotes")


def _directive_value(value) -> str:
    text = str(value)
    return f'"{text}"' if re.search(r"\s", text) else text


def _time(minutes) -> str:
    minutes = int(minutes)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"


def _abs(path: str, repo_root: str) -> str:
    return os.path.normpath(os.path.join(repo_root, os.path.expanduser(str(path))))


def log_dir(cfg: dict, profile: dict, repo_root: str) -> str:
    """Where the job's stdout/stderr go (absolute): the profile's log_dir, or <results_root>/.slurm."""
    root = _abs(cfg.get("results_root") or "results", repo_root)
    configured = profile.get("log_dir")
    if isinstance(configured, str) and configured:
        configured = configured.replace("${results_root}", root)
        if "${" not in configured:
            return _abs(configured, repo_root)
    return os.path.join(root, ".slurm")


def train_args(overrides: list[str], cfg: dict, repo_root: str) -> list[str]:
    """What srun passes to the train command: the overrides (the launcher profile's among them: the
    ranks read it) less out_dir, and the run's own out_dir, absolute and quoted for Hydra."""
    args = []
    for ov in overrides:
        key = ov.split("=", 1)[0].lstrip("+~")
        if key.split(".")[0].split("@")[0] in NOT_PASSED:
            continue
        args.append(ov)
    if "resume" in cfg and not any(a.lstrip("+").startswith("resume=") for a in args):
        args.append("resume=auto")  # a requeued job continues from the run's checkpoint
    args.append(f"out_dir={hydra_quote(_abs(cfg['out_dir'], repo_root))}")
    return args


def job_python(profile: dict, python: str | None) -> tuple[str, str]:
    """(the Python the job runs, why): the one asked for (make_sbatch --python); else `python` from
    the PATH the profile's setup lines make (they activate the cluster's environment: the
    generating machine's .venv is not the compute nodes'); else, without setup lines, this one."""
    if python:
        return python, "make_sbatch.py --python"
    if setup_lines(profile):
        return "python", "the one launcher.setup puts on PATH"
    import sys

    return os.path.abspath(sys.executable), "the Python that wrote this script (launcher.setup: none)"


def sbatch_script(
    overrides: list[str],
    cfg: dict,
    profile: dict,
    repo_root: str,
    python: str | None,
    environ: dict | None = None,
    regenerate: str | None = None,
    unchecked: bool = False,
) -> str:
    """The sbatch script of one run. `cfg` is acco.config.experiments.compose(overrides); `profile` a cluster
    profile (a composed config's `launcher`; DEFAULT_PROFILE fills what it leaves out); `environ` (default
    os.environ) the environment whose variables are passed on (job_env);
    `regenerate` the command that writes this script again; `python` the Python the job runs (None:
    job_python's choice); `unchecked`: the data and disk were not checked (the header says so)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    profile = {**DEFAULT_PROFILE, **(profile or {})}
    repo_root = os.path.abspath(repo_root)
    exp = cfg.get("experiment") or {}
    scale = cfg.get("scale", "cpu")
    shape = script_shape(cfg, profile)
    name = job_name(cfg, overrides)
    logs = log_dir(cfg, profile, repo_root)
    out_dir = _abs(cfg["out_dir"], repo_root)
    from ...config.experiments import run_name

    run = run_name(cfg, overrides)
    if regenerate is None:
        rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in ("experiment", "scale")]
        regenerate = " ".join(
            [
                "python experiments/make_sbatch.py",
                *([str(exp["id"]), "--scale", scale] if exp.get("id") else []),
                *map(shell_quote, rest),
            ]
        )

    lines = ["#!/bin/bash"]
    if exp.get("id"):
        lines.append(
            f"# acco: experiment {exp['id']}" + (f" ({exp['title']})" if exp.get("title") else "") + f", scale {scale}"
        )
    lines += [
        f"# run:        {run} -- {shape['nodes']} node(s) x {shape['tasks_per_node']} task(s) = "
        f"{shape['world_size']} ranks, device {cfg.get('device', 'auto')}",
        f"# results:    {out_dir}",
        f"# logs:       {logs}/{name}-<job id>.out/.err (the folder must exist before sbatch)",
        f"# regenerate: {regenerate}",
        "# submit:     sbatch <this file>",
    ]
    python, why = job_python(profile, python)
    lines.append(f"# python:     {python} ({why})")
    if unchecked:
        lines.append(
            "# NOT CHECKED: the data, tokenizer, model and disk of this run (make_sbatch.py --no-data-checks); "
            "prepare them first: python experiments/prepare_data.py "
            + " ".join(shell_quote(o) for o in overrides if o.split("=", 1)[0].lstrip("+") != "results_root")
        )
    model = cfg.get("model") or {}
    dep = model.get("pretrained_from")
    if dep and not model.get("pretrained_path"):
        from ...config.experiments import dependency_out_dir

        needs = " ".join([f"experiment={dep['experiment']}/{dep.get('scale', 'cpu')}", *(dep.get("overrides") or [])])
        where = dependency_out_dir(dep, (cfg.get("data") or {}).get("cache_dir") or "")
        lines.append(
            f"# needs:      the saved model of `{needs}` in {where}/model (train.py trains it there "
            "before a run of this experiment starts; under srun it is not trained automatically)"
        )

    directives = [("job-name", name), ("nodes", shape["nodes"]), ("ntasks-per-node", shape["tasks_per_node"])]
    if shape["gpus_per_node"]:
        directives.append(("gpus-per-node", shape["gpus_per_node"]))
    directives.append(("cpus-per-task", int(profile.get("cpus_per_task") or 1)))
    if profile.get("mem_gb"):
        directives.append(("mem", f"{profile['mem_gb']}G"))
    if profile.get("time_min"):
        directives.append(("time", _time(profile["time_min"])))
    for key in ("partition", "account", "qos", "constraint"):
        if profile.get(key):
            directives.append((key, profile[key]))
    from ..run.plan import signal_delay

    requeues = int(profile["max_requeues"]) if profile.get("max_requeues") is not None else 3
    directives += [
        ("output", f"{logs}/{name}-%j.out"),
        ("error", f"{logs}/{name}-%j.err"),
        ("open-mode", "append"),  # a requeued job (same id) adds to its log instead of replacing it
        ("signal", f"USR1@{signal_delay(typed(cfg), profile)}"),
        ("requeue", None) if requeues else ("no-requeue", None),
        *sbatch_options(profile),  # the profile's own (launcher.sbatch_options)
        *whole_node_options(profile, shape["gpus_per_node"]),  # GPU jobs: whole nodes (launcher.whole_nodes)
    ]
    lines += [
        f"#SBATCH --{key}" if value is None else f"#SBATCH --{key}={_directive_value(value)}"
        for key, value in directives
    ]

    lines += ["", "set -euo pipefail", f"cd {shell_quote(repo_root)}"]
    lines += [f"export {var}={shell_quote(value)}" for var, value in job_env(profile, env, repo_root)]
    setup = setup_lines(profile)
    if setup:  # launcher.setup; activation scripts often read unset variables
        lines += ["# launcher.setup", "set +u", *setup, "set -u"]
    args = [f"{shell_quote(python)} experiments/train.py", *map(shell_quote, train_args(overrides, cfg, repo_root))]
    # one dead task ends the whole step (its peers would wait in a collective); the CPUs per task
    # again, as several Slurm versions do not pass the batch job's --cpus-per-task on to srun
    srun = f"srun --kill-on-bad-exit=1 --cpus-per-task={int(profile.get('cpus_per_task') or 1)}"
    lines += [
        "",
        "code=0",
        srun + " \\\n    " + " \\\n    ".join(_wrap(args)) + " || code=$?",
        f"# {PREEMPTED_EXIT}: Slurm's USR1 (time limit near) made the ranks checkpoint and stop (rank 0's status; the",
        "# others exit 0 first, so srun reports it); requeue, and the restarted job continues from the",
        "# checkpoint (resume=auto), at most launcher.max_requeues times",
        f'if [ "$code" -eq {PREEMPTED_EXIT} ]; then',
        f'  if [ "${{SLURM_RESTART_COUNT:-0}}" -lt {requeues} ]; then scontrol requeue "$SLURM_JOB_ID"; exit 0; fi',
        f'  echo "acco: not requeued: {requeues} requeue(s) done (launcher.max_requeues={requeues}); the run '
        f'continues from its checkpoint with resume=auto" >&2',
        "fi",
        "# above 128: a task ended by a signal (killed outright, or by the OOM killer): a failure, not a time limit",
        'if [ "$code" -gt 128 ]; then',
        "  echo \"acco: a rank was ended by signal $((code - 128)) (srun's lines above name the task and node); not "
        'requeued: find the cause, then submit again: the run continues from its last checkpoint (resume=auto)" >&2',
        "fi",
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def _wrap(args: list[str], width: int = 96) -> list[str]:
    """Arguments grouped into lines of at most ~width characters (joined with ' \\' newlines)."""
    out, line = [], ""
    for arg in args:
        if line and len(line) + 1 + len(arg) > width:
            out.append(line)
            line = arg
        else:
            line = f"{line} {arg}" if line else arg
    if line:
        out.append(line)
    return out
