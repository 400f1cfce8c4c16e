# acco — see README.md. Every target creates the virtual environment first if it is missing.
PY      ?= python3
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
WORLD   ?= 2
STEPS   ?= 300
OUT     ?= results/cpu-demo/$(METHOD)
METHOD  ?= acco

.PHONY: install test train-cpu demo-cpu clean

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

clean:
	rm -rf results/cpu-demo .pytest_cache

# One sbatch script per run of a paper experiment, plus submit_all.sh, in
# slurm/generated/<id>/<scale>/ (e.g. make sbatch-fig8 SCALE=paper; then sbatch one, or run submit_all.sh).
SCALE   ?= cpu
sbatch-%: $(STAMP)
	$(PYTHON) experiments/make_sbatch.py $* scale=$(SCALE)
