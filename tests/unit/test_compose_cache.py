"""The compose cache (acco/config/compose_cache.py): a hit gives what composing gives, a changed
request, environment or file is a miss, a broken entry is composed again, and the clock-dependent
out_dir is never kept."""

from __future__ import annotations

import glob
import os
import time

import pytest

from acco.config import compose_cache
from acco.config.experiments import compose, compose_run_list
from acco.runtime.saved_config import load_yaml


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCO_CACHE", str(tmp_path))
    monkeypatch.delenv(compose_cache.OFF, raising=False)
    return tmp_path / "compose"


def entries(cache) -> list[str]:
    return sorted(glob.glob(str(cache / "*.json")))


def test_a_hit_equals_a_composition_and_out_dir_follows_the_clock(cache, monkeypatch):
    overrides = ["method=acco", "train.steps=7"]
    first = compose(overrides)
    assert len(entries(cache)) == 1
    time.sleep(1.1)  # runs/<time>_<name>: a kept out_dir would repeat the first second
    second = compose(overrides)
    assert len(entries(cache)) == 1  # a hit, nothing new written
    assert first["out_dir"] != second["out_dir"]
    monkeypatch.setenv(compose_cache.OFF, "off")
    fresh = compose(overrides)
    strip = lambda c: {k: v for k, v in c.items() if k != "out_dir"}  # noqa: E731
    assert strip(second) == strip(first) == strip(fresh)
    assert second["train"]["steps"] == 7 and second["method"]["name"] == "acco"


def test_another_request_or_environment_is_a_miss(cache, monkeypatch):
    compose(["method=ddp"])
    compose(["method=acco"])
    assert len(entries(cache)) == 2
    monkeypatch.setenv("ACCO_MODELS", "/elsewhere/models")  # read by the config's oc.env resolvers
    compose(["method=ddp"])
    assert len(entries(cache)) == 3


def test_a_changed_source_file_is_a_miss(cache, monkeypatch):
    compose(["method=ddp"])
    monkeypatch.setattr(compose_cache, "_SOURCES_DIGEST", ["another tree"])
    compose(["method=ddp"])
    assert len(entries(cache)) == 2


def test_a_broken_entry_is_composed_again(cache):
    want = compose(["method=wp"])
    (path,) = entries(cache)
    with open(path, "w") as f:
        f.write('{"value": ')  # cut short
    got = compose(["method=wp"])
    assert {k: v for k, v in got.items() if k != "out_dir"} == {k: v for k, v in want.items() if k != "out_dir"}


def test_off_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv(compose_cache.OFF, "off")
    compose(["method=ddp"])
    compose_run_list(["experiment=fig7/cpu"], in_experiment=True)
    assert not os.path.exists(cache)


def test_a_run_list_from_the_cache_is_the_one_composed(cache, monkeypatch):
    runs, cfgs = compose_run_list(["experiment=fig7/cpu"], in_experiment=True)
    again_runs, again = compose_run_list(["experiment=fig7/cpu"], in_experiment=True)
    monkeypatch.setenv(compose_cache.OFF, "off")
    fresh_runs, fresh = compose_run_list(["experiment=fig7/cpu"], in_experiment=True)
    assert runs == again_runs == fresh_runs and len(runs) > 1
    assert cfgs == again == fresh  # in an experiment's folder: out_dir does not read the clock


def test_a_saved_config_read_again_after_it_changed(cache, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("train:\n  steps: 5\n")
    assert load_yaml(str(path)) == {"train": {"steps": 5}}
    assert load_yaml(str(path)) == {"train": {"steps": 5}}  # a hit
    path.write_text("train:\n  steps: 50\n")  # another size and modification time
    assert load_yaml(str(path)) == {"train": {"steps": 50}}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_yaml(str(empty)) == {}


def test_a_method_registered_in_the_process_is_another_key(monkeypatch):
    from dataclasses import replace

    from acco import methods

    before = compose_cache.key("compose", ["method=acco"])
    monkeypatch.setitem(methods.METHODS, "acco_copy", replace(methods.get("acco"), name="acco_copy"))
    assert compose_cache.key("compose", ["method=acco"]) != before
