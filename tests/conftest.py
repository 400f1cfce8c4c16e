"""pytest's hooks and fixtures for the whole suite: the data cache shared by the test session, the
fork server that starts train.py runs (tests/helpers/runs.py), one torch thread, and the fixtures of
the local Slurm cluster and fig8's paper-scale stand-ins. What test files import lives in
tests/helpers/, never here."""

from __future__ import annotations

import os

import pytest

from tests.helpers import runs
from tests.helpers.paper_standins import fig8_paper_data  # noqa: F401 - a fixture, for every test module
from tests.helpers.paths import ROOT
from tests.helpers.slurm_cluster import cluster  # noqa: F401 - a fixture, for every test module

# `make test` runs the suite on two pytest-xdist workers (--dist loadgroup). The modules that use the
# local Slurm cluster (the `cluster` fixture: one per session, started and stopped by it) mark their
# tests xdist_group("slurm"), so they run on one worker, in order; every other test makes its own
# folders, ports and network namespaces.


@pytest.fixture(scope="session", autouse=True)
def acco_cache(tmp_path_factory):
    path = os.environ.get("ACCO_TEST_CACHE") or str(tmp_path_factory.mktemp("acco-cache"))
    os.environ["ACCO_CACHE"] = path
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    # Child processes load test-only task factories (task=tests.helpers.oracle:...): the installed
    # package maps only acco/ and analysis/, so the repository root goes on their import path.
    parts = [ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return path


@pytest.fixture(scope="session", autouse=True)
def fork_server(acco_cache, tmp_path_factory):
    """train.py runs forked from a pre-imported parent (tests/helpers/forkserver.py): ~6 s of imports
    less per run. ACCO_TEST_FORKSERVER=0 starts every run as a fresh interpreter instead."""
    if os.environ.get("ACCO_TEST_FORKSERVER", "1") != "0":
        runs.use_fork_server(str(tmp_path_factory.mktemp("forkserver") / "socket"))
    yield
    runs.stop_fork_server()


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    # the tests' own computations (references, replays) share 2 cores with worker processes;
    # oversubscribed OpenMP threads can slow them by an order of magnitude
    import torch

    torch.set_num_threads(1)
