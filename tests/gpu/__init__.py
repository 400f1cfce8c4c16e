"""make gpu-check's tests (marked gpu, skipped without CUDA) and the CPU checks of the machinery they use."""
