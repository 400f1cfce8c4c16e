"""What a rehearsal may change: an experiment's paper-scale configuration with only its sizes shrunk.

`experiment=<id>/rehearsal` (conf/experiment/<id>/rehearsal.yaml) includes the paper file and sets
only sizes, paths and where it runs; its run list is the paper's with the value maps of
`experiment.rehearsal_maps` applied (paper value -> rehearsal value), so the rehearsal has the
paper's runs (methods, seeds, warmups — scaled), nothing added:

    experiment:
      rehearsal_maps:
        layout: {"4x8": "2x2"}
        method.warmup_steps: {40: 2, 500: 8}

What may differ is listed in ``ALLOWED``: sizes (model width/depth/heads/vocabulary/positions,
budgets in steps/tokens/samples, warmup lengths, evaluation, checkpoint and trace intervals,
micro-batch, sequence and dataset sizes), where things are (paths), and how and where it runs
(device, layout/world size, timeouts, threads). ``overlay_problems`` compares a composed rehearsal
config with the composed paper config of the same run: a method, optimizer or data setting that
differs is a problem, so a rehearsal cannot silently test something other than the paper's setting.
"""

from __future__ import annotations

__all__ = ["ALLOWED", "allowed", "check_maps", "map_run_specs", "overlay_problems"]

ALLOWED = (
    # sizes of the model (attention_types: GPT-Neo's per-layer pattern, whose repeat count is the depth)
    "model.config.hidden_size",
    "model.config.num_layers",
    "model.config.num_heads",
    "model.config.num_hidden_layers",
    "model.config.num_attention_heads",
    "model.config.num_key_value_heads",
    "model.config.intermediate_size",
    "model.config.vocab_size",
    "model.config.max_position_embeddings",
    "model.config.window_size",
    "model.config.attention_types",
    # budgets, warmup lengths, evaluation / checkpoint / trace / log intervals
    "train.steps",
    "train.tokens",
    "train.samples",
    "train.eval_every",
    "train.eval_batches",
    "train.checkpoint_every",
    "train.trace_steps",
    "train.log_every",
    "method.warmup_steps",
    "optim.warmup_steps",
    # sizes of the data
    "data.seq_len",
    "data.max_len",
    "data.micro_batch_size",
    "data.tokenizer.vocab_size",
    "data.source.max_documents",
    # where things are
    "data.source.path",
    "data.tokenizer.path",
    "model.pretrained_path",
    "final_eval.lambada_source.path",
    # how and where it runs
    "device",
    "layout",
    "world_size",
    "dist",
    "train.threads",
)
# what names the run rather than what it computes
NOT_COMPARED = ("experiment", "scale", "out_dir")


def allowed(key: str) -> bool:
    """Whether a rehearsal may change ``key`` (a listed key, or a key inside a listed section)."""
    return any(key == p or key.startswith(p + ".") for p in ALLOWED)


def check_maps(maps: dict, exp_id: str) -> None:
    """Every value map is of an allowed key and maps paper values to rehearsal values."""
    for key, value in (maps or {}).items():
        if not allowed(key):
            raise ValueError(
                f"rehearsal of {exp_id}: rehearsal_maps.{key} is not a size, a path or where the run "
                f"runs; a rehearsal may only change {', '.join(ALLOWED)}"
            )
        if not isinstance(value, dict):
            raise ValueError(
                f"rehearsal of {exp_id}: rehearsal_maps.{key} must map paper values to rehearsal values, got {value!r}"
            )


def _lookup(value_map: dict, value, key: str, exp_id: str):
    for paper, rehearsal in value_map.items():
        if paper == value or str(paper) == str(value):  # YAML keys: "4x8" strings, 40 ints
            return rehearsal
    raise ValueError(f"rehearsal of {exp_id}: rehearsal_maps.{key} has no rehearsal value for the paper's {value!r}")


def map_run_specs(specs: list[dict], maps: dict, exp_id: str) -> list[dict]:
    """The paper's run specs with the value maps applied (every mapped value must be known)."""
    check_maps(maps, exp_id)
    out = []
    for spec in specs:
        new = {}
        for key, value in spec.items():
            if key not in maps:
                new[key] = value
            elif isinstance(value, list):
                new[key] = [_lookup(maps[key], v, key, exp_id) for v in value]
            else:
                new[key] = _lookup(maps[key], value, key, exp_id)
        out.append(new)
    return out


def _pattern(attention_types) -> list:
    return [list(kinds) for kinds, _ in attention_types or []]


def overlay_problems(paper: dict, rehearsal: dict) -> list[str]:
    """What a composed rehearsal config changes beyond sizes, paths and where it runs, against the
    composed paper config of the same run (one line each; [] when it is a faithful rehearsal)."""
    from .experiments import dotted_leaves

    a, b = dotted_leaves(paper), dotted_leaves(rehearsal)
    problems = []
    for key in sorted(set(a) | set(b)):
        if key.split(".")[0] in NOT_COMPARED or a.get(key, KeyError) == b.get(key, KeyError):
            continue
        if not allowed(key):
            problems.append(
                f"{key}: {a.get(key, '(absent)')!r} -> {b.get(key, '(absent)')!r} is not a size, "
                f"a path or where the run runs"
            )
        elif key == "model.config.attention_types" and _pattern(a.get(key)) != _pattern(b.get(key)):
            problems.append(
                f"{key}: only the repeat count (the depth) may change, not the pattern {_pattern(a.get(key))}"
            )
    return problems
