"""The collective audit (issue 30 point 8): train.audit_collectives=true leaves every collective a
rank issues in collectives.rank<r>.jsonl, and every method's run passes the checks that matter once
the training group is NCCL: the same sequence per group on every rank, an NCCL group used by one
thread at a time and never by the main thread while a sync is in flight, only CPU tensors on gloo
groups. On CPU every group is gloo; the audit records which ones would be NCCL on a GPU.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_audit.py."""

from __future__ import annotations

import os

import torch.distributed as dist

from acco.engine.audit import AUDITED, CollectiveAudit, audit_problems


def record(seq, op="all_reduce", group="Trainer.__init__:group", **kw) -> dict:
    base = {
        "seq": seq,
        "op": op,
        "group": group,
        "backend": "gloo",
        "gpu_backend": "nccl",
        "thread": "acco-comm",
        "main": False,
        "dtypes": ["float32"],
        "devices": ["cpu"],
        "step": 1,
        "pending": True,
        "overlap": [],
    }
    return {**base, **kw}


def good_logs() -> dict[int, list[dict]]:
    control = {"group": "Trainer.__init__:self.control_group", "gpu_backend": "gloo", "thread": "MainThread"}
    return {
        r: [
            record(1, "barrier", "default", thread="MainThread", main=True, pending=False, dtypes=[], devices=[]),
            record(2, "batch_isend_irecv"),
            record(3, "all_reduce", **control, main=True, pending=True),  # gloo: may run beside a sync
            record(4, "all_gather_single"),
        ]
        for r in (0, 1)
    }


def test_the_checks_pass_a_good_log():
    assert audit_problems(good_logs()) == []


def test_a_group_whose_sequence_differs_between_ranks_is_reported():
    logs = good_logs()
    logs[1][1], logs[1][3] = logs[1][3], logs[1][1]  # rank 1 gathers before it reduce-scatters
    problems = audit_problems(logs)
    assert len(problems) == 1 and "group Trainer.__init__:group: collective 1" in problems[0], problems
    logs = good_logs()
    del logs[1][3]  # rank 1 misses the all-gather
    assert any("on rank 1" in p and "nothing" in p for p in audit_problems(logs))


def test_an_nccl_group_used_by_two_threads_at_once_is_reported():
    logs = good_logs()
    logs[0][1]["overlap"] = ["MainThread"]
    assert any("used at once by MainThread" in p for p in audit_problems(logs))


def test_the_main_thread_on_an_nccl_group_while_a_sync_is_in_flight_is_reported():
    logs = good_logs()
    logs[1][0]["pending"] = True  # the barrier on the default group
    problems = audit_problems(logs)
    assert problems == [
        "rank 1 #1 barrier on default (thread MainThread, step 1): "
        "NCCL group used by the main thread while a sync is in flight"
    ]


def test_a_gpu_tensor_on_a_gloo_group_is_reported():
    logs = good_logs()
    logs[0][2]["devices"] = ["cuda"]
    assert any("gloo group given cuda tensors" in p for p in audit_problems(logs))


def test_the_audit_replaces_nothing_when_off_and_restores_what_it_replaced():
    originals = {name: getattr(dist, name, None) for name in (*AUDITED, "new_group")}
    audit = CollectiveAudit("/nonexistent", 0).install()
    try:
        assert dist.all_reduce is not originals["all_reduce"]
        assert dist.all_reduce.__wrapped__ is originals["all_reduce"]
    finally:
        audit.uninstall()
    assert {name: getattr(dist, name, None) for name in originals} == originals
    assert not os.path.exists("/nonexistent")  # nothing recorded, nothing written
