"""The loop of train_acco.py with DiLoCo: 8 inner AdamW steps per worker between outer Nesterov steps
(the pseudo-gradients averaged), no gradient sent in between; inner lr 1e-3 (at ACCO's 2e-3 one run's
loss jumped from 4.9 to 7.0 after the third outer step on this tiny model):

    torchrun --nproc-per-node=2 examples/train_diloco.py [--steps 30] [--out DIR]

DiLoCo is deterministic by construction (exactly --accum micro-batches per inner step)."""

from train_acco import main

if __name__ == "__main__":
    main(method="diloco", lr=1e-3, sync_every=8)
