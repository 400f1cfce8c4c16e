"""Paper experiments are plain Hydra composition; this module only reads the composed config.

An experiment is chosen with its scale, `experiment=<id>/<scale>` (conf/experiment/<id>/<scale>.yaml,
package _global_): the file overrides the model and data groups, sets the scale's settings, `scale`
and the experiment's block (`experiment: {id, title, paper, runs}`, the id, title and paper's numbers
included from conf/experiment_info/<id>.yaml). The experiment's settings for one method come from
conf/experiment_method/<id>/<scale>_<method>.yaml, which conf/config.yaml merges last. The rehearsal
file includes the paper file and changes only sizes, paths and where it runs; its
`experiment.rehearsal_maps` map the paper's run list to the rehearsal's (map_run_specs).

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
from collections.abc import Mapping

from omegaconf import DictConfig, OmegaConf

from .compose_cache import cached
from .location import conf_dir

CONF_DIR = conf_dir()  # acco/conf, the package's
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
    "logger",
    "device",
    "results_root",
    "train.log_every",
    "train.trace",
    "train.trace_steps",
    "resume",
    "data.cache_dir",
    "data.num_proc",
}
SWEEPS = "sweeps"  # <results_root>/sweeps/<sweep>/: runs of an experiment that are not in its run list


def names_the_run(key: str) -> bool:
    """Whether an override of `key` is part of a run's folder name: what it computes, not where its
    files are (a data, tokenizer or model path), how it is launched or logged."""
    key = key.lstrip("+")
    return not (
        key in NOT_IN_NAME or key.startswith(("launcher", "logger", "hydra")) or key.endswith((".path", "_path"))
    )


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
    out: list[tuple[str, object]] = []
    for text in overrides:
        parsed = _parsed_override(text)
        if parsed is not None:
            key, value = parsed
            out.append((key, list(value) if isinstance(value, list) else value))  # a caller's own list
    return out


_PARSED: dict[str, tuple[str, object] | None] = {}


def _parsed_override(text: str) -> tuple[str, object] | None:
    """One override's (key, value), None for a sweep, a deletion or a hydra key. Cached: a plan
    names every run's folder from its overrides, the same few strings thousands of times, and
    Hydra's parser takes milliseconds per override."""
    if text not in _PARSED:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        ov = OverridesParser.create().parse_overrides([text])[0]  # its errors as for a list
        skip = ov.is_delete() or ov.key_or_group.startswith("hydra") or ov.is_sweep_override()
        # a multirun sweep: every job gets its own concrete value
        _PARSED[text] = None if skip else (ov.key_or_group, ov.value())
    return _PARSED[text]


def run_name(cfg: dict, overrides: list[str]) -> str:
    """A folder name from what varies: the method, then the user's other overrides, sorted."""
    parts = {}  # a key given twice (the user's and a run list's) names the folder once: last wins
    for key, value in parse_overrides(overrides):
        key = key.lstrip("+")
        if not names_the_run(key):
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parts[key] = f"{key}={text}"
    name = "_".join([cfg["method"]["name"], *sorted(parts.values())])
    return short_enough(re.sub(r"[^A-Za-z0-9=.,_+-]", "-", name))


MAX_NAME = 120  # a folder name a terminal shows whole; a run list's long runs get a `label` instead


def short_enough(name: str) -> str:
    """`name`, or past MAX_NAME characters its head and a hash of the whole (still one name per
    run: two runs that differ only in the cut tail get different hashes)."""
    if len(name) <= MAX_NAME:
        return name
    import hashlib

    return f"{name[: MAX_NAME - 9]}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def experiment_dir(results_root: str, scale: str, exp: str) -> str:
    """Where an experiment's runs live: `<results_root>/<scale>/<exp>/<run_name>/` (so a CPU-scale
    reproduction is one folder, results/cpu/, and never mixes with paper-scale runs)."""
    return os.path.join(results_root, scale, exp)


def dependency_out_dir(spec: Mapping, cache_dir: str) -> str:
    """Where the run a model starts from (`model.pretrained_from`) is trained: a folder of the data
    cache's own, `<cache>/pretrained/<scale>/<experiment>/<run>`, never the experiment's folder under
    results/ (a committed run there has no model/, and must not be trained again into it)."""
    overrides = list(spec.get("overrides") or [])
    method = next((o.split("=", 1)[1] for o in overrides if o.startswith("method=")), "acco")
    return os.path.join(
        os.path.expanduser(str(cache_dir)),
        "pretrained",
        str(spec.get("scale", "cpu")),
        str(spec["experiment"]),
        run_name({"method": {"name": method}}, overrides),
    )


_RUN_LIST_NAMES: dict[str, tuple[dict[str, str], dict[str, str]]] = {}


def run_list_names(exp: Mapping) -> tuple[dict[str, str], dict[str, str]]:
    """The runs of an experiment's run list (its composed block, `experiment`) by folder name: each
    run's name from its overrides (run_name) -> the name of its folder (the same, or the short one
    of a labelled entry, expanded_runs); and the same with the seed left open (`seed=*`: the seeds
    the reproduce command adds to an undecided claim's groups). A run list entry without `method` runs the
    default method, acco. (Cached: the analysis asks for every run folder it reads.)"""
    import json

    key = json.dumps([exp.get("id"), exp.get("runs"), exp.get("rehearsal_maps")], sort_keys=True, default=str)
    if key not in _RUN_LIST_NAMES:
        _RUN_LIST_NAMES[key] = _run_list_names(exp)
    return _RUN_LIST_NAMES[key]


def _run_list_names(exp: Mapping) -> tuple[dict[str, str], dict[str, str]]:
    exact: dict[str, str] = {}
    any_seed: dict[str, str] = {}
    for overrides, folder in expanded_runs(dict(exp)):
        method = next((o.split("=", 1)[1] for o in overrides if o.startswith("method=")), "acco")
        name = run_name({"method": {"name": method}}, overrides)
        exact[name] = folder
        unseeded = [o for o in overrides if not o.startswith("seed=")]
        open_name = _open_seed(run_name({"method": {"name": method}}, [*unseeded, "seed=0"]))
        any_seed[open_name] = open_name if folder == name else _open_seed(_with_seed(folder))
    return exact, any_seed


def _open_seed(name: str) -> str:
    return re.sub(r"(^|_)seed=\d+(?=_|$)", r"\1seed=*", name)


def _with_seed(folder: str) -> str:
    """A labelled folder name with a seed part (one is added where its entry set no seed list)."""
    return folder if re.search(r"(^|_)seed=\d+(_|$)", folder) else f"{folder}_seed=0"


def in_run_list(name: str, exp: Mapping) -> bool:
    """Whether a run folder's name is one of the experiment's run list (or one with a seed added):
    its name from the overrides, or a labelled entry's short one."""
    return run_list_folder(name, exp) is not None or _is_labelled_folder(name, exp)


def _is_labelled_folder(folder: str, exp: Mapping) -> bool:
    exact, any_seed = run_list_names(exp)
    return folder in exact.values() or ("seed=" in folder and _open_seed(folder) in any_seed.values())


def run_list_folder(name: str, exp: Mapping) -> str | None:
    """The folder name of the run list's run called `name` by its overrides (run_name): the name
    itself, or its entry's label with what the entry varies; None for a run not in the list."""
    exact, any_seed = run_list_names(exp)
    if name in exact:
        return exact[name]
    if "seed=" in name and _open_seed(name) in any_seed:
        seed = re.search(r"(?:^|_)seed=(\d+)(?=_|$)", name)
        return any_seed[_open_seed(name)].replace("seed=*", f"seed={seed.group(1) if seed else 0}")
    return None


def sweep_label(exp: Mapping | None, scale: str, jobs: list[list[str]]) -> str:
    """The folder name of a sweep (or of one run) outside an experiment's run list: the experiment
    and scale, then each override that names runs with its values across the jobs, e.g.
    `fig5-cpu_method=ddp,dpu,acco_train.steps=20`; cut (with a digest of the whole) past 150 bytes."""
    values: dict[str, list[str]] = {}
    for overrides in jobs:
        for key, value in parse_overrides(overrides):
            key = key.lstrip("+")
            if key == "method" or names_the_run(key):
                text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
                if text not in values.setdefault(key, []):
                    values[key].append(text)
    head = [f"{exp['id']}-{scale}"] if exp else []
    label = "_".join([*head, *(f"{k}={','.join(v)}" for k, v in sorted(values.items()))]) or "sweep"
    return short_enough(re.sub(r"[^A-Za-z0-9=.,_+-]", "-", label))


def run_list_keys(exp: Mapping) -> set[str]:
    """The keys an experiment's run list sets (method, seed, layout, ...)."""
    return {o.split("=", 1)[0] for overrides in expand_runs(dict(exp)) for o in overrides}


def variant_root(results_root: str, ids: str, scale: str, overrides: list[str], listed_keys: set[str]) -> str:
    """Where an experiment's runs made with `overrides` on top of its run list go (the reproduce,
    submit and make_sbatch commands): `results_root` when the overrides change no run (a path, the
    launcher, the logger, a key the run list sets itself), else a results root of their own,
    `<results_root>/sweeps/<ids>-<scale>_<overrides>/`, with the usual <scale>/<id>/ folders inside,
    so that a changed reproduction never lands beside the runs the committed figures read."""
    changing = [
        o
        for o in overrides
        if "=" in o
        and (k := o.split("=", 1)[0].lstrip("+~")) not in listed_keys
        and (k == "method" or names_the_run(k))
    ]
    if not changing or os.path.basename(os.path.dirname(os.path.normpath(results_root))) == SWEEPS:
        return results_root  # (a root of its own already: the reproduce command's, handed to submit)
    return os.path.join(results_root, SWEEPS, sweep_label({"id": ids}, scale, [changing]))


def results_root_override(root: str) -> str:
    """`results_root=<root>` in Hydra's grammar (a sweep's folder name holds '=' and ',': quoted)."""
    return f"results_root='{root}'" if re.search(r"[=,\s]", root) else f"results_root={root}"


def in_variant_root(overrides: list[str], composed: dict) -> tuple[list[str], str | None]:
    """`overrides` (an experiment and more, as the submit and status commands take them) with the results
    root their runs go to (variant_root) named last, and that root when it is one of their own."""
    exp = composed.get("experiment") or {}
    root = str(composed.get("results_root") or "results")
    keys = {"experiment", "results_root"} | run_list_keys(exp)
    variant = variant_root(root, str(exp.get("id")), str(composed.get("scale")), overrides, keys)
    if variant == root:
        return list(overrides), None
    return [*overrides, results_root_override(variant)], variant


def default_out_dir(cfg: dict, overrides: list[str], in_experiment: bool = False) -> str:
    """`<results_root>/<scale>/<exp>/<run>` for a run of an experiment's run list (or
    `in_experiment`: the reproduce, submit and make_sbatch commands place an experiment's runs so),
    `<results_root>/sweeps/<label>/<run>` for any other run of an experiment (never beside the
    experiment's own runs: the figures and the report read that folder), and
    `<results_root>/runs/<time>_<run>` without an experiment."""
    root = cfg.get("results_root") or "results"
    exp = cfg.get("experiment")
    name = run_name(cfg, overrides)
    if exp:
        scale = cfg.get("scale", "cpu")
        folder = run_list_folder(name, exp)
        if in_experiment or folder is not None:
            where = experiment_dir(root, scale, str(exp["id"]))
            if folder is not None and folder != name and os.path.exists(os.path.join(where, name)):
                folder = name  # a run made before its entry had a label keeps its folder
            return os.path.join(where, folder or name)
        return os.path.join(root, SWEEPS, sweep_label(exp, scale, [overrides]), name)
    return os.path.join(root, "runs", f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{name}")


def with_out_dir(cfg: dict, overrides: list[str], in_experiment: bool = False) -> dict:
    """The config a run uses: the composed config with out_dir filled in (in place, returned)."""
    if not cfg.get("out_dir"):
        cfg["out_dir"] = default_out_dir(cfg, overrides, in_experiment)
    return cfg


def compose(overrides: list[str], in_experiment: bool = False) -> dict:
    """The config the train command runs with these overrides (Hydra's compose API, resolved);
    `in_experiment`: its folder is the experiment's, whatever the overrides (default_out_dir)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from .schema import register

    def plain() -> dict:
        register()  # conf/config.yaml's defaults start with the schema
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
        plain_cfg = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(plain_cfg, dict)  # the root config is a mapping
        return plain_cfg

    return with_out_dir(cached("compose", (list(overrides),), plain), overrides, in_experiment)


def _is_group_override(override) -> bool:
    """An override that chooses a config group's option (method=ddp, hydra/launcher=...), which
    changes the defaults list, rather than a value in the composed config (train.steps=5)."""
    key = override.key_or_group
    return "/" in key or override.package is not None or os.path.isdir(os.path.join(CONF_DIR, key))


def compose_runs(common: list[str], runs: list[list[str]], in_experiment: bool = False) -> list[dict]:
    """compose([*common, *run]) for each run, the same configs at a fraction of the time: Hydra
    composes once per distinct choice of config groups (a run list varies values: seeds, rates,
    layouts; methods choose a group), and each run's value overrides are applied to that
    composition by Hydra's own code for them and taken back (overridden), as
    Hydra applies them after the composition. A plan of 46 runs then takes seconds, not a minute."""
    return _compose_runs(common, runs, in_experiment)[1]


def compose_run_list(common: list[str], in_experiment: bool = False) -> tuple[list[list[str]], list[dict]]:
    """The run list of the experiment `common` names (expand_runs) and each run's config
    (compose_runs), Hydra composing `common` once for both."""
    return _compose_runs(common, None, in_experiment)


def _compose_runs(
    common: list[str], runs: list[list[str]] | None, in_experiment: bool
) -> tuple[list[list[str]], list[dict]]:
    # a list, not a tuple: the cache keeps only what JSON gives back equal
    listed, plain = cached("compose_runs", (list(common), runs), lambda: list(_compose_plain_runs(common, runs)))
    return listed, [with_out_dir(cfg, [*common, *run], in_experiment) for run, cfg in zip(listed, plain)]


def _compose_plain_runs(common: list[str], runs: list[list[str]] | None) -> tuple[list[list[str]], list[dict]]:
    """_compose_runs' configs before their out_dir is filled in (that may read the clock)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from .schema import register
    from .value_overrides import overridden

    register()
    parser = OverridesParser.create()
    composed: dict[tuple[str, ...], DictConfig] = {}
    out = []
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        if runs is None:  # the run list of what `common` composes, itself the composition of its runs' groups ()
            composed[()] = hydra_compose(config_name="config", overrides=list(common))
            whole = OmegaConf.to_container(composed[()], resolve=True)
            assert isinstance(whole, dict)
            block = whole.get("experiment")
            runs = expand_runs(block) if isinstance(block, dict) else []
        for run in runs:
            parsed = parser.parse_overrides(list(run))
            groups = tuple(str(o.input_line) for o in parsed if _is_group_override(o))
            if groups not in composed:
                composed[groups] = hydra_compose(config_name="config", overrides=[*common, *groups])
            with overridden(composed[groups], [o for o in parsed if not _is_group_override(o)]) as cfg:
                plain_cfg = OmegaConf.to_container(cfg, resolve=True)
            assert isinstance(plain_cfg, dict)
            out.append(plain_cfg)
    return [list(run) for run in runs], out


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
    return [overrides for overrides, _ in expanded_runs(exp)]


def expanded_runs(exp: dict) -> list[tuple[list[str], str]]:
    """Each run of the block with its folder name. An entry's `label` (not a setting) names its
    folders short: the label, then what the entry varies (its list values) and the seed it sets, as
    run_name sorts them, e.g. `label: acco_virtual, seed: [0, 1, 2]` -> acco_virtual_seed=0; config.yaml
    keeps every value. Without a label the folder is run_name's (the method, then every override)."""
    runs = []
    for spec in run_specs(exp):
        spec = dict(spec)
        label = spec.pop("label", None)
        keys = list(spec)
        values = [v if isinstance(v, list) else [v] for v in spec.values()]
        varied = [k for k, v in spec.items() if isinstance(v, list) and len(v) > 1]
        for combo in itertools.product(*values):
            overrides = [f"{k}={'null' if v is None else v}" for k, v in zip(keys, combo)]  # Hydra's None
            method = next((o.split("=", 1)[1] for o in overrides if o.startswith("method=")), "acco")
            if label:  # what the entry varies, and its seed where it sets one (a repetition's)
                chosen = [o for o in overrides if o.split("=", 1)[0] in varied or o.startswith("seed=")]
                folder = run_name({"method": {"name": str(label)}}, chosen)
            else:
                folder = run_name({"method": {"name": method}}, overrides)
            runs.append((overrides, folder))
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
    # how long a rank waits, not what it computes (a null step timeout is sized when the run starts,
    # so config.yaml holds the number and the experiment null)
    "dist.timeout_s",
    "dist.step_timeout_s",
    "dist.final_timeout_s",
    "dist.checkpoint_timeout_s",
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
