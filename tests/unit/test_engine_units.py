"""Unit tests of the shared machinery: sharded AdamW, schedules, flat buffers, collectives,
the distributed-start environment.

Here the tests in-process; those that start processes (marked integration) are in
tests/integration/test_engine_units.py."""

from __future__ import annotations

import copy

import pytest
import torch

from acco.engine import collectives
from acco.engine.flat import FlatModel, ShardLayout
from acco.engine.schedule import make_lr_schedule, per_step
from acco.engine.sharded_adamw import ShardedAdamW
from acco.harness.launch import expand_nodelist, external_env


def test_sharded_adamw_commit_equals_torch_adamw_and_tentative_touches_nothing():
    torch.manual_seed(0)
    p0 = torch.randn(50)
    mask = (torch.arange(50) % 3 != 0).float()  # some entries without weight decay
    lr_at = make_lr_schedule(1e-2, "cosine", warmup_steps=2, total_steps=6)
    decayed_ranges = [(i, i + 1) for i in range(50) if mask[i]]
    opt = ShardedAdamW(p0, decayed_ranges, per_step(lr_at), betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    decayed = torch.nn.Parameter(p0[mask.bool()].clone())
    plain = torch.nn.Parameter(p0[~mask.bool()].clone())
    ref = torch.optim.AdamW(
        [{"params": [decayed], "weight_decay": 0.1}, {"params": [plain], "weight_decay": 0.0}],
        lr=1e-2,
        betas=(0.9, 0.95),
        eps=1e-8,
        foreach=False,
    )
    for step in range(6):
        g = torch.randn(50)
        before = {k: v.clone() for k, v in opt.state_dict().items() if torch.is_tensor(v)}
        lr_before = opt.lr
        est = opt.tentative(g)
        # a tentative step leaves master, moments, step count and schedule exactly as they were
        for k, v in before.items():
            assert torch.equal(v, opt.state_dict()[k]), k
        assert opt.step_count == step and opt.lr == lr_before
        new = opt.commit(g)
        assert opt.step_count == step + 1
        torch.testing.assert_close(est, new, rtol=0, atol=0)  # same update as the commit
        decayed.grad, plain.grad = g[mask.bool()].clone(), g[~mask.bool()].clone()
        for group in ref.param_groups:
            group["lr"] = lr_at(step)
        ref.step()
        torch.testing.assert_close(new[mask.bool()], decayed.detach(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(new[~mask.bool()], plain.detach(), rtol=1e-6, atol=1e-7)


def test_schedules():
    const = make_lr_schedule(1.0, "constant", warmup_steps=4, total_steps=10)
    assert [const(t) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = make_lr_schedule(1.0, "cosine", warmup_steps=0, total_steps=10, min_lr_ratio=0.1)
    assert cos(0) == 1.0 and cos(10) == pytest.approx(0.1) and cos(5) == pytest.approx(0.55)
    lin = make_lr_schedule(2.0, "linear", warmup_steps=2, total_steps=6)
    assert [lin(t) for t in range(7)] == pytest.approx([1.0, 2.0, 2.0, 1.5, 1.0, 0.5, 0.0])
    with pytest.raises(ValueError):
        make_lr_schedule(1.0, "exponential")


def test_flat_model_views_and_padding():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 1))
    copies = [copy.deepcopy(model) for _ in range(3)]
    flat = FlatModel(model, world_size=3, decay_bias_and_norm=False)
    assert flat.numel == 16 + 8 + 5 and flat.layout.padded == 30 and flat.layout.shard_size == 10
    # backward accumulates straight into the flat gradient buffer
    model(torch.randn(2, 3)).sum().backward()
    g1 = flat.grads.clone()
    model(torch.randn(2, 3)).sum().backward()
    assert not torch.equal(flat.grads, g1) and flat.grads[flat.numel :].abs().sum() == 0
    flat.params[0] = 42.0
    assert model[0].weight.reshape(-1)[0].item() == 42.0
    # decay only on the two weight matrices (HF rule): 12 + 4 entries, as ranges of each rank's shard
    # (entries 0-11 the first weight; 24-27 the last one's, 4-7 of rank 2's shard [20, 30))
    ranks = [FlatModel(m, world_size=3, decay_bias_and_norm=False, rank=r) for r, m in enumerate(copies)]
    assert [f.decay_ranges for f in ranks] == [[(0, 10)], [(0, 2)], [(4, 8)]]
    assert sum(b - a for f in ranks for a, b in f.decay_ranges) == 12 + 4
    assert ShardLayout(10, 4).bounds(3) == (9, 12)


def test_the_engine_knows_nothing_of_the_testbed():
    """The emulated link reaches the engine's collectives through the hook it registers; no module
    of acco/engine imports acco/harness/testbed."""
    import ast
    import pathlib

    engine = pathlib.Path(collectives.__file__).parent
    for path in engine.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any("testbed" in n for n in names), f"{path.name} imports {names}"


def test_external_env_torchrun_and_slurm():
    assert external_env({}) is None
    env = external_env(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node7",
            "MASTER_PORT": "1234",
        }
    )
    assert (env.rank, env.world_size, env.local_rank, env.master_addr, env.master_port, env.source) == (
        3,
        4,
        1,
        "node7",
        1234,
        "torchrun",
    )
    slurm = {
        "SLURM_PROCID": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_LOCALID": "0",
        "SLURM_STEP_NODELIST": "n[3-4]",
        "SLURM_JOB_ID": "1234",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    }
    env = external_env(slurm)
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size, env.source) == (2, 4, 0, 2, "slurm")
    assert env.master_addr == "n3" and env.master_port == 20000 + 1234
    # a batch script (no step) or a one-task step is not an srun launch of several ranks
    assert external_env({k: v for k, v in slurm.items() if k != "SLURM_STEP_ID"}) is None
    assert external_env(dict(slurm, SLURM_STEP_NUM_TASKS="1")) is None
    # as slurm/README.md says: MASTER_ADDR / MASTER_PORT set in the job override the defaults; a RANK
    # left in the environment does not override SLURM_PROCID, unless torchrun set it (srun torchrun)
    stale = dict(slurm, RANK="0", WORLD_SIZE="4", MASTER_ADDR="n9", MASTER_PORT="29555")
    env = external_env(stale)
    assert (env.rank, env.master_addr, env.master_port, env.source) == (2, "n9", 29555, "slurm")
    env = external_env(dict(stale, TORCHELASTIC_RUN_ID="abc"))
    assert (env.rank, env.source) == (0, "torchrun")
    # submitit's export of Slurm's own values (one task too, which srun alone does not count as a launch)
    one = dict(slurm, SLURM_STEP_NUM_TASKS="1", SLURM_PROCID="0", RANK="0", WORLD_SIZE="1", MASTER_ADDR="n3")
    assert external_env(one).world_size == 1


def test_slurm_master_port_is_per_job_and_outside_the_ephemeral_range():
    from acco.harness.launch import slurm_master_port

    ports = [slurm_master_port({"SLURM_JOB_ID": str(job)}) for job in range(173, 173 + 64)]
    assert len(set(ports)) == len(ports)  # jobs side by side (an array's tasks) rendezvous apart
    assert all(20000 <= p < 32768 for p in ports + [slurm_master_port({"SLURM_JOB_ID": "987654321"})])


def test_expand_nodelist_without_scontrol(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert expand_nodelist("n[1-3,7],gpu05") == ["n1", "n2", "n3", "n7", "gpu05"]
    assert expand_nodelist("node[08-10]") == ["node08", "node09", "node10"]
    assert expand_nodelist("single") == ["single"]
