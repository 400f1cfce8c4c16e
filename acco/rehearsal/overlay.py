"""The rehearsal overlay: an experiment's paper-scale configuration with only its sizes shrunk.

An experiment file has, beside ``scales:``, a ``rehearsal:`` block holding only the overlay:

    rehearsal:
      set:                                   # dotted key -> value, on top of the resolved paper run config
        model.config.hidden_size: 64
        train.tokens: 40960
        data.source.path: ${oc.env:ACCO_REHEARSAL_DATA,data/rehearsal}/openwebtext
        device: cpu
      runs:                                  # value maps: paper value -> rehearsal value
        layout: {"4x8": "2x2"}
        method.warmup_steps: {40: 2, 500: 8}

``scale=rehearsal`` composes the paper block (model, data, settings, per-method settings), maps the
values the ``runs:`` maps name wherever the resolved config holds them (a run list's layouts, a
per-method DPU warmup), then applies ``set:``; the run list is the paper's, its values mapped the
same way, so the rehearsal has the paper's runs (methods, seeds, warmups — scaled), nothing added.

What an overlay may change is listed in ``ALLOWED``: sizes (model width/depth/heads/vocabulary/
positions, budgets in steps/tokens/samples, warmup lengths, evaluation, checkpoint and trace
intervals, micro-batch, sequence and dataset sizes), where things are (paths), and how and where
it runs (device, layout/world size, timeouts, threads). A method, optimizer or data setting in an
overlay is an error, so a rehearsal cannot silently test something other than the paper's setting.
"""
from __future__ import annotations

import copy

__all__ = ["ALLOWED", "allowed", "apply_overlay", "check_overlay", "map_run_specs"]

ALLOWED = (
    # sizes of the model (attention_types: GPT-Neo's per-layer pattern, whose repeat count is the depth)
    "model.config.hidden_size", "model.config.num_layers", "model.config.num_heads",
    "model.config.num_hidden_layers", "model.config.num_attention_heads", "model.config.num_key_value_heads",
    "model.config.intermediate_size", "model.config.vocab_size", "model.config.max_position_embeddings",
    "model.config.window_size", "model.config.attention_types",
    # budgets, warmup lengths, evaluation / checkpoint / trace / log intervals
    "train.steps", "train.tokens", "train.samples", "train.eval_every", "train.eval_batches",
    "train.checkpoint_every", "train.trace_steps", "train.log_every", "method.warmup_steps", "optim.warmup_steps",
    # sizes of the data
    "data.seq_len", "data.max_len", "data.micro_batch_size", "data.tokenizer.vocab_size",
    "data.source.max_documents",
    # where things are
    "data.source.path", "data.tokenizer.path", "model.pretrained_path", "final_eval.lambada_source.path",
    # how and where it runs
    "device", "layout", "world_size", "dist", "train.threads",
)


def allowed(key: str) -> bool:
    """Whether an overlay may set ``key`` (a listed key, or a key inside a listed section)."""
    return any(key == p or key.startswith(p + ".") for p in ALLOWED)


def check_overlay(overlay: dict, exp_id: str) -> None:
    """Every key of the overlay is allowed; ``runs:`` holds value maps."""
    overlay = overlay or {}
    extra = set(overlay) - {"set", "runs"}
    if extra:
        raise ValueError(f"rehearsal of {exp_id}: unknown section(s) {', '.join(sorted(extra))}; "
                         f"the overlay has set: and runs:")
    for section in ("set", "runs"):
        for key, value in (overlay.get(section) or {}).items():
            if not allowed(key):
                raise ValueError(f"rehearsal of {exp_id}: {section}.{key} is not a size, a path or where the run "
                                 f"runs; an overlay may only change {', '.join(ALLOWED)}")
            if section == "runs" and not isinstance(value, dict):
                raise ValueError(f"rehearsal of {exp_id}: runs.{key} must map paper values to rehearsal "
                                 f"values, got {value!r}")


def _lookup(value_map: dict, value, key: str, exp_id: str):
    for paper, rehearsal in value_map.items():
        if paper == value or str(paper) == str(value):  # YAML keys: "4x8" strings, 40 ints
            return rehearsal
    raise ValueError(f"rehearsal of {exp_id}: runs.{key} has no rehearsal value for the paper's {value!r}")


def map_run_specs(specs: list[dict], overlay: dict, exp_id: str) -> list[dict]:
    """The paper's run specs with the overlay's value maps applied (every mapped value must be known)."""
    maps = (overlay or {}).get("runs") or {}
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


_MISSING = object()


def _get(cfg: dict, dotted: str):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _set(cfg: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = cfg
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = copy.deepcopy(value)


def _pattern(attention_types) -> list:
    return [list(kinds) for kinds, _ in attention_types or []]


def apply_overlay(cfg: dict, overlay: dict, exp_id: str) -> dict:
    """Map the resolved paper config's values (``runs:``), then apply ``set:``; in place, returns cfg."""
    check_overlay(overlay, exp_id)
    for key, value_map in ((overlay or {}).get("runs") or {}).items():
        current = _get(cfg, key)
        if current is _MISSING or isinstance(current, (dict, list)):
            continue
        for paper, rehearsal in value_map.items():
            if paper == current or str(paper) == str(current):
                _set(cfg, key, rehearsal)
                break
    for key, value in ((overlay or {}).get("set") or {}).items():
        if key == "model.config.attention_types":  # only the repeat count (the depth) may change
            before = _get(cfg, key)
            if before is not _MISSING and _pattern(before) != _pattern(value):
                raise ValueError(f"rehearsal of {exp_id}: model.config.attention_types may change the repeat "
                                 f"count only, not the pattern {_pattern(before)}")
        _set(cfg, key, value)
    return cfg
