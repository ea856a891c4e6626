# Two commands do all the set-up on a fresh machine:
#   make demo   installs what the main job needs and runs it (a live ScienceWorld demo)
#   make test   installs what the tests need and runs them (.ci/run calls this)
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: demo test lint bench

demo:
	$(PIP) install -q -e '.[scienceworld]'
	$(PYTHON) -m xtree_gym demo

test:
	$(PIP) install -q -e '.[test]'
	$(PYTHON) -m pytest -q -m "not slow"

lint:
	ruff check . && ruff format --check . && mypy

bench:
	$(PYTHON) benchmarks/bench_miner.py --sizes 10000 100000
