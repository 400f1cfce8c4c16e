"""Paper experiments as configs: `conf/experiment/<id>.yaml` holds, for each scale (`paper`,
`cpu`), the model and data to use, the settings, per-method settings (e.g. accumulation: ACCO 2 vs
DDP 4) and the list of runs that make the figure. After Hydra has composed the config, the block of
the chosen scale and method is merged in, and the user's own command-line overrides are applied
again on top, so `train.steps=5` still wins over the experiment's value.

    python experiments/train.py +experiment=fig5 scale=cpu method=acco
    python experiments/train.py -m +experiment=fig5 scale=cpu method=ddp,dpu,acco

`scale=rehearsal` is the paper scale with only its sizes shrunk: the `paper` block, then the
experiment's `rehearsal:` overlay (acco/rehearsal/overlay.py); its runs are the paper's with the
overlay's value maps applied.
"""
from __future__ import annotations

import copy
import itertools
import os
import re
import time

from omegaconf import OmegaConf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF_DIR = os.path.join(ROOT, "conf")
GROUPS = ("method", "model", "data", "launcher", "experiment")
SCALES = ("cpu", "paper", "rehearsal")
REHEARSAL = "rehearsal"  # the paper block + the experiment's rehearsal overlay
# keys that say where or how a run is executed, not what it computes: left out of folder names
NOT_IN_NAME = {"experiment", "scale", "method", "out_dir", "overwrite", "launcher", "device", "results_root",
               "train.log_every", "train.trace", "train.trace_steps", "resume"}


def parse_overrides(overrides: list[str]) -> list[tuple[str, object, bool]]:
    """(key, value, is_group_choice) for each command-line override, in Hydra's own grammar."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    out = []
    for ov in OverridesParser.create().parse_overrides(list(overrides)):
        if ov.is_delete() or ov.key_or_group.startswith("hydra"):
            continue
        key = ov.key_or_group
        value = ov.value()
        if ov.is_sweep_override():
            continue  # a multirun sweep: every job gets its own concrete value
        out.append((key, value, key in GROUPS or key.split("@")[0] in GROUPS))
    return out


def load_group_option(group: str, name: str) -> dict:
    path = os.path.join(CONF_DIR, group, f"{name}.yaml")
    if not os.path.exists(path):
        options = sorted(f[:-5] for f in os.listdir(os.path.join(CONF_DIR, group)) if f.endswith(".yaml"))
        raise ValueError(f"unknown {group} {name!r}; choose one of: {', '.join(options)}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def deep_merge(base: dict, extra: dict) -> dict:
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def resolve_experiment(cfg: dict, overrides: list[str]) -> dict:
    """cfg (composed, resolved) + the experiment's scale and method blocks + the user's overrides."""
    exp = cfg.get("experiment")
    if not exp:
        return cfg
    scale = cfg.get("scale", "cpu")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    block = (exp.get("scales") or {}).get("paper" if scale == REHEARSAL else scale)
    if block is None:
        raise ValueError(f"experiment {exp.get('id')} has no {scale} scale")
    if scale == REHEARSAL and block.get("runs") and not exp.get(REHEARSAL):
        raise ValueError(f"experiment {exp.get('id')} has no rehearsal overlay (a rehearsal: block in "
                         f"conf/experiment/{exp.get('id')}.yaml)")
    user = parse_overrides(overrides)
    chosen_groups = {k for k, _, is_group in user if is_group}
    out = copy.deepcopy(cfg)
    for group in ("model", "data"):
        if block.get(group) and group not in chosen_groups:
            out[group] = load_group_option(group, block[group])
    deep_merge(out, block.get("set") or {})
    method = out["method"]["name"]
    deep_merge(out, ((block.get("methods") or {}).get(method)) or {})
    if scale == REHEARSAL:
        from ..rehearsal.overlay import apply_overlay
        apply_overlay(out, exp.get(REHEARSAL) or {}, str(exp.get("id")))
    conf = OmegaConf.create(out)
    for key, value, is_group in user:
        if not is_group:
            OmegaConf.update(conf, key.lstrip("+"), value, force_add=True)
    return OmegaConf.to_container(conf, resolve=True)


def run_name(cfg: dict, overrides: list[str]) -> str:
    """A folder name from what varies: the method, then the user's other overrides, sorted."""
    parts = {}  # a key given twice (the user's and a run list's) names the folder once: last wins
    for key, value, is_group in parse_overrides(overrides):
        key = key.lstrip("+")
        if key in NOT_IN_NAME or key.startswith("launcher"):
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parts[key] = f"{key}={text}"
    name = "_".join([cfg["method"]["name"], *sorted(parts.values())])
    return re.sub(r"[^A-Za-z0-9=.,_+-]", "-", name)


def experiment_dir(results_root: str, scale: str, exp: str) -> str:
    """Where an experiment's runs live: `<results_root>/<scale>/<exp>/<run_name>/` (so a CPU-scale
    reproduction is one folder, results/cpu/, and never mixes with paper-scale runs)."""
    return os.path.join(results_root, scale, exp)


def default_out_dir(cfg: dict, overrides: list[str]) -> str:
    root = cfg.get("results_root") or "results"
    exp = cfg.get("experiment")
    if exp:
        return os.path.join(experiment_dir(root, cfg.get("scale", "cpu"), str(exp["id"])), run_name(cfg, overrides))
    return os.path.join(root, "runs", f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{run_name(cfg, overrides)}")


def finalize(cfg: dict, overrides: list[str]) -> dict:
    """The config a run uses: experiment merged, out_dir filled in."""
    cfg = resolve_experiment(cfg, overrides)
    if not cfg.get("out_dir"):
        cfg["out_dir"] = default_out_dir(cfg, overrides)
    return cfg


def compose(overrides: list[str]) -> dict:
    """Compose like experiments/train.py does (Hydra compose API), then finalize."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    return finalize(OmegaConf.to_container(cfg, resolve=True), overrides)


def run_specs(exp: dict, scale: str) -> list[dict]:
    """The experiment's run list at a scale, as written (`{method: [ddp, acco], seed: [0, 1]}`); the
    rehearsal's is the paper's with the overlay's value maps applied (e.g. layout 4x8 -> 2x2)."""
    scales = exp.get("scales") or {}
    if scale == REHEARSAL:
        from ..rehearsal.overlay import map_run_specs
        return map_run_specs((scales.get("paper") or {}).get("runs") or [], exp.get(REHEARSAL) or {},
                             str(exp.get("id")))
    return list((scales.get(scale) or {}).get("runs") or [])


def expand_runs(exp: dict, scale: str) -> list[list[str]]:
    """The experiment's runs at a scale as lists of overrides; list values expand as a product
    (e.g. seed: [0, 1, 2])."""
    runs = []
    for spec in run_specs(exp, scale):
        keys = list(spec)
        values = [v if isinstance(v, list) else [v] for v in spec.values()]
        for combo in itertools.product(*values):
            runs.append([f"{k}={v}" for k, v in zip(keys, combo)])
    return runs
