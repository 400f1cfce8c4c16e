#!/usr/bin/env python
"""Write one sbatch script per run of a paper experiment, plus a submit_all.sh:

    python experiments/make_sbatch.py fig8 --scale paper          # slurm/generated/fig8/paper/*.sbatch
    python experiments/make_sbatch.py fig5 --scale cpu train.steps=30 --out /tmp/jobs
    python experiments/make_sbatch.py fig8 --scale paper launcher=slurm launcher.partition=gpu
    make sbatch-fig8 SCALE=paper
    sbatch slurm/generated/fig8/paper/acco_layout=2x4.sbatch      # one run
    slurm/generated/fig8/paper/submit_all.sh                      # all of them

The runs are the experiment's list (`experiment.runs` in conf/experiment/<id>/<scale>.yaml). Extra
overrides apply to every run, except that an override of a key the run list itself varies picks the
runs with that value (`method=acco` keeps the ACCO runs, `layout=2x4` the 2x4 ones).

The cluster profile (partition, account, time, CPUs, setup lines, extra #SBATCH options, environment,
...) is conf/launcher/<profile>.yaml: `launcher=NAME` picks it (default: slurm_local at --scale cpu when
it exists — the local test cluster of slurm/local-cluster/ — else slurm), `launcher.KEY=VALUE` changes
one setting. Each run passes submit.py's checks first (memory fit against the profile's gpu_mem_gb,
data present, disk: acco/harness/slurm/checks.py). Bad input (an unknown key, a run that would not fit):
one line `error: ...` and exit code 2, and no script is written. `--no-data-checks` writes them
before the data, tokenizer, model and disk space are on this machine (to read them first); the
memory fit is still checked, and each script's header says what was not.

The job runs `python` from the PATH the profile's setup lines make (they activate the cluster's
environment), or, without setup lines, the Python running this; `--python PATH` names another.
"""

import argparse
import os
import sys

import yaml

from acco.config.experiments import (
    CONF_DIR,
    SCALES,
    compose,
    expand_runs,
    experiment_ids,
    results_root_override,
    run_list_keys,
    scales_of,
    variant_root,
)
from acco.harness.slurm.checks import script_problem
from acco.harness.slurm.sbatch import log_dir, sbatch_script, shell_quote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _value(override: str):
    text = override.split("=", 1)[1] if "=" in override else ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def select_runs(runs: list[list[str]], extra: list[str]) -> list[list[str]]:
    """Each run's overrides plus the extra ones; an extra override of a key the run sets keeps the
    run only when the values agree. Identical runs are kept once."""
    out = []
    for run in runs:
        own = {_key(o): _value(o) for o in run}
        if any(_key(o) in own and own[_key(o)] != _value(o) for o in extra):
            continue
        merged = run + [o for o in extra if _key(o) not in own]
        if merged not in out:
            out.append(merged)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", help="an experiment id (conf/experiment/<id>/), e.g. fig8")
    parser.add_argument("--scale", default="cpu", help=f"one of {', '.join(SCALES)} (default: cpu)")
    parser.add_argument(
        "overrides", nargs="*", help="launcher=PROFILE, launcher.KEY=VALUE, and training overrides (key=value)"
    )
    parser.add_argument(
        "--out",
        default=os.path.join("slurm", "generated"),
        help="folder for <experiment>/<scale>/*.sbatch (default: slurm/generated)",
    )
    parser.add_argument(
        "--python",
        default=None,
        help="the Python the jobs run (default: `python` from the PATH the profile's setup lines make, e.g. "
        "`source /shared/acco/.venv/bin/activate`; without setup lines, the one running this)",
    )
    parser.add_argument(
        "--no-data-checks",
        action="store_true",
        help="write the scripts without checking that the data, tokenizer, model and disk space are there "
        "(to read them first, on any machine); each script's header says it was not checked",
    )
    args = parser.parse_intermixed_args(argv)

    experiments = experiment_ids()
    if args.experiment not in experiments:
        fail(f"unknown experiment {args.experiment!r}; choose one of: {', '.join(experiments)}")
    scale, profile_args, extra = args.scale, [], []
    for ov in args.overrides:
        if "=" not in ov:
            fail(f"{ov!r} is not an override (key=value)")
        key = _key(ov)
        if key == "scale":
            fail(f"the scale is an option now: --scale {ov.split('=', 1)[1]}")
        elif key == "experiment":
            fail(f"the experiment is the first argument ({args.experiment}); drop {ov}")
        elif key == "launcher" or key.startswith("launcher."):
            profile_args.append(ov)
        else:
            extra.append(ov)
    if scale not in SCALES:
        fail(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if not any(_key(o) == "launcher" for o in profile_args):
        local = os.path.join(CONF_DIR, "launcher", "slurm_local.yaml")
        default = "slurm_local" if scale in ("cpu", "rehearsal") and os.path.exists(local) else "slurm"
        profile_args.insert(0, f"launcher={default}")
    from acco.config.validate import ConfigError, check_overrides
    from acco.harness.run.validate import validate

    try:  # an unknown key (launcher.foo=1, train.stepz=5) or profile: one line, before anything is composed
        check_overrides(profile_args + extra, CONF_DIR)
    except ConfigError as exc:
        fail(str(exc).strip().splitlines()[0])

    if scale not in scales_of(args.experiment):
        fail(
            f"experiment {args.experiment} has no scale {scale!r}; choose one of: "
            f"{', '.join(scales_of(args.experiment))}"
        )
    base = [f"experiment={args.experiment}/{scale}"]
    try:
        exp = compose(base)["experiment"]
    except Exception as exc:
        fail(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
    runs = expand_runs(exp)
    if not runs:
        has = [
            s
            for s in scales_of(args.experiment)
            if expand_runs(compose([f"experiment={args.experiment}/{s}"])["experiment"])
        ]
        if has:
            fail(f"experiment {exp['id']} has no runs at scale {scale}; try --scale {has[0]}")
        fail(
            f"experiment {exp['id']} ({exp.get('title')}) has no training runs of its own: it is computed "
            f"from other experiments' results"
        )
    selected = select_runs(runs, extra)
    if not selected:
        fail(
            f"no run of {exp['id']} at scale {scale} matches {' '.join(extra)}; the runs vary "
            f"{', '.join(sorted({_key(o) for r in runs for o in r}))}"
        )
    if len(selected) > 1 and any(_key(o) == "out_dir" for o in extra):
        fail(f"out_dir would be the same for all {len(selected)} runs; set results_root=... instead")

    # overrides that change the runs (not a run-list key, path, ...): a results root of their own
    root = next((str(_value(o)) for o in extra if _key(o) == "results_root"), "results")
    variant = variant_root(root, str(exp["id"]), scale, extra, run_list_keys(exp) | {"results_root", "out_dir"})
    in_root = [results_root_override(variant)] if variant != root else []
    regenerate = " ".join(["python experiments/make_sbatch.py", *map(shell_quote, argv)])
    folder = os.path.join(args.out, str(exp["id"]), scale)
    rendered = []
    for run in selected:
        overrides = base + run + profile_args + in_root
        try:
            cfg = compose(overrides, in_experiment=True)
            if (cfg.get("launcher") or {}).get("name") != "slurm":
                fail(f"launcher={cfg['launcher'].get('profile')} is not a Slurm profile; use launcher=slurm or yours")
            world = validate(cfg, cuda_available=True)
            # what submit.py checks before it submits: memory fit, data present, disk
            problem = script_problem(cfg, world, data=not args.no_data_checks)
            if problem:
                fail(problem + ("" if args.no_data_checks else " (--no-data-checks: write the scripts anyway)"))
            name = os.path.basename(os.path.normpath(cfg["out_dir"]))  # the run's folder (a run list's label)
            text = sbatch_script(
                overrides, cfg, cfg["launcher"], ROOT, args.python, regenerate=regenerate, unchecked=args.no_data_checks
            )
        except (ConfigError, ValueError) as exc:
            fail(f"{' '.join(run)}: {str(exc).strip().splitlines()[0]}")
        except Exception as exc:
            fail(f"{' '.join(run)}: {(str(exc).strip().splitlines() or [repr(exc)])[0]}")
        rendered.append((name, text, log_dir(cfg, cfg["launcher"], ROOT)))

    os.makedirs(folder, exist_ok=True)
    paths, logs = [], []
    for name, text, logs_dir in rendered:
        os.makedirs(logs_dir, exist_ok=True)  # Slurm does not create the folder of --output
        if logs_dir not in logs:
            logs.append(logs_dir)
        path = os.path.join(folder, f"{name}.sbatch")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        paths.append(path)
        print(path)
    submit = os.path.join(folder, "submit_all.sh")
    with open(submit, "w") as f:
        f.write(
            "#!/bin/bash\n"
            f"# Submits the {len(paths)} run(s) of experiment {exp['id']} at scale {scale}.\n"
            f"# regenerate: {regenerate}\n"
            "set -euo pipefail\n"
            'HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n'
            + "".join(f"mkdir -p {shell_quote(d)}\n" for d in logs)
            + "".join(f'sbatch "$HERE"/{shell_quote(os.path.basename(p))}\n' for p in paths)
        )
    os.chmod(submit, 0o755)
    print(submit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
