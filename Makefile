# Quick start:  make reproduce   (set up, regenerate figures at quick sizes)
#               make test        (set up, run the whole test suite)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
PYTEST_ARGS ?= -n 2

.PHONY: help venv build test lint mutation reproduce benchmarks readme notebook docs clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install -q -e '.[test,notebooks,docs,sweep,fast]'
	touch $(STAMP)

venv: $(STAMP)  ## create .venv and install the project with its test extras

build: venv  ## (re)build the C extension in place
	$(PY) setup.py -q build_ext --inplace

test: build  ## run the whole test suite (unit, fuzz, interop with real peers)
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv  ## ruff
	$(PY) -m ruff check .

MUTATION_PARALLEL ?= 1
mutation: build  ## mutation testing of the safety checks (slow; not in make test); GROUPS="tls12 sine" runs some; report in results/mutation/
	$(PY) mutation/run.py $(GROUPS) --parallel $(MUTATION_PARALLEL)

reproduce: build  ## regenerate every figure and table at quick sizes into results/
	$(PY) notebooks/run_all.py $(if $(FULL),--full,)

benchmarks: build  ## run every benchmark (each ratio the median of 5 interleaved repeats against a reference measured in the same run, --repeats; JSON with repeats and wall_s in results/benchmarks/)
	mkdir -p results/benchmarks
	$(PY) benchmarks/bench_record.py --json results/benchmarks/record.json
	$(PY) benchmarks/bench_https.py --json results/benchmarks/https.json
	$(PY) benchmarks/bench_https.py --small --json results/benchmarks/https_small.json
	$(PY) benchmarks/bench_handshake.py --json results/benchmarks/handshake.json
	$(PY) benchmarks/bench_splice.py --json results/benchmarks/splice.json
	$(PY) benchmarks/bench_sine.py --json results/benchmarks/sine.json
	$(PY) benchmarks/bench_traces.py --json results/benchmarks/traces.json
	$(PY) benchmarks/bench_drive.py --json results/benchmarks/drive.json
	$(PY) benchmarks/bench_barnraising.py --json results/benchmarks/barnraising.json
	$(PY) benchmarks/bench_barnraising_model.py --json results/benchmarks/barnraising_model.json --sweep --sweep-json results/benchmarks/barnraising_sweep.json
	$(PY) benchmarks/bench_linktestbed.py --csv results/benchmarks/linktestbed.csv
	$(PY) benchmarks/bench_reverse_ssl.py --throughput --json results/benchmarks/reverse_ssl.json
	$(PY) benchmarks/bench_sweep.py --json results/benchmarks/sweep.json
	$(PY) benchmarks/bench_sslacc.py --json results/benchmarks/sslacc.json
	$(PY) benchmarks/bench_sslacc_failover.py --json results/benchmarks/sslacc_failover.json
	$(PY) benchmarks/bench_sslacc_cluster.py --json results/benchmarks/sslacc_cluster.json
	$(PY) -m sslacc_sim.aio.linux.campaign --trials 320 --seed 1 --out results/sslacc_campaign --json results/benchmarks/sslacc_campaign.json
	$(PY) -m sslacc_sim.aio.linux.campaign --layout buckets --trials 320 --baselines 32 --seed 1 --out results/sslacc_campaign_buckets --json results/benchmarks/sslacc_campaign_buckets.json
	$(PY) -m sslacc_sim.aio.linux.campaign --layout buckets --modes join --trials 60 --seed 1 --out results/sslacc_campaign_join --json results/benchmarks/sslacc_campaign_join.json
	$(PY) -m sslacc_sim.aio.linux.campaign --layout buckets --modes join-kill,rejoin --trials 40 --seed 1 --out results/sslacc_campaign_joinfaults --json results/benchmarks/sslacc_campaign_joinfaults.json
	$(PY) -m sslacc_sim.aio.linux.campaign --layout buckets --modes master-kill --trials 40 --seed 1 --window 0,0.5 --out results/sslacc_campaign_masterkill --json results/benchmarks/sslacc_campaign_masterkill.json
	$(PY) -m sslacc_sim.aio.linux.campaign --layout buckets --modes donor-kill --trials 40 --seed 1 --window 0,0.5 --out results/sslacc_campaign_donorkill --json results/benchmarks/sslacc_campaign_donorkill.json
	$(PY) benchmarks/bench_webalps.py --json results/benchmarks/webalps.json
	$(PY) benchmarks/bench_webalps_host.py --json results/benchmarks/webalps_host.json --csv results/benchmarks/webalps_host.csv

notebook: build  ## open the notebooks in JupyterLab from the project's venv (quick sizes; REPRODUCE_QUICK=0 for full)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

docs: build  ## build the documentation site into build/docs/html (Sphinx, warnings are errors; sources in docs/)
	mkdir -p build/docs/src
	$(PY) -m sphinx -q -E -W --keep-going -b html -c docs -d build/docs/doctrees build/docs/src build/docs/html

readme: venv  ## copy the result files the README quotes to docs/results/ and regenerate its tables
	$(PY) notebooks/summarize.py --update

clean:
	rm -rf $(VENV) build *.egg-info results tls12/*.so sine/*.so
