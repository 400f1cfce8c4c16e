"""Each rank's GPU memory for a run, estimated before anything starts: the model is built on the
`meta` device (shapes only, nothing allocated), so a 7B model is counted in milliseconds and a
pretrained one (GPT-Neo 2.7B for Fig. 8) from its config alone, without its weights.

Model state per rank, exactly as the engine allocates it (the figures summary.json reports):

    flat methods (ddp impl=flat, dpu, wp, acco: the flat engine, ShardedAdamW)
        parameters, gradients, communication buffer   3 × P' × b      (b = 2 bf16 on GPU, 4 fp32 on CPU;
                                                                       P' = P padded to N·ceil(P/N))
        fp32 master shard + AdamW m, v                12 × P'/N
    PyTorch DDP + ZeroRedundancyOptimizer (ddp impl=torch)
        fp32 parameters, fp32 gradients (bucket views) 4 P + 4 P       (bf16 only inside autocast)
        AdamW m, v of this rank's partition           8 × (its tensors' elements) + 4 per tensor (step)
                                                      (whole tensors, partitioned greedily, largest first)

Precision is `train.precision` (auto = bf16 on GPU, fp32 on CPU). Around the
model state (estimates): the sync's working shards, autocast's bf16 weight copies (torch DDP in
bf16), a CUDA/NCCL reserve, and the activations of one micro-batch (`activation_bytes`: Korthikanti
et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", per layer
s·b·h·34 + 5·a·s²·b bytes at 16 bit, generalised to the model's MLP width; with activation
checkpointing only each layer's input, 2·s·b·h, is kept, plus one layer recomputed in backward;
plus the logits and the loss's fp32 copies, 10·s·b·V bytes).
The peak is the larger of set-up (building the buffers) and training.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field

from ..config.plain import plain
from ..config.schema import RunView
from ..methods import FLAT, TORCH_DDP
from ..methods import get as get_method

GB = 1e9
# CUDA context, cuBLAS workspaces and NCCL's communicator buffers: not counted by the allocator,
# present on every rank (an assumption: ~0.5 GB context + a few hundred MB per NCCL group)
CUDA_RESERVE_BYTES = 1.0 * GB


# -- the model, on the meta device --------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    family: str
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    attention: str  # eager (scores stored: a·s² per layer) | sdpa | flash_attention_2
    groups: tuple[tuple[int, ...], ...]  # trainable tensors' sizes per AdamW parameter group, model order
    gated_mlp: bool = False  # a gated MLP (SwiGLU: Llama, Qwen2, ...; a `gate_proj`), else GELU's two matrices

    @property
    def params(self) -> int:
        return sum(sum(g) for g in self.groups)

    @property
    def tensors(self) -> int:
        return sum(len(g) for g in self.groups)


def vocab_size(cfg: RunView) -> int:
    """The model's vocabulary: its config's, else the tokenizer the data config trains (the worker
    passes the trained tokenizer's size), else a local pretrained model's config.json."""
    model = cfg["model"]
    v = (model.get("config") or {}).get("vocab_size")
    if v:
        return int(v)
    tok = (cfg.get("data") or {}).get("tokenizer") or {}
    if tok.get("vocab_size"):
        return int(tok["vocab_size"])
    import os

    path = model.get("pretrained_path")
    if path and os.path.isfile(os.path.join(path, "config.json")):
        with open(os.path.join(path, "config.json")) as f:
            return int(json.load(f)["vocab_size"])
    raise ValueError(f"the vocabulary size of {model.get('name')} is not in its config; set model.config.vocab_size")


def model_shape(cfg: RunView) -> ModelShape:
    model = cfg["model"]
    key = json.dumps({"family": model["family"], "config": plain(model.get("config")) or {}}, sort_keys=True)
    decay_all = bool((cfg.get("optim") or {}).get("decay_bias_and_norm", False))
    return _model_shape(key, vocab_size(cfg), decay_all)


@functools.lru_cache(maxsize=32)
def _model_shape(key: str, vocab: int, decay_all: bool) -> ModelShape:
    import torch
    from transformers.utils import logging as hf_logging

    from ..engine.torch_ddp import adamw_param_groups
    from ..models.causal_lm import fresh_model, hf_config
    from ..models.dimensions import model_dims

    spec = json.loads(key)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        config = hf_config(spec, vocab_size=vocab, eos_id=0)
        with torch.device("meta"):
            model = fresh_model(spec["family"], config)
    finally:
        hf_logging.set_verbosity(verbosity)
    # the groups PyTorch's ZeRO partitions, in the order it sees them (the flat engine's order is
    # trainable_parameters', the same tensors: tied embeddings once)
    groups = tuple(
        tuple(p.numel() for p in g["params"]) for g in adamw_param_groups(model, 0.1, decay_all) if g["params"]
    )
    dims = model_dims(config)  # the built config's sizes, under whatever names its family uses
    return ModelShape(
        spec["family"],
        dims.hidden,
        dims.layers,
        dims.heads,
        dims.intermediate,
        dims.vocab,
        config._attn_implementation or "eager",  # the model's: set on its config as it was built
        groups,
        gated_mlp=any(name.endswith("gate_proj") for name, _ in model.named_modules()),
    )


# -- model state ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateLayout:
    """What a rank holds of the model-sized state, in bytes per element."""

    name: str
    param_bytes: int
    grad_bytes: int
    buffer_bytes: int  # the communication buffer (0: none)
    master_bytes: int  # a separate fp32 master copy in the optimizer (0: the parameters are it)
    moment_bytes: int = 8  # AdamW m and v, fp32
    step_bytes: int = 0  # per parameter tensor: torch.optim's step counter (a float32 scalar)
    flat: bool = True  # flat buffers sharded in contiguous slices (this engine); False: whole
    # tensors partitioned greedily (PyTorch's ZeroRedundancyOptimizer)
    local_fragments: int = 0  # diloco / streaming_diloco: F (the inner AdamW is not sharded); 0: not local
    phi_on_host: bool = False  # the local methods' global fp32 φ kept in host memory (on a GPU: not device memory)

    @property
    def K(self) -> int:  # Table 1's K: optimizer-state bytes per parameter
        return self.master_bytes + self.moment_bytes


FLAT_BF16 = StateLayout("flat buffers, bf16 + fp32 master shard", 2, 2, 2, 4)
FLAT_FP32 = StateLayout("flat buffers, fp32", 4, 4, 4, 4)
# train.grad_dtype=fp32 in bf16: an fp32 accumulator beside a bf16 micro-batch gradient (2 + 4 bytes)
# and an fp32 communication buffer
FLAT_BF16_FP32_GRADS = StateLayout("flat buffers, bf16 parameters, fp32 gradients + fp32 master shard", 2, 6, 4, 4)
TORCH_ZERO1 = StateLayout("PyTorch DDP + ZeroRedundancyOptimizer, fp32 parameters", 4, 4, 0, 0, 8, 4, flat=False)


def gpu_run(cfg: RunView) -> bool:
    """Whether the run computes on GPUs: paper scale always does (its configs say device=cuda and
    the check runs on a submit host that may have none), otherwise device=cuda."""
    return (cfg.get("scale") == "paper" and bool(cfg.get("experiment"))) or cfg.get("device") == "cuda"


def precision(cfg: RunView, gpu: bool) -> str:
    """ "bf16" or "fp32": the run's compute and low-precision storage on its device."""
    from .precision import precision_name

    return precision_name(cfg["train"], "cuda" if gpu else "cpu")


def grad_dtype_name(cfg: RunView, gpu: bool) -> str:
    """ "bf16" or "fp32": the flat methods' gradient accumulator and reduce (train.grad_dtype)."""
    import torch

    from .precision import dtype_name, grad_dtype

    return dtype_name(grad_dtype(cfg["train"], torch.device("cuda" if gpu else "cpu")))


def state_layout(cfg: RunView, gpu: bool | None = None) -> StateLayout:
    gpu = gpu_run(cfg) if gpu is None else gpu
    method = cfg["method"]
    spec = get_method(method["name"])
    backend = spec.backend_for(method)
    if backend == TORCH_DDP:
        return TORCH_ZERO1  # fp32 parameters and gradients in either precision
    flat = FLAT_BF16 if precision(cfg, gpu) == "bf16" else FLAT_FP32
    # the flat engine's methods: train.grad_dtype is their accumulator's and buffer's dtype
    if flat is FLAT_BF16 and backend == FLAT and grad_dtype_name(cfg, gpu) == "fp32":
        flat = FLAT_BF16_FP32_GRADS
    if spec.local:
        from dataclasses import replace

        # the pseudo-gradient's buffer in train.grad_dtype (build.py's outer_dtype)
        outer = 4 if grad_dtype_name(cfg, gpu) == "fp32" else flat.buffer_bytes
        wide = ", fp32 pseudo-gradient" if outer > flat.buffer_bytes else ""
        return replace(
            flat,
            name=f"{flat.name}, unsharded inner AdamW{wide}",
            buffer_bytes=outer,
            local_fragments=int(method["fragments"]),
            phi_on_host=gpu,  # LocalEngine: φ in host memory where the device is a GPU
        )
    return flat


def zero_partition(groups: tuple[tuple[int, ...], ...], world: int) -> list[tuple[int, int]]:
    """(elements, tensors) per rank as torch.distributed.optim.ZeroRedundancyOptimizer assigns them
    (`_partition_parameters`): per group, tensors largest first (a stable sort), each to the rank
    with the fewest elements so far (the lowest such rank)."""
    sizes, counts = [0] * world, [0] * world
    for group in groups:
        for n in sorted(group, reverse=True):
            r = sizes.index(min(sizes))
            sizes[r] += n
            counts[r] += 1
    return list(zip(sizes, counts))


def model_states(groups, world: int, layout: StateLayout) -> list[dict]:
    """Every rank's model state, under summary.json's per_rank names."""
    from ..engine.flat import ShardLayout

    params = sum(sum(g) for g in groups)
    if layout.flat:  # the same on every rank (the last shard holds the padding)
        shards = ShardLayout(params, world)
        padded, shard = shards.padded, shards.shard_size
        optimizer = shard * layout.K
        if layout.local_fragments:
            from ..engine.local_rounds import fragment_bounds

            longest = max(b - a for a, b in fragment_bounds(padded, world, layout.local_fragments))
            # the inner AdamW over the whole vector (K per entry, not per shard), φ in fp32 (unless
            # it is in host memory), the outer momentum's shards of every fragment, the fp32 staging
            # of one fragment
            phi = 0 if layout.phi_on_host else 4 * padded
            optimizer = padded * layout.K + phi + 4 * shard + 4 * longest
        return [
            {
                "param_bytes": padded * layout.param_bytes,
                "grad_bytes": padded * layout.grad_bytes,
                "comm_buffer_bytes": padded * layout.buffer_bytes,
                "optimizer_state_bytes": optimizer,
            }
        ] * world
    return [
        {
            "param_bytes": params * layout.param_bytes,
            "grad_bytes": params * layout.grad_bytes,
            "comm_buffer_bytes": params * layout.buffer_bytes,
            "optimizer_state_bytes": elements * layout.K + tensors * layout.step_bytes,
        }
        for elements, tensors in zero_partition(groups, world)
    ]


def model_state_total(state: dict) -> int:
    return sum(state[k] for k in ("param_bytes", "grad_bytes", "comm_buffer_bytes", "optimizer_state_bytes"))


# -- activations ----------------------------------------------------------------------------------
def sequence_length(cfg: RunView) -> int:
    """Tokens per sample: packed blocks of seq_len, or instruction examples padded to the longest
    in the micro-batch, at most max_len (the bound is used)."""
    data = cfg["data"]
    return int(data.get("seq_len") or data.get("max_len"))


def activation_bytes(shape: ModelShape, seq: int, micro_batch: int, checkpointing: bool, act_bytes: int = 2) -> dict:
    """One micro-batch's activations kept for backward (an estimate; see the module docstring).
    Per layer at 16 bit: attention 11·sbh (+ 5·a·s²·b when the scores are materialised: eager
    attention), MLP 3·sbh + 4·sbi (GELU) or 2·sbh + 8·sbi (gated: SwiGLU), two norms 4·sbh; that is
    34·sbh + 5·a·s²·b for a GELU MLP of width 4h (Korthikanti et al. 2022). fp32 compute doubles it."""
    s, b, h, i, a = seq, micro_batch, shape.hidden, shape.intermediate, shape.heads
    mlp = 2 * s * b * h + 8 * s * b * i if shape.gated_mlp else 3 * s * b * h + 4 * s * b * i
    scores = 5 * a * s * s * b if shape.attention == "eager" else 0
    layer16 = 11 * s * b * h + mlp + 4 * s * b * h + scores
    scale = act_bytes / 2
    if checkpointing:  # each layer's input kept; one layer's full set while it is recomputed
        layers = shape.layers * 2 * s * b * h * scale + layer16 * scale
    else:
        layers = shape.layers * layer16 * scale
    embed = 4 * s * b * h * scale  # the embeddings' output and the final norm
    # logits in the compute precision, their fp32 copy for the loss, the fp32 log-softmax kept
    logits = s * b * shape.vocab * ((2 + 4 + 4) if act_bytes == 2 else (4 + 4))
    return {"layers": layers + embed, "logits": logits}


# -- the estimate ----------------------------------------------------------------------------------
@dataclass
class MemoryEstimate:
    world: int
    layout: StateLayout
    model_state: dict  # the largest rank's, summary.json names
    items: dict = field(default_factory=dict)  # training-time bytes by what they are
    setup_bytes: float = 0.0  # while the engine is being built (no activations yet)

    # what the compute stream allocates and frees again in every micro-batch or step: one of these
    # at a time, so the peak holds the largest; everything else is held (the model state, and the
    # flat sync's working memory, allocated once on the communication stream: a GPU's caching
    # allocator keeps a stream's freed blocks for that stream, so the two never share them)
    COMPUTE_ONLY = ("activations (one micro-batch)", "logits and loss", "autocast bf16 weight copies")
    STEP_TEMPORARIES = "optimizer step temporaries (compute stream)"

    @property
    def training_bytes(self) -> float:
        """The held memory plus the larger of the micro-batch's and the optimizer step's transient
        memory on the compute stream (the step runs between micro-batches, on the same stream)."""
        compute = sum(v for k, v in self.items.items() if k in self.COMPUTE_ONLY)
        step = self.items.get(self.STEP_TEMPORARIES, 0.0)
        held = sum(v for k, v in self.items.items() if k not in self.COMPUTE_ONLY and k != self.STEP_TEMPORARIES)
        return float(held + max(compute, step))

    @property
    def total_bytes(self) -> float:
        return max(self.training_bytes, self.setup_bytes)

    @property
    def total_gb(self) -> float:
        return self.total_bytes / GB

    SHARDED = ("optimizer state", "sync working memory")

    @property
    def sharded_bytes(self) -> float:
        """What shrinks as 1/N with more ranks: the optimizer-state shard and the sync's work on it."""
        return sum(self.items.get(k, 0.0) for k in self.SHARDED)

    @property
    def unsharded_bytes(self) -> float:
        """What more ranks would not shrink (the sharded part taken out of the peak)."""
        rest = dict(self.items, **dict.fromkeys(self.SHARDED, 0.0))
        return MemoryEstimate(self.world, self.layout, self.model_state, rest, 0.0).training_bytes


def checkpointing_on(cfg: RunView) -> bool:
    return bool((cfg.get("train") or {}).get("activation_checkpointing", False))


def estimate(
    cfg: RunView, world: int, gpu: bool | None = None, micro_batch: int | None = None, checkpointing: bool | None = None
) -> MemoryEstimate:
    """The per-GPU memory of the run `cfg` on `world` ranks (the largest rank's)."""
    gpu = gpu_run(cfg) if gpu is None else gpu
    shape = model_shape(cfg)
    layout = state_layout(cfg, gpu)
    state = max(model_states(shape.groups, world, layout), key=model_state_total)
    P = shape.params
    items = {
        "parameters": state["param_bytes"],
        "gradients": state["grad_bytes"],
        "communication buffer": state["comm_buffer_bytes"],
        "optimizer state": state["optimizer_state_bytes"],
    }
    compute_bf16 = precision(cfg, gpu) == "bf16"
    if layout.flat:
        from ..engine.flat import ShardLayout
        from ..engine.sync import CHUNK

        shards = ShardLayout(P, world)
        shard = shards.shard_size
        master = shard
        if layout.local_fragments:
            from ..engine.local_rounds import fragment_bounds

            longest = max(b - a for a, b in fragment_bounds(shards.padded, world, layout.local_fragments))
            # held: the inner AdamW's denominator (whole model) and, on the communication stream,
            # a fragment shard's fp32 pseudo-gradient and outer update
            items["sync working memory"] = shards.padded * 4 + (longest // world) * 8
            # each inner step's fp32 mean gradient beside narrower gradients (compute stream)
            if layout.grad_bytes < 4:
                items[MemoryEstimate.STEP_TEMPORARIES] = shards.padded * 4
            master = shards.padded
        else:
            # the flat engine's sync, allocated once: the gradient shard (buffer precision), the ring's
            # receive buffer (gloo, not NCCL), the fp32 mean gradient beside a narrower buffer,
            # AdamW's denominator, a tentative step's master, m and v (acco, wp); clipping's
            # float64 sum of squares, a chunk at a time
            scratch = 0 if gpu else layout.buffer_bytes
            widen = 4 if layout.buffer_bytes < 4 else 0
            tentative = 12 if get_method(cfg["method"]["name"]).tentative_step else 0
            items["sync working memory"] = shard * (layout.buffer_bytes + scratch + widen + 4 + tentative)
            if float((cfg.get("optim") or {}).get("clip_norm") or 0) > 0:
                items["sync working memory"] += 16 * min(CHUNK, shard)
        # set-up: the tasks build the model on the host and the flat engine moves it one fp32
        # parameter at a time into the parameter buffer and the fp32 master shard
        largest = max(n for g in shape.groups for n in g)
        setup: float = shards.padded * (layout.param_bytes + layout.grad_bytes) + 4 * master + 4 * largest
    else:
        elements = max(e for e, _ in zero_partition(shape.groups, world))
        # AdamW's temporaries on this rank's partition, on the main thread's (compute) stream
        items[MemoryEstimate.STEP_TEMPORARIES] = 8 * elements
        if compute_bf16:  # autocast keeps bf16 copies of the weights for forward and backward
            items["autocast bf16 weight copies"] = 2 * P
        setup = 4 * P + 4 * P  # the fp32 model moved whole to the device, DDP's gradient buckets
    mb = int(micro_batch or cfg["data"]["micro_batch_size"])
    ckpt = checkpointing_on(cfg) if checkpointing is None else checkpointing
    act = activation_bytes(shape, sequence_length(cfg), mb, ckpt, 2 if compute_bf16 else 4)
    items["activations (one micro-batch)"] = act["layers"]
    items["logits and loss"] = act["logits"]
    if gpu:
        items["CUDA context and NCCL (assumed)"] = CUDA_RESERVE_BYTES
        setup += CUDA_RESERVE_BYTES
    return MemoryEstimate(world, layout, state, {k: float(v) for k, v in items.items()}, float(setup))


# -- does it fit ------------------------------------------------------------------------------------
def hardware_name(cfg: RunView) -> str:
    """The GPU the run is costed on: the launcher profile's `gpu`, else the hardware the paper used
    for the experiment (experiment.paper.hardware), else A100."""
    launcher = cfg.get("launcher") or {}
    paper = (cfg.get("experiment") or {}).get("paper") or {}
    return str(launcher.get("gpu") or paper.get("hardware") or "A100")


def gpu_memory_gb(cfg: RunView) -> tuple[float | None, str]:
    """(the memory of one GPU in GB, where that figure comes from): the launcher profile's
    gpu_mem_gb, else (local launcher) the visible GPU's, else the hardware preset's."""
    launcher = cfg.get("launcher") or {}
    if launcher.get("gpu_mem_gb"):
        return float(launcher["gpu_mem_gb"]), "the profile's"
    if launcher.get("name") == "local":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GB, "this GPU's"
    from ..analytic.costmodel import PRESETS

    hw = PRESETS.get(hardware_name(cfg))
    return (hw.memory_gb, f"the {hardware_name(cfg)} preset's") if hw is not None else (None, "")


def fixes(cfg: RunView, world: int, limit_gb: float, per_node: int = 1) -> list[str]:
    """Settings that, each on its own, bring the estimate under `limit_gb`."""
    out = []
    mb = int(cfg["data"]["micro_batch_size"])
    # the engine's switch; offered only where the config has it
    if not checkpointing_on(cfg) and "activation_checkpointing" in (cfg.get("train") or {}):
        e = estimate(cfg, world, checkpointing=True)
        if e.total_gb <= limit_gb:
            out.append(f"set train.activation_checkpointing=true (~{e.total_gb:.1f} GB)")
    for m in range(mb - 1, 0, -1):
        e = estimate(cfg, world, micro_batch=m)
        if e.total_gb <= limit_gb:
            out.append(f"set a smaller data.micro_batch_size={m} (~{e.total_gb:.1f} GB)")
            break
    # more ranks shrink only the optimizer-state shard: N >= that shard's bytes at N=1 / what is left
    base = estimate(cfg, world)
    room = limit_gb * GB - base.unsharded_bytes
    if room > 0:
        n = max(world + 1, math.ceil(base.sharded_bytes * world / room))
        n = per_node * math.ceil(n / per_node)
        for _ in range(8):  # whole-tensor partitions (torch ZeRO) may need a little more
            e = estimate(cfg, n)
            if e.total_gb <= limit_gb:
                out.append(f"use more GPUs: {n} (~{e.total_gb:.1f} GB each)")
                break
            n += per_node
    return out


def fit_problem(cfg: RunView, world: int) -> str | None:
    """One line when the run's estimate exceeds the memory of one GPU of its launcher profile,
    naming the figure and the settings that would make it fit; None when it fits."""
    import os

    limit, source = gpu_memory_gb(cfg)
    if limit is None:
        return None
    est = estimate(cfg, world)
    if est.total_gb <= limit:
        return None
    per_node = 1
    if cfg.get("layout"):
        from ..config.validate import parse_layout

        per_node = parse_layout(cfg["layout"])[1]
    exp = (cfg.get("experiment") or {}).get("id") or "this"
    name = os.path.basename(os.path.normpath(cfg.get("out_dir") or "")) or cfg["method"]["name"]
    found = fixes(cfg, world, limit, per_node)
    fix = (
        " or ".join(found)
        if found
        else (
            f"nothing here fits: the parameters, gradients, buffers and one micro-batch's activations alone take "
            f"{estimate(cfg, world, micro_batch=1).unsharded_bytes / GB:.1f} GB; use GPUs with more memory"
        )
    )
    return f"{exp} run {name}: estimated {est.total_gb:.1f} GB per GPU exceeds {source} gpu_mem_gb={limit:g}: {fix}"


def breakdown(est: MemoryEstimate) -> str:
    """One line: the peak, then each item in GB."""
    parts = ", ".join(f"{k} {v / GB:.2f}" for k, v in est.items.items() if v)
    how = "the micro-batch's and the optimizer step's temporaries not live together; the rest held"
    return (
        f"{est.total_gb:.1f} GB per GPU: training {est.training_bytes / GB:.1f} ({parts}; {how}), "
        f"set-up {est.setup_bytes / GB:.1f}"
    )


# -- checkpoints ------------------------------------------------------------------------------------
PER_RANK_CHECKPOINT_BYTES = 64 * 1024  # a rank's own small files beside its state (rng, manifest)


def checkpoint_bytes(cfg: RunView, world: int) -> int | None:
    """One checkpoint of this run, every rank's files together (None: the model is not known)."""
    try:
        shape = model_shape(cfg)
        layout = state_layout(cfg)
    except (KeyError, ValueError, TypeError, ImportError):
        return None
    params = shape.params
    spec = get_method(cfg["method"]["name"])
    if not layout.flat:  # PyTorch DDP + ZeRO: the model's fp32 state dict, each rank's optimizer partition
        size = params * 4 + params * (layout.moment_bytes + layout.step_bytes)
    else:
        # the accumulated gradients waiting for the next round: the accumulator, whose dtype the
        # communication buffer has (train.grad_dtype=fp32: fp32; a bf16 micro-batch buffer is empty)
        pending = world * params * layout.buffer_bytes if spec.carries_gradients else 0
        size = params * layout.param_bytes + params * layout.K + pending
        if layout.local_fragments:  # φ once; every rank's inner AdamW (whole model) and momentum shards
            size = 4 * params + world * params * layout.K + 4 * params + 4 * params // layout.local_fragments
    return size + world * PER_RANK_CHECKPOINT_BYTES


@dataclass(frozen=True)
class CheckpointSize:
    total_bytes: int  # every rank's files of one checkpoint together (checkpoint_bytes)
    largest_rank_bytes: int  # the largest one rank writes (and reads back on resume)


def checkpoint_size(cfg: RunView, world: int) -> CheckpointSize | None:
    """One checkpoint of the run: all of it, and the largest part one
    rank writes and reads back (its own state and its 1/N share of the parameters). None when the
    model's size is not known."""
    total = checkpoint_bytes(cfg, world)
    if total is None:
        return None
    layout = state_layout(cfg)
    shape = model_shape(cfg)
    if not layout.flat:  # PyTorch ZeRO: the largest partition's m and v, beside its share of the model
        elements = max(n for n, _ in zero_partition(shape.groups, world))
        own = elements * (layout.moment_bytes + layout.step_bytes) + shape.params * 4 // world
        return CheckpointSize(total, own + PER_RANK_CHECKPOINT_BYTES)
    return CheckpointSize(total, -(-total // world))
