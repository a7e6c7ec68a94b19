# pnsolve developer entry points. Every target creates .venv and installs what it
# needs, so each works on a fresh clone. torch is pinned in constraints.txt.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet -c constraints.txt
# KeOps compiles formulas with g++ on first use; keep its builds inside the checkout.
export KEOPS_CACHE_FOLDER := $(CURDIR)/.keops_cache
export MPLBACKEND := Agg
export NO_MKDOCS_2_WARNING := 1
JOBS ?= 2

.PHONY: run test bench bench-studies docs lint format clean venv gpu-wheels gpu-check

$(VENV)/.core: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.core
	$(PIP) -e '.[dev,keops,peers,docs]'
	touch $@

venv: $(VENV)/.dev

run: $(VENV)/.core
	$(VENV)/bin/pnsolve demo --out outputs/demo

test: $(VENV)/.dev
	PNSOLVE_SMOKE=1 $(PY) -m pytest -n $(JOBS) -q

# the ratio benchmarks (under an hour); the long studies resume where they stopped
# (outputs/bench-studies/; ARGS=--fresh starts over, ARGS=--quick at small sizes)
bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py $(ARGS)

bench-studies: $(VENV)/.dev
	$(PY) benchmarks/run_all.py --studies $(ARGS)

docs: $(VENV)/.dev
	$(VENV)/bin/mkdocs build --strict --site-dir site

# ruff on everything we ship or run; mypy on the package (settings in pyproject.toml)
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check pnsolve tests tutorials benchmarks
	$(VENV)/bin/ruff format --check pnsolve tests tutorials benchmarks
	$(VENV)/bin/mypy pnsolve

format: $(VENV)/.dev
	$(VENV)/bin/ruff check --fix pnsolve tests tutorials benchmarks
	$(VENV)/bin/ruff format pnsolve tests tutorials benchmarks

# The prepared device check (docs/gpus.md). `gpu-wheels` runs here (needs the package
# index): the wheels a bare GPU machine lacks, pure Python, into .gpu-wheels/ (ignored;
# carry it there). `gpu-check` runs there with that machine's python3 and torch:
# `make gpu-check OUT=DIR [QUICK=1] [DEVICE=cuda]`; DEVICE=cpu is a dry run here.
GPU_WHEELS := .gpu-wheels
gpu-wheels: $(VENV)/.dev
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PY) -m pip wheel --quiet --no-deps -c constraints.txt -w $(GPU_WHEELS) pykeops keopscore
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: -c constraints.txt \
		-d $(GPU_WHEELS) probnum arviz-stats==0.8.0
	ls -l $(GPU_WHEELS)

gpu-check:
	PYTHON=$(if $(filter cpu,$(DEVICE)),$(PY),python3) DEVICE=$(or $(DEVICE),cuda) \
		QUICK=$(QUICK) OUT=$(or $(OUT),gpu-check-out) bash .ci/gpu-check

clean:
	rm -rf $(VENV) site outputs .keops_cache .pytest_cache .hypothesis $(GPU_WHEELS) gpu-check-out
