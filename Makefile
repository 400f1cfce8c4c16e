# acco — see README.md (`make help` lists the targets). Every target creates the virtual environment
# first if it is missing. A target's `## ` comment on its rule line is its line in `make help`.
PY      ?= python3
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
WORLD   ?= 2
STEPS   ?= 300
OUT     ?= results/cpu-demo/$(METHOD)
METHOD  ?= acco
SCALE   ?= cpu

.PHONY: help install lint test test-all test-fast test-integration train-cpu demo-cpu figures readme plot reproduce clean bench same-metrics \
	simulate calibrate-clock \
	rehearse rehearsal-data gpu-check wheels bench-checkpoint
.DEFAULT_GOAL := help

help: ## This list of targets
	@grep -hE '^[a-zA-Z%_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  make %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# torch is pinned in pyproject.toml (2.13.0: whatever build pip finds, a local CPU wheel where the
	# machine caches one, else the registry's default, which is the CUDA build on Linux)
	$(PYTHON) -m pip install --quiet -e '.[test,lint,eval]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install acco with its test, lint and eval (lm-eval) extras

# ruff (rules and format in pyproject.toml), mypy (pyproject.toml [tool.mypy]) and the layers of
# acco (import-linter, pyproject.toml [tool.importlinter]: imports inside functions count); CI runs it first.
lint: $(STAMP) ## ruff check, ruff format --check, mypy, lint-imports (the layers)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The test suite (CPU, gloo, 1-4 local worker processes, tiny models). Tests marked `integration`
# start processes (the entry point, workers, a Slurm cluster, network namespaces); `gpu` ones skip
# without CUDA. Two pytest workers (TEST_WORKERS): a test's processes use about one core on average
# (start-up, a reference replay, waits on Slurm), so two side by side keep 2 cores busy. The Slurm
# tests run on one of them, in order (tests/conftest.py).
# `slow` tests (long end-to-end runs: the Slurm rehearsal, make bench, a tiny reproduction, ...) only
# in test-all, so that make test (what CI runs) stays about 26 minutes on 2 cores (CI's last: 19.6 + 6.2 min in its two phases).
# `alone` tests run afterwards, one at a time with nothing beside them: Slurm sends a 1-minute job's
# time-limit signal within its first half minute, so a start-up slowed by other tests leaves a segment
# no steps (CI ran out of 12 requeues at step 42 of 130 that way, beside the other tests).
TEST_WORKERS ?= 2
test: $(STAMP) ## The tests CI runs: all but the `slow` ones (about 26 min on 2 cores)
	$(PYTHON) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not alone" tests
	$(PYTHON) -m pytest -q -p no:cacheprovider -m "alone and not slow" tests

test-all: $(STAMP) ## Every test, the `slow` end-to-end ones too (about 40 min on 2 cores, estimated)
	$(PYTHON) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup -m "not alone" tests
	$(PYTHON) -m pytest -q -p no:cacheprovider -m alone tests

# In-process tests, one pytest worker per core (pytest-xdist): they share no files or processes.
test-fast: $(STAMP) ## In-process unit tests only (about 1 min on 2 cores)
	$(PYTHON) -m pytest -q -p no:cacheprovider -n auto -m "not integration and not gpu" tests

test-integration: $(STAMP) ## The tests test-fast leaves out: processes, Slurm, namespaces, GPU
	$(PYTHON) -m pytest -q -p no:cacheprovider -m "integration or gpu" tests

# The main job at CPU scale: one method on $(WORLD) local workers, tiny GPT-Neo, embedded stories.
train-cpu: $(STAMP) ## One method at CPU scale (METHOD=acco WORLD=2 STEPS=300)
	$(PYTHON) experiments/train.py method=$(METHOD) world_size=$(WORLD) train.steps=$(STEPS) \
		train.eval_every=50 out_dir=$(OUT) overwrite=true

# All four methods side by side at CPU scale (results/cpu-demo/<method>).
demo-cpu: $(STAMP) ## All four methods side by side at CPU scale
	for m in ddp dpu wp acco; do $(MAKE) --no-print-directory train-cpu METHOD=$$m || exit 1; done

# A paper figure or table: run what is missing (SCALE=cpu|paper|rehearsal, LAUNCHER=local|slurm), then plot.
# The rehearsal runs through Slurm by default (the local cluster: slurm/local-cluster/start).
LAUNCHER ?= $(if $(filter rehearsal,$(SCALE)),slurm,local)
REHEARSAL_DATA ?= $(or $(ACCO_REHEARSAL_DATA),data/rehearsal)
export ACCO_REHEARSAL_DATA := $(REHEARSAL_DATA)
# the paper's figures and tables, then beyond_diloco (beyond the paper, at every scale)
EXPERIMENT_IDS := fig4 fig5 fig6 fig7 fig8 fig9 fig10 fig11 table1 table2 table3 beyond_diloco
# beyond the paper, at the CPU scale only (conf/experiment/<id>/cpu.yaml)
CPU_ONLY_IDS := lr_sweep outer_sweep
# one reproduce.py job for all of them (one "run k of N", one closing table): a comma list
comma := ,
space := $(subst ,, )
# ARGS: more arguments for reproduce.py, e.g. ARGS='launcher.partition=gpu launcher.account=abc --no-wait'
ARGS ?=
reproduce-%: $(STAMP) ## One figure or table, e.g. reproduce-fig5 (SCALE=cpu|paper|rehearsal, ARGS=overrides)
	@echo "SCALE=$(SCALE) LAUNCHER=$(LAUNCHER)"
	$(if $(filter rehearsal,$(SCALE)),$(PYTHON) experiments/make_rehearsal_data.py --out $(REHEARSAL_DATA))
	$(PYTHON) experiments/reproduce.py $* --scale $(SCALE) --launcher $(LAUNCHER) $(ARGS)

# Every figure and table (at the CPU scale by default).
reproduce: $(STAMP) ## Every figure and table (SCALE=cpu by default, ARGS=overrides)
	@echo "SCALE=$(SCALE) LAUNCHER=$(LAUNCHER)"
	$(PYTHON) experiments/reproduce.py $(subst $(space),$(comma),$(strip $(EXPERIMENT_IDS) $(if $(filter cpu,$(SCALE)),$(CPU_ONLY_IDS)))) --scale $(SCALE) --launcher $(LAUNCHER) $(ARGS)

# Figures and tables from the results that exist (no training).
figures: $(STAMP) ## Figures and tables from the results that exist (no training)
	$(PYTHON) analysis/make_figures.py results --scale $(SCALE)

# README's results block (the forest plot and its counts) from the committed report's headline: a
# user's `make figures` never rewrites README.md, this does (after the committed report changed).
readme: $(STAMP) ## README.md's results block from results/cpu/headline.json (written by make figures)
	$(PYTHON) analysis/readme_block.py

# Any runs plotted (loss against steps, samples, wall-clock) with a table of final numbers: a
# sweep's folder (results/sweeps/<sweep>), run folders, globs (analysis/plot_runs.py).
RUNS ?= results/sweeps
plot: $(STAMP) ## Plot any runs: loss vs steps, samples, time + final numbers (RUNS=results/sweeps/<sweep>)
	$(PYTHON) analysis/plot_runs.py $(RUNS)

# The dress rehearsal: every paper experiment's paper-scale configuration with only its sizes shrunk
# (conf/experiment/*.yaml `rehearsal:`), on local copies of the data in the real formats
# ($(REHEARSAL_DATA)), through Slurm on the local cluster (started if needed: root), then every
# figure and table from results/rehearsal/. Not part of `make test`.
rehearsal-data: $(STAMP) ## Local data in the real datasets' formats for the rehearsal
	$(PYTHON) experiments/make_rehearsal_data.py --out $(REHEARSAL_DATA)

rehearse: rehearsal-data ## The dress rehearsal through Slurm on the local cluster
	bash slurm/local-cluster/status >/dev/null 2>&1 || bash slurm/local-cluster/start
	for e in $(EXPERIMENT_IDS); do $(PYTHON) experiments/prepare_data.py experiment=$$e/rehearsal || exit 1; done
	$(PYTHON) experiments/reproduce.py $(subst $(space),$(comma),$(EXPERIMENT_IDS)) --scale rehearsal --launcher slurm
	$(MAKE) --no-print-directory figures SCALE=rehearsal

clean: ## Remove results/cpu-demo and pytest's cache
	rm -rf results/cpu-demo .pytest_cache

# One sbatch script per run of a paper experiment, plus submit_all.sh, in
# slurm/generated/<id>/<scale>/ (e.g. make sbatch-fig8 SCALE=paper; then sbatch one, or run submit_all.sh).
# ARGS: the profile and overrides, e.g. ARGS='launcher=mycluster launcher.partition=gpu --out /scratch/jobs'
sbatch-%: $(STAMP) ## sbatch scripts for one experiment, e.g. sbatch-fig8 SCALE=paper (ARGS=launcher=... overrides)
	$(PYTHON) experiments/make_sbatch.py $* --scale $(SCALE) $(ARGS)

# The performance testbed: every method on an emulated slow link (network namespaces + tc), side by
# side, medians over rounds -> results/bench/ (docs/bench.md).
BENCH_ARGS ?=
bench: $(STAMP) ## Every method on an emulated slow link -> results/bench/
	$(PYTHON) experiments/bench.py --out results/bench $(BENCH_ARGS)

# What a checkpoint costs each rank (ACCO and PyTorch DDP + ZeRO-1 at world size 2, a ~300 M-parameter
# GPT-Neo): host memory during the save, bytes read on resume, seconds; DCP's async_save beside them
# -> results/bench/checkpoint.json and a line in results/bench/targets.md (docs/fault-tolerance.md).
bench-checkpoint: $(STAMP) ## What a checkpoint save and resume cost each rank -> results/bench/checkpoint.json
	$(PYTHON) experiments/bench_checkpoint.py --out results/bench

# The virtual clock's costs on this machine (experiments/calibrate_clock.py: one sequential run per
# wall-clock figure's link, every micro-batch and sync from its trace) and its validation against
# real delay-link runs -> results/cpu/clock/ (docs/virtual-clock.md).
calibrate-clock: $(STAMP) ## The virtual clock's costs and its validation against real runs -> results/cpu/clock/
	$(PYTHON) experiments/calibrate_clock.py --out results/cpu/clock/calibration.json
	$(PYTHON) experiments/calibrate_clock.py --out results/cpu/clock/calibration.json --validate 100,25 --reps 3

# The schedules simulated past this machine (8-1024 GPUs; modelled time only, no loss) and their
# validation against the CPU testbed -> results/sim/ (docs/virtual-clock.md).
simulate: $(STAMP) ## The methods' schedules simulated at 8-1024 GPUs: figures and validation -> results/sim/
	$(PYTHON) experiments/simulate.py --figures results/sim
	$(PYTHON) experiments/simulate.py --validation results/sim

# A restructure that must not change what a run computes: 13 short deterministic runs (every
# method and impl, world 3, a slow rank, the virtual clock) with BASE's code and the working tree's,
# metrics.csv compared byte for byte (wall_time_s aside, except the virtual clock's); ~6 min.
same-metrics: $(STAMP) ## Training bit-identical to BASE (default main)? 13 short runs each side
	$(PYTHON) experiments/same_metrics.py --base $(or $(BASE),main)

# Everything CUDA-specific in at most 8.5 minutes on one H200 (experiments/gpu_check.py: a plan of
# parts with their budgets: data caches, every method against the reference, bitwise race checks,
# exact resume on CUDA, hidden host syncs, overlap from CUDA events, tokens/s and MFU) -> results/gpu/.
# Without a GPU: says so, exit 0. On a CUDA machine with its own PyTorch and no internet (no venv, no
# download), with the folder `make wheels` made beforehand where the registry is reachable:
#   python -m pip install --no-index --no-deps --target .gpu-deps wheels/*.whl
#   PYTHONPATH=.gpu-deps python experiments/gpu_check.py --out results/gpu
gpu-check: $(STAMP) ## Everything CUDA-specific on one GPU -> results/gpu/
	$(PYTHON) experiments/gpu_check.py --out results/gpu

# The wheels an offline machine with its own PyTorch lacks, for the target's Python (WHEELS_PYTHON,
# manylinux x86_64): by default what a CUDA image with torch, transformers, tokenizers, numpy,
# pandas, pyarrow, pytest and pytest-timeout lacks (what the GPU check imports). No torch, nvidia-*
# or triton. antlr4-python3-runtime 4.9.3 (omegaconf's) is an sdist only: built here (pure Python).
# Needs only pip (python3), no virtual environment or torch here.
# A bare Python with torch alone: WHEELS_NODEPS= and the rest named, e.g.
#   make wheels WHEELS_PYTHON=3.11 WHEELS_NODEPS= WHEELS_EXTRA='transformers==5.24.0 pytest pytest-timeout'
WHEELS        ?= wheels
WHEELS_PYTHON ?= 3.12
WHEELS_NODEPS ?= --no-deps
WHEELS_LACKING := hydra-core==1.3.8 omegaconf==2.3.1 submitit==1.5.4 \
	datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
WHEELS_EXTRA  ?=
wheels: ## Wheels of what an offline GPU machine with its own PyTorch lacks -> wheels/
	rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	$(PY) -m pip wheel --quiet --no-deps -w $(WHEELS) antlr4-python3-runtime==4.9.3
	$(PY) -m pip download --quiet $(WHEELS_NODEPS) --only-binary=:all: --find-links $(WHEELS) \
		--python-version $(WHEELS_PYTHON) --implementation cp --platform manylinux_2_28_x86_64 \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d $(WHEELS) \
		$(WHEELS_LACKING) $(WHEELS_EXTRA)
	@if ls $(WHEELS) | grep -qiE '^(torch|nvidia|triton)'; then echo "error: $(WHEELS) holds torch, nvidia-* or triton: name what pulls them in WHEELS_EXTRA and use WHEELS_NODEPS=--no-deps"; exit 2; fi
	@du -sh $(WHEELS)
