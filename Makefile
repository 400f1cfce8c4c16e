# acco — see README.md. Every target creates the virtual environment first if it is missing.
PY      ?= python3
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
WORLD   ?= 2
STEPS   ?= 300
OUT     ?= results/cpu-demo/$(METHOD)
METHOD  ?= acco
SCALE   ?= cpu

.PHONY: install test train-cpu demo-cpu figures reproduce clean bench rehearse rehearsal-data gpu-check

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	# torch is pinned in pyproject.toml (2.13.0: the CPU build on dev/CI machines, CUDA on clusters)
	$(PYTHON) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The test suite (CPU, gloo, 1-4 local worker processes, tiny models).
test: $(STAMP)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests

# The main job at CPU scale: one method on $(WORLD) local workers, tiny GPT-Neo, embedded stories.
train-cpu: $(STAMP)
	$(PYTHON) experiments/train.py method=$(METHOD) world_size=$(WORLD) train.steps=$(STEPS) \
		train.eval_every=50 out_dir=$(OUT) overwrite=true

# All four methods side by side at CPU scale (results/cpu-demo/<method>).
demo-cpu: $(STAMP)
	for m in ddp dpu wp acco; do $(MAKE) --no-print-directory train-cpu METHOD=$$m || exit 1; done

# A paper figure or table: run what is missing (SCALE=cpu|paper|rehearsal, LAUNCHER=local|slurm), then plot.
# The rehearsal runs through Slurm by default (the local cluster: slurm/local-cluster/start).
LAUNCHER ?= $(if $(filter rehearsal,$(SCALE)),slurm,local)
REHEARSAL_DATA ?= $(or $(ACCO_REHEARSAL_DATA),data/rehearsal)
export ACCO_REHEARSAL_DATA := $(REHEARSAL_DATA)
EXPERIMENT_IDS := fig4 fig5 fig6 fig7 fig8 fig9 fig10 fig11 table1 table2 table3
reproduce-%: $(STAMP)
	@echo "SCALE=$(SCALE) LAUNCHER=$(LAUNCHER)"
	$(if $(filter rehearsal,$(SCALE)),$(PYTHON) experiments/make_rehearsal_data.py --out $(REHEARSAL_DATA))
	$(PYTHON) experiments/reproduce.py $* --scale $(SCALE) --launcher $(LAUNCHER)

# Every figure and table (at the CPU scale by default).
reproduce: $(STAMP)
	@echo "SCALE=$(SCALE) LAUNCHER=$(LAUNCHER)"
	for e in $(EXPERIMENT_IDS); do $(PYTHON) experiments/reproduce.py $$e --scale $(SCALE) --launcher $(LAUNCHER) || exit 1; done

# Figures and tables from the results that exist (no training).
figures: $(STAMP)
	$(PYTHON) analysis/make_figures.py results --scale $(SCALE)

# The dress rehearsal: every paper experiment's paper-scale configuration with only its sizes shrunk
# (conf/experiment/*.yaml `rehearsal:`), on local copies of the data in the real formats
# ($(REHEARSAL_DATA)), through Slurm on the local cluster (started if needed: root), then every
# figure and table from results/rehearsal/. Not part of `make test`.
rehearsal-data: $(STAMP)
	$(PYTHON) experiments/make_rehearsal_data.py --out $(REHEARSAL_DATA)

rehearse: rehearsal-data
	bash slurm/local-cluster/status >/dev/null 2>&1 || bash slurm/local-cluster/start
	for e in $(EXPERIMENT_IDS); do $(PYTHON) experiments/prepare_data.py +experiment=$$e scale=rehearsal || exit 1; done
	for e in $(EXPERIMENT_IDS); do $(PYTHON) experiments/reproduce.py $$e --scale rehearsal --launcher slurm || exit 1; done
	$(MAKE) --no-print-directory figures SCALE=rehearsal

clean:
	rm -rf results/cpu-demo .pytest_cache

# One sbatch script per run of a paper experiment, plus submit_all.sh, in
# slurm/generated/<id>/<scale>/ (e.g. make sbatch-fig8 SCALE=paper; then sbatch one, or run submit_all.sh).
sbatch-%: $(STAMP)
	$(PYTHON) experiments/make_sbatch.py $* scale=$(SCALE)

# The performance testbed: every method on an emulated slow link (network namespaces + tc), side by
# side, medians over rounds -> results/bench/ (README: "A slow interconnect and make bench").
BENCH_ARGS ?=
bench: $(STAMP)
	$(PYTHON) experiments/bench.py --out results/bench $(BENCH_ARGS)

# Everything CUDA-specific in at most 8 minutes on one GPU (tests marked gpu, overlap from CUDA
# events, tokens/s and MFU of the 36M and 125M models) -> results/gpu/. Without a GPU: says so, exit 0.
gpu-check: $(STAMP)
	$(PYTHON) experiments/gpu_check.py --out results/gpu
