"""DiLoCo (Douillard et al. 2023, arXiv 2311.08105): an inner AdamW per worker, and every
sync_every inner steps an outer Nesterov step on the averaged pseudo-gradient, waited for."""

from .spec import LOCAL, MethodSpec

# the local methods' settings (conf/method/diloco.yaml, streaming_diloco.yaml)
LOCAL_SETTINGS = ("sync_every", "fragments", "overlap_steps", "mixing", "outer_lr", "outer_momentum")

SPEC = MethodSpec(
    name="diloco",
    label="DiLoCo",
    backend=LOCAL,
    schedule="local_rounds",
    # each inner step agrees on the counts; the outer syncs are named per fragment
    # (acco/engine/local_rounds.py fragment_kind)
    sync_kinds=("local",),
    table1_row="diloco",
    settings=LOCAL_SETTINGS,
    local=True,
    sends="pseudo-gradients",
)
