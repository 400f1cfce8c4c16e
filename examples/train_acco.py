"""ACCO in a plain PyTorch training loop: a tiny GPT-Neo (a Hugging Face causal LM, built from its
config) on the suite's generated stories, offline, one process per rank:

    torchrun --nproc-per-node=2 examples/train_acco.py [--steps 30] [--deterministic] [--out DIR]

--out DIR: rank 0 writes the losses (losses.json) and the final parameters (final_params.pt) there."""

import argparse
import json
import os

import torch
import torch.distributed as dist
from transformers import GPTNeoConfig, GPTNeoForCausalLM

import acco
from acco.data import RankBatchStream, prepare_story_data


def main(method: str = "acco", lr: float = 2e-3, **method_options) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="committed optimizer steps")
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per round and rank")
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--deterministic", action="store_true", help="exactly --accum micro-batches per round")
    parser.add_argument("--out", help="rank 0 writes losses.json and final_params.pt into this folder")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")  # torchrun gives the rank and world size
    rank, world = dist.get_rank(), dist.get_world_size()

    # the data: generated stories, a BPE tokenizer trained on them, 32-token blocks (built once, cached)
    cache = os.environ.get("ACCO_CACHE", os.path.expanduser("~/.cache/acco"))
    data = prepare_story_data(cache, num_stories=1500, seed=1234, vocab_size=384, seq_len=32)
    stream = RankBatchStream(data.train_blocks, rank, world, micro_batch_size=4, seed=0)  # this rank's share

    torch.manual_seed(0)  # the same initial model on every rank
    config = GPTNeoConfig(
        vocab_size=data.vocab_size, max_position_embeddings=32, hidden_size=64, num_layers=2, num_heads=4,
        intermediate_size=256, attention_types=[[["global", "local"], 1]], window_size=64, embed_dropout=0.0,
        attention_dropout=0.0, resid_dropout=0.0, bos_token_id=data.eos_id, eos_token_id=data.eos_id,
    )  # fmt: skip
    model = GPTNeoForCausalLM(config)

    def loss_fn(model, ids):  # the mean loss of one micro-batch (acco moves it to the device)
        return model(input_ids=ids, labels=ids).loss

    optimizer = dict(lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    with acco.Overlapped(
        model, loss_fn, iter(stream), method=method, steps=args.steps, accum=args.accum,
        deterministic=args.deterministic, optimizer=optimizer, **method_options,
    ) as trainer:  # fmt: skip
        for step in range(1, args.steps + 1):
            out = trainer.step()  # one committed step: every rank's micro-batches, one sync (or more)
            losses.append(out.loss_mean)
            if rank == 0 and (step % 5 == 0 or step == args.steps):
                print(f"step {step:3d}  loss {out.loss_mean:.4f}  micro-batches {out.micro_batches}  lr {out.lr:.1e}")
        final = trainer.committed_vector()  # θ_T in fp32 (the model itself now holds it too)
    if rank == 0 and args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "losses.json"), "w") as f:
            json.dump(losses, f)
        torch.save(final, os.path.join(args.out, "final_params.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
