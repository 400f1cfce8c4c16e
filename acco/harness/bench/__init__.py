"""`make bench`: the performance testbed's benchmark."""

# A smaller GPT-Neo and corpus than the CPU-scale defaults: the benchmark's own test (--tiny) and the
# test parts of the GPU check (the test helpers' SMALL_LM adds train.log_every=0). Kept
# here, importing nothing, so the GPU check reads it with only PYTHONPATH=.gpu-deps.
SMALL_LM = [
    "model.config.hidden_size=64",
    "model.config.intermediate_size=256",
    "model.config.max_position_embeddings=32",
    "data.seq_len=32",
    "data.micro_batch_size=4",
    "data.source.num_stories=1500",
    "data.tokenizer.vocab_size=384",
]
