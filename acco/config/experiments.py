"""Paper experiments are plain Hydra composition; this module only reads the composed config.

An experiment is chosen with its scale, `experiment=<id>/<scale>` (conf/experiment/<id>/<scale>.yaml,
package _global_): the file overrides the model and data groups, sets the scale's settings, `scale`
and the experiment's block (`experiment: {id, title, paper, runs}`, the id, title and paper's numbers
included from conf/experiment_info/<id>.yaml). The experiment's settings for one method come from
conf/experiment_method/<id>/<scale>_<method>.yaml, which conf/config.yaml merges last. The rehearsal
file includes the paper file and changes only sizes, paths and where it runs; its
`experiment.rehearsal_maps` map the paper's run list to the rehearsal's (acco/config/overlay.py).

    python experiments/train.py experiment=fig5/cpu method=acco
    python experiments/train.py -m experiment=fig5/cpu method=ddp,dpu,acco

The scale is part of the choice because it picks the model and data groups, and in Hydra a config
can override a group only if it is chosen before that group is; the user's own overrides
(`train.steps=5`, `model=...`) are Hydra's and win as usual.
"""

from __future__ import annotations

import itertools
import os
import re
import time

from omegaconf import OmegaConf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF_DIR = os.path.join(ROOT, "conf")
EXPERIMENT_DIR = os.path.join(CONF_DIR, "experiment")
SCALES = ("cpu", "paper", "rehearsal")
# keys that say where or how a run is executed, not what it computes: left out of folder names
NOT_IN_NAME = {
    "experiment",
    "scale",
    "method",
    "out_dir",
    "overwrite",
    "launcher",
    "device",
    "results_root",
    "train.log_every",
    "train.trace",
    "train.trace_steps",
    "resume",
}


def experiment_ids() -> list[str]:
    """The experiments: the folders of conf/experiment/."""
    return sorted(d for d in os.listdir(EXPERIMENT_DIR) if os.path.isdir(os.path.join(EXPERIMENT_DIR, d)))


def scales_of(exp_id: str) -> list[str]:
    """The scales an experiment has: its files conf/experiment/<id>/<scale>.yaml."""
    folder = os.path.join(EXPERIMENT_DIR, exp_id)
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return [s for s in SCALES if f"{s}.yaml" in names] + sorted(
        n[:-5] for n in names if n.endswith(".yaml") and n[:-5] not in SCALES
    )


def old_form_problem(argv) -> str | None:
    """The one-line fix for the experiment syntax before issue 12 (`+experiment=fig5 scale=cpu`)."""
    args = [a for a in argv if "=" in a and not a.startswith("-")]
    keys = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args}
    plus = keys.get("+experiment") or keys.get("++experiment")
    scale = keys.get("scale") or keys.get("+scale") or keys.get("++scale")
    bare = keys.get("experiment", "/")  # experiment=fig5: an id without its scale
    if plus is None and scale is None and ("/" in bare or bare not in experiment_ids()):
        return None
    exp = (plus or keys.get("experiment") or "<id>").split("/")[0]
    return (
        f"the scale is part of the experiment choice now: use experiment={exp}/{scale or 'cpu'} "
        f"(no +, no scale=; scales: {', '.join(SCALES)})"
    )


def parse_overrides(overrides: list[str]) -> list[tuple[str, object]]:
    """(key, value) for each command-line override, in Hydra's own grammar (sweeps and deletions left out)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out: list[tuple[str, object]] = []
    for ov in OverridesParser.create().parse_overrides(list(overrides)):
        if ov.is_delete() or ov.key_or_group.startswith("hydra") or ov.is_sweep_override():
            continue  # a multirun sweep: every job gets its own concrete value
        out.append((ov.key_or_group, ov.value()))
    return out


def run_name(cfg: dict, overrides: list[str]) -> str:
    """A folder name from what varies: the method, then the user's other overrides, sorted."""
    parts = {}  # a key given twice (the user's and a run list's) names the folder once: last wins
    for key, value in parse_overrides(overrides):
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


def with_out_dir(cfg: dict, overrides: list[str]) -> dict:
    """The config a run uses: the composed config with out_dir filled in (in place, returned)."""
    if not cfg.get("out_dir"):
        cfg["out_dir"] = default_out_dir(cfg, overrides)
    return cfg


def compose(overrides: list[str]) -> dict:
    """The config experiments/train.py runs with these overrides (Hydra's compose API, resolved)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .schema import register

    register()  # conf/config.yaml's defaults start with the schema
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    plain_cfg = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain_cfg, dict)  # the root config is a mapping
    return with_out_dir(plain_cfg, overrides)


def run_specs(exp: dict) -> list[dict]:
    """The composed experiment block's run list as written (`{method: [ddp, acco], seed: [0, 1]}`);
    a rehearsal's is the paper's with its value maps applied (e.g. layout 4x8 -> 2x2)."""
    specs = list(exp.get("runs") or [])
    maps = exp.get("rehearsal_maps")
    if maps:
        from .overlay import map_run_specs

        return map_run_specs(specs, maps, str(exp.get("id")))
    return specs


def expand_runs(exp: dict) -> list[list[str]]:
    """The composed experiment block's runs as lists of overrides; list values expand as a product
    (e.g. seed: [0, 1, 2]); the list is a union of such products."""
    runs = []
    for spec in run_specs(exp):
        keys = list(spec)
        values = [v if isinstance(v, list) else [v] for v in spec.values()]
        for combo in itertools.product(*values):
            runs.append([f"{k}={'null' if v is None else v}" for k, v in zip(keys, combo)])  # Hydra's None
    return runs


_COMPOSED: dict[tuple[str, str], dict] = {}


def scale_config(exp_id: str, scale: str) -> dict:
    """`experiment=<id>/<scale>` composed with the default method (cached; {} for a scale the
    experiment does not have), e.g. the paper's layout beside a CPU-scale table."""
    key = (exp_id, scale)
    if key not in _COMPOSED:
        _COMPOSED[key] = compose([f"experiment={exp_id}/{scale}"]) if scale in scales_of(exp_id) else {}
    return _COMPOSED[key]


def experiment_block(exp_id: str, scale: str) -> dict:
    """An experiment's composed block at a scale (id, title, paper, runs), e.g. the paper's run list
    for a CPU-scale figure's labels; {} for a scale the experiment does not have."""
    return scale_config(exp_id, scale).get("experiment") or {}


# what a run's saved config.yaml may differ in from the experiment's composed run without the run
# being another one: bookkeeping, places on this machine, and what the start fills in
NOT_THE_RUN = (
    "experiment",
    "overwrite",
    "resume",
    "out_dir",
    "results_root",
    "launcher",
    "logger",
    "model.pretrained_path",
    "data.cache_dir",
    "data.num_proc",
    "link.runtime",
    "train.log_every",  # how often progress is printed, not what is trained
)


def dotted_leaves(node, prefix: str = "") -> dict:
    """A nested config as {"a.b.c": leaf} (an empty block has no leaves)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out = {}
    for key, value in node.items():
        out.update(dotted_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def changed_keys(saved: dict, composed: dict) -> list[str]:
    """The settings in which a run's saved config.yaml differs from the run as the experiment now
    composes it: keys both have (a key the saved one lacks was added to the schema later, with a
    default), leaving out NOT_THE_RUN."""

    def kept(key: str) -> bool:
        return not key.startswith("_") and not any(key == n or key.startswith(n + ".") for n in NOT_THE_RUN)

    a, b = dotted_leaves(saved), dotted_leaves(composed)
    return sorted(k for k in set(a) & set(b) if kept(k) and a[k] != b[k])
