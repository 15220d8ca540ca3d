# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUT ?= out/quickstart

.PHONY: run test test-slow bench frontier chain lint clean sacramento experiments

RUN_STAMP := $(VENV)/.installed-run

# `make run` installs the package alone; `make test` adds the test extra (pytest, cvxpy, ...).
$(RUN_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

run: $(RUN_STAMP)
	$(VENV)/bin/diffpriv optimize configs/quickstart.toml --out $(OUT)
	$(VENV)/bin/diffpriv certify $(OUT)/certificate.json
	$(VENV)/bin/diffpriv export $(OUT)/certificate.json --format csv --out $(OUT)/table.csv
	$(VENV)/bin/diffpriv plot $(OUT)/certificate.json --out $(OUT)/plot.png

# The tests run on every core, up to four workers (pytest-xdist; 1.4x on 2 cores); the heavier
# ones one at a time, for their memory.
test: $(STAMP)
	$(PY) -m pytest -q -n auto --maxprocesses 4 -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m "slow"

bench: $(STAMP)
	$(PY) benchmarks/optimality.py

frontier: $(RUN_STAMP)
	$(VENV)/bin/diffpriv sweep configs/quickstart.toml --budget home-vs-out=0.25:4:8 --log \
		--baselines krr,planar_laplace --out out/frontier

chain: $(STAMP)
	$(PY) experiments/categorical_chain.py --out out/categorical_chain/table.md

lint: $(STAMP)
	$(VENV)/bin/ruff check diffpriv tests benchmarks experiments

clean:
	rm -rf $(VENV) out

sacramento: $(STAMP)
	$(PY) -m pip install -q -e '.[experiments]'
	$(PY) experiments/sacramento.py --out out/sacramento

# Every experiment of experiments/README.md, each writing CSV and PDF/PNG under out/experiments
# (FULL=--full for the paper-scale runs where an experiment has one).
experiments: $(STAMP)
	$(PY) -m pip install -q -e '.[experiments]'
	$(PY) experiments/bernoulli_profiles.py --out out/experiments/bernoulli
	$(PY) experiments/categorical_chain.py --out out/experiments/categorical_chain/table.md
	$(PY) experiments/sacramento_frontier.py --out out/experiments/sacramento_frontier $(FULL)
	$(PY) experiments/sacramento.py --out out/experiments/sacramento
	$(PY) experiments/coupling_estimate.py --out out/experiments/coupling_estimate
	$(PY) experiments/tupling_tables.py --out out/experiments/tupling
	$(PY) experiments/wdp_continuous.py --out out/experiments/wdp_continuous/table.md
