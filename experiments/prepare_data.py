#!/usr/bin/env python
"""Prepare the data of an experiment (or of one run) into the data cache, before any job starts:

    python experiments/prepare_data.py experiment=fig7/paper data.num_proc=32
    srun -c 32 --mem=64G python experiments/prepare_data.py experiment=fig7/paper
    python experiments/prepare_data.py data=tinystories data.source.path=data/tinystories

Tokenizing OpenWebText takes hours of CPU; inside a training job that time is paid by every GPU
of the job, waiting. Run this on a CPU node (or the login node, for small corpora) with the same
overrides as the runs and with `ACCO_CACHE` (data.cache_dir) on a filesystem the compute nodes
share: the runs then find the cache built and start training at once. Every distinct data
configuration of the experiment's runs is prepared once; a configuration already in the cache is
only reported.

Compute nodes without internet: where the hub is reachable (the login node) this first fetches
everything the runs name by hub id — datasets, LAMBADA, tokenizers, pretrained models — into the
Hugging Face cache the jobs read (HF_HUB_CACHE, else HF_HOME/hub: keep it on the shared filesystem
too) or into the local folder the config names (acco/data/hub_fetch.py). The jobs then run with
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 and find it all there. Missing data, tokenizers or models
that cannot be fetched: one line naming what to download and where, exit 2, nothing built."""

import json
import os
import sys
import time

from acco.config.experiments import CONF_DIR, compose, expand_runs
from acco.config.schema import typed
from acco.config.validate import ConfigError, check_overrides
from acco.harness.entry import ensure_pretrained, fail_config, help_asked

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_configs(overrides: list[str]) -> list[dict]:
    """The composed config of each run the overrides name (an experiment's runs, or one run)."""
    base = compose(overrides)
    exp = base.get("experiment")
    if not exp:
        return [base]
    # an experiment: its runs (none for the tables, which are computed from other experiments)
    return [compose([*overrides, *run]) for run in expand_runs(exp)]


def data_key(cfg: dict) -> str:
    """What a run's data depends on: the data section, and the model's folder when the tokenizer
    is the pretrained model's own (fine-tuning)."""
    return json.dumps({"data": cfg["data"], "model": cfg["model"].get("pretrained_path")}, sort_keys=True, default=str)


def main(argv: list[str]) -> int:
    if help_asked(argv, __doc__):
        return 0
    from acco.data.hub_fetch import fetch_needs, hub_needs
    from acco.data.sources import DataNotFoundError
    from acco.harness.run.preflight import check_data_present
    from acco.tasks import prepare_task_data

    try:
        check_overrides(argv, CONF_DIR)
        cfgs = run_configs(argv)
    except (ConfigError, ValueError) as exc:
        fail_config(str(exc).splitlines()[0])
    if not cfgs:
        print("prepare: no runs of its own, nothing to prepare")
        return 0
    distinct: dict[str, dict] = {}
    for cfg in cfgs:
        distinct.setdefault(data_key(cfg), cfg)
    try:  # what the runs name by hub id, fetched where they will look for it (the hub reachable)
        fetch_needs([need for cfg in cfgs for need in hub_needs(typed(cfg))], log=lambda m: print(m, flush=True))
    except DataNotFoundError as exc:
        fail_config(str(exc))
    views = [typed(cfg) for cfg in distinct.values()]
    for view in views:  # everything there before anything is built
        ensure_pretrained(view, external=True)  # fine-tuning from a run of ours: it must exist
        try:
            check_data_present(view)
        except DataNotFoundError as exc:
            fail_config(str(exc))
    print(
        f"prepare: {len(cfgs)} run(s), {len(distinct)} data configuration(s); cache "
        f"{next(iter(distinct.values()))['data']['cache_dir']}",
        flush=True,
    )
    for view in views:
        start = time.perf_counter()
        found = prepare_task_data(view)
        print(
            f"prepare: {view.data.name} ({view.data.kind}): "
            f"{json.dumps({k: v for k, v in found.items() if k != 'kind'})} in "
            f"{time.perf_counter() - start:.1f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
