"""W&B the way it is used: `experiment=<id>/<scale> logger=wandb` runs (offline) and its run is grouped by
the experiment, typed by the method, configured with the run's final config, summarised with
summary.json's numbers; `make_figures.py --wandb` logs the figures as images to one report run. The
offline run files are read back record by record (W&B's log format: LevelDB-style 32 KiB blocks
of protobuf records)."""

from __future__ import annotations

import glob
import json
import os
import struct
import time

import pytest
import yaml

from tests.helpers.runs import SMALL_LM, run_train

pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402

pytestmark = pytest.mark.integration

BLOCK, HEADER = 32768, 7  # the block size and a record's header (crc32, length, kind)


def records(path: str) -> list:
    """Every record of an offline run file (run-*.wandb): the file header, then full or split records."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b":W&B", raw[:7]
    out, pos, part = [], HEADER, b""
    while pos + HEADER <= len(raw):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos : pos + HEADER])
        data, pos = raw[pos + HEADER : pos + HEADER + length], pos + HEADER + length
        if kind == 0:
            break
        part = data if kind in (1, 2) else part + data
        if kind in (1, 4):  # full, or the last piece of a split record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(part)
            out.append(record)
    return out


def offline_run(folder: str, wait_s: float = 60.0, run_dir: str | None = None) -> tuple:
    """The run record, summary and history of the one offline run under <folder>/wandb (or of the
    offline-run folder `run_dir`)."""
    (path,) = glob.glob(os.path.join(run_dir or os.path.join(folder, "wandb", "offline-run-*"), "run-*.wandb"))
    # wandb's own service process writes the file; on a loaded machine (CI: two test workers beside
    # training runs) it was seen still short of the run record just after finish() returned
    deadline = time.monotonic() + wait_s
    while True:
        recs = records(path)
        kinds = [r.WhichOneof("record_type") for r in recs]
        if "exit" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (run,) = [r.run for r in recs if r.WhichOneof("record_type") == "run"]
    summary = {}
    for r in recs:
        if r.WhichOneof("record_type") == "summary":
            for item in r.summary.update:
                summary[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    history = [
        {(item.key or "/".join(item.nested_key)): item.value_json for item in r.history.item}
        for r in recs
        if r.WhichOneof("record_type") == "history"
    ]
    return run, summary, history


def test_an_experiment_run_is_grouped_typed_and_summarised(tmp_path):
    out = tmp_path / "run"
    run_train(
        [
            "experiment=fig5/cpu",
            "method=acco",
            "logger=wandb",
            *SMALL_LM,
            "world_size=1",
            "train.steps=2",
            "train.eval_every=0",
            f"out_dir={out}",
        ]
    )
    run, summary, history = offline_run(str(out))
    assert run.run_group == "fig5/cpu" and run.job_type == "acco"
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    with open(out / "config.yaml") as f:
        saved = yaml.safe_load(f)
    for key in ("method", "model", "optim", "train", "experiment"):  # the final config, as config.yaml
        assert config[key] == saved[key], key
    assert config["out_dir"] == str(out) and config["experiment"]["id"] == "fig5"
    with open(out / "summary.json") as f:
        done = json.load(f)
    assert summary["status"] == "completed" and summary["final_train_loss"] == pytest.approx(done["final_train_loss"])
    assert summary["per_rank/0/optimizer_state_bytes"] == done["per_rank"][0]["optimizer_state_bytes"]
    assert not any(k.startswith("per_rank/0/round_micro_batches") for k in summary)  # one per round: not here
    assert len(history) == 2 and all("train_loss" in h for h in history)


def test_make_figures_logs_the_figures_as_images(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from analysis.make_figures import log_to_wandb
    from analysis.render import plt, save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    paths = save_figure(fig, str(tmp_path / "cpu" / "fig5" / "figures"), "fig5")
    (tmp_path / "cpu" / "REPORT.md").write_text("# report\n")
    folder = log_to_wandb(str(tmp_path), "cpu", paths)
    assert folder.startswith(str(tmp_path / "cpu" / "wandb"))
    run, _, history = offline_run(str(tmp_path / "cpu"))
    assert run.run_group == "cpu" and run.job_type == "figures" and run.display_name == "figures-cpu"
    (logged,) = history
    assert json.loads(logged["fig5/_type"]) == "image-file" and json.loads(logged["fig5/format"]) == "png", logged


def test_a_resumed_run_logs_into_the_same_wandb_run(tmp_path):
    """A run stopped by a signal (a requeue's checkpoint) and continued with resume=auto keeps its
    W&B run id; started over (overwrite=true) it gets a new one."""
    out = tmp_path / "run"
    args = ["method=acco", "logger=wandb", *SMALL_LM, "world_size=1", "train.steps=6", f"out_dir={out}"]
    run_train([*args, "fault.signal_rank=0", "fault.at_step=2"], expect=3)  # preempted: checkpoint, exit 3
    run_train([*args, "resume=auto"])
    run_train([*args, "overwrite=true"])
    folders = sorted(glob.glob(os.path.join(out, "wandb", "offline-run-*")))
    assert len(folders) == 3, folders
    first, resumed, again = [offline_run(str(out), run_dir=f) for f in folders]
    assert resumed[0].run_id == first[0].run_id and again[0].run_id != first[0].run_id
    with open(out / "summary.json") as f:
        assert json.load(f)["status"] == "completed"
