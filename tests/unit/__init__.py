"""In-process tests of one module or package each: no worker processes, no cluster, no GPU (make test-fast)."""
