"""Variants spelled as the trainer sets them (acco/methods/variants.py): a spelling parses into the
config paths the trainer reads, resolves to the tool's key (old keys too, with one notice), a
spelling a tool does not model is one line naming the ones it does, and the defaults the resolver
assumes are the ones the composed config has."""

from __future__ import annotations

import pytest

from acco.config.experiments import compose
from acco.harness.simulation.variants import VARIANTS
from acco.methods import variants
from acco.methods.variants import OVERLAPPED_DDP, UnknownVariant, Variant, default, parse, resolve, resolve_all


def test_a_spelling_parses_into_config_paths_and_values():
    assert parse("ddp:impl=flat:overlap_backward=true:bucket_mb=0.11") == (
        "ddp",
        {"method.impl": "flat", "method.overlap_backward": True, "method.bucket_mb": 0.11},
    )
    assert parse("acco:deterministic=false") == ("acco", {"train.deterministic": False})
    assert parse("diloco:sync_every=8:optim.lr=3e-4") == ("diloco", {"method.sync_every": 8, "optim.lr": 3e-4})
    with pytest.raises(UnknownVariant, match="key=value"):
        parse("ddp:flat")


@pytest.mark.parametrize(
    "typed, key",
    [
        ("ddp", "ddp"),
        ("ddp:impl=flat", "ddp"),
        ("ddp:overlap_backward=true", "ddp_overlap"),
        ("ddp:impl=flat:overlap_backward=true", "ddp_overlap"),
        ("acco", "acco"),
        ("acco:deterministic=true", "acco"),
        ("acco:deterministic=false", "acco_adaptive"),
        ("fsdp", "fsdp"),
        ("streaming_diloco", "streaming_diloco"),
    ],
)
def test_the_simulator_resolves_trainer_spellings_to_its_keys(typed, key):
    assert resolve(typed, VARIANTS, tool="simulate").key == key


def test_an_old_key_still_works_and_says_its_new_spelling_once(capsys):
    variants._told.clear()
    assert resolve_all(["ddp_overlap", "acco_adaptive", "ddp_overlap"], VARIANTS, tool="simulate") == [
        "ddp_overlap",
        "acco_adaptive",
    ]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "simulate: 'ddp_overlap' is now spelled 'ddp:impl=flat:overlap_backward=true'"
        " (the old name works for one more release)",
        "simulate: 'acco_adaptive' is now spelled 'acco:deterministic=false' (the old name works for one more release)",
    ]


def test_a_variant_the_tool_does_not_model_is_one_line_naming_those_it_does():
    with pytest.raises(UnknownVariant) as err:
        resolve("ddp:impl=torch", VARIANTS, tool="simulate")
    assert "\n" not in str(err.value) and "ddp:impl=flat:overlap_backward=true" in str(err.value)
    with pytest.raises(UnknownVariant, match="unknown method 'sgd'"):
        resolve("sgd", VARIANTS, tool="simulate")


def test_an_open_ended_tool_runs_a_spelling_no_key_names_as_itself():
    table = (Variant("ddp_flat", "ddp", (("method.impl", "flat"),)),)
    v = resolve("ddp:impl=torch:comm_hook=reduce_scatter", table, tool="bench", open_ended=True)
    assert v.key == "ddp:impl=torch:comm_hook=reduce_scatter"
    assert v.overrides == ["method=ddp", "method.impl=torch", "method.comm_hook=reduce_scatter"]
    assert resolve("ddp:impl=flat", table, tool="bench", open_ended=True).key == "ddp_flat"


def test_several_matching_variants_pick_the_one_closest_to_the_defaults_or_ask_for_more():
    table = (
        Variant("a", "ddp", (("method.impl", "flat"),)),
        Variant("b", "ddp", (("method.impl", "flat"), ("method.bucket_mb", 1))),
        Variant("c", "ddp", (("method.impl", "flat"), ("method.bucket_mb", 2))),
    )
    assert resolve("ddp:impl=flat", table, tool="t").key == "a"
    assert resolve("ddp:bucket_mb=2", table, tool="t").key == "c"
    twins = (Variant("x", "ddp", (("method.impl", "flat"),)), Variant("y", "ddp", (("method.impl", "flat"),)))
    with pytest.raises(UnknownVariant, match="several"):
        resolve("ddp:impl=flat", twins, tool="t")


def test_the_overlapped_ddp_is_declared_once_and_each_tool_adds_its_own_settings():
    from acco.harness.bench.variants import BY_KEY, TINY_BUCKET_MB
    from analysis.load import RUN_VARIANTS

    simulated = {v.key: v for v in VARIANTS}["ddp_overlap"]
    assert (simulated.method, simulated.settings) == (OVERLAPPED_DDP.method, OVERLAPPED_DDP.settings)
    assert BY_KEY["ddp_overlap"].settings == (*OVERLAPPED_DDP.settings, ("method.bucket_mb", TINY_BUCKET_MB))
    assert OVERLAPPED_DDP in RUN_VARIANTS
    # a setting it already has changes in its place; a new one comes after its own
    v = OVERLAPPED_DDP.extended(("method.impl", "torch"), ("train.deterministic", True))
    assert v.settings == (("method.impl", "torch"), ("method.overlap_backward", True), ("train.deterministic", True))
    assert v.spelling == "ddp:impl=torch:overlap_backward=true:deterministic=true" and v.key == "ddp_overlap"


@pytest.mark.parametrize("method", ["ddp", "dpu", "acco", "diloco"])
def test_the_defaults_assumed_are_the_composed_configs(method):
    cfg = compose([f"method={method}"])
    for path in (
        "method.impl",
        "method.overlap_backward",
        "method.comm_hook",
        "method.bucket_mb",
        "method.warmup_steps",
        "train.deterministic",
    ):
        section, key = path.split(".")
        if key in cfg[section]:
            assert default(method, path) == cfg[section][key], path
