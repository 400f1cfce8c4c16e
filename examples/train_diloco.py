"""The loop of train_acco.py with DiLoCo: 8 inner AdamW steps per worker between outer Nesterov steps
(the pseudo-gradients averaged), no gradient sent in between:

    torchrun --nproc-per-node=2 examples/train_diloco.py [--steps 32] [--out DIR]

DiLoCo is deterministic by construction (exactly --accum micro-batches per inner step)."""

from train_acco import main

if __name__ == "__main__":
    main(method="diloco", sync_every=8)
