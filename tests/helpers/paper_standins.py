"""Local stand-ins for what fig8's paper-scale runs read (Alpaca, GPT-Neo 2.7B's tokenizer), so the
sbatch generator's up-front data check (acco/harness/slurm/checks.py) passes on a machine without them. Tiny:
a few records and a 300-id BPE, written once per module that uses the fixture."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def fig8_paper_data(tmp_path_factory) -> dict:
    """`overrides` and `env` (ACCO_MODELS: the model and tokenizer folder) that point fig8's paper
    runs at the stand-ins."""
    from acco.harness.rehearsal.corpora import write_alpaca
    from acco.harness.rehearsal.tokenizer_folders import save_gpt_neo_tokenizer

    root = tmp_path_factory.mktemp("fig8-paper-data")
    write_alpaca(root / "alpaca", 8, seed=0)
    tokenizer = root / "models" / "gpt-neo-2.7B"
    save_gpt_neo_tokenizer(["a tiny corpus for a stand-in tokenizer"] * 4, 300, tokenizer)
    # the model folder is only looked for (the memory estimate reads the model's config from conf/)
    return {"overrides": [f"data.source.path={root / 'alpaca'}"], "env": {"ACCO_MODELS": str(root / "models")}}
