"""compose_runs applies each run's value overrides to one Hydra composition and takes them back
(acco/config/value_overrides.py): the run sees them, the composition is as it was afterwards (an
interpolation stays one), and an override that does more than change a scalar gets a copy."""

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from acco.config.value_overrides import overridden


def composition():
    return OmegaConf.create(
        {"seed": 0, "root": "results", "log_dir": "${root}/.slurm", "optim": {"lr": 0.1}, "tags": ["a"]}
    )


def parsed(*overrides: str):
    return OverridesParser.create().parse_overrides(list(overrides))


def test_scalar_changes_are_seen_then_taken_back():
    cfg = composition()
    with overridden(cfg, parsed("seed=3", "optim.lr=0.5", "log_dir=elsewhere")) as run:
        assert run is cfg  # no copy
        assert OmegaConf.to_container(run, resolve=True) == {
            "seed": 3, "root": "results", "log_dir": "elsewhere", "optim": {"lr": 0.5}, "tags": ["a"]}  # fmt: skip
    assert OmegaConf.to_container(cfg) == OmegaConf.to_container(composition())  # the interpolation too
    cfg.root = "other"
    assert cfg.log_dir == "other/.slurm"


def test_an_override_that_adds_or_sets_a_list_changes_a_copy():
    cfg = composition()
    with overridden(cfg, parsed("+extra=1", "optim.lr=0.5")) as run:
        assert run is not cfg and run.extra == 1 and run.optim.lr == 0.5
    with overridden(cfg, parsed("tags=[b,c]")) as run:
        assert run is not cfg and list(run.tags) == ["b", "c"]
    assert OmegaConf.to_container(cfg) == OmegaConf.to_container(composition())
