# streamtrain: set-up, run and test from the project's own files.
#   make run    set up, then run the main job: `streamtrain demo` (one simulated day, dashboard
#               at http://127.0.0.1:8765/)
#   make test   set up, then lint, type-check and run the whole test suite (what CI runs)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PROTOS := streamtrain/proto/data_plane.proto streamtrain/proto/control_plane.proto
GRPC_PROTOS := streamtrain/proto/externalscaler.proto

.PHONY: setup run test suite lint typecheck unit integration proto build-tools system-tools clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt setup.py streamtrain/_columns.c streamtrain/sim/_queues.c
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "streamtrain needs Python 3.11, found " + sys.version' 
	@$(MAKE) --no-print-directory build-tools
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Install the Debian packages named in $(1) that are missing (as root with apt-get;
# otherwise say what is missing: the code or tests that need them will say so too).
define apt_install
	@missing="$(strip $(1))"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else \
	    echo "note: missing $$missing and cannot install (needs root and apt-get)"; \
	  fi; \
	fi
endef

HAVE_PYTHON_H = $(shell $(PYTHON) -c 'import os, sysconfig; print(int(os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))))')

# gcc and the Python headers build ingest's C column builder (setup.py); without them
# the package installs without it and ingest uses its slower pure-Python path.
build-tools:
	$(call apt_install,$(if $(shell command -v cc),,gcc) $(if $(filter 1,$(HAVE_PYTHON_H)),,python3-dev))

# Debian packages the tests use: docker-compose (1.29) validates docker/compose.yaml
# without a Docker engine; chromium is the browser the dashboard test drives through
# Playwright (Playwright never downloads a browser here); prometheus gives `promtool`
# (check and unit-test docker/prometheus/ rules) and the real Prometheus the scrape test
# starts on a loopback port.
system-tools:
	$(call apt_install,$(if $(shell command -v docker-compose),,docker-compose) $(if $(shell command -v chromium),,chromium) $(if $(shell command -v promtool),,prometheus))

run: setup
	$(BIN)/streamtrain demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup tests/unit

integration: setup
	$(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup tests/integration

# Four pytest processes (pytest-xdist). The suite waits on brokers, workers and timeouts
# more than it computes (with four processes about 1.5 of the two cores are busy on
# average), so four processes share two cores. The longest end-to-end runs load the
# machine: they form one xdist group, run one after another in one process and start
# first (tests/integration/scheduling.py), while the other processes take every other
# test one at a time as they free up. (Plain
# `--dist load` hands each process a share up front: one process got every integration
# test and the others idled once the unit tests were done.) The type check runs beside
# the suite: both must pass. TEST_JOBS=0 runs the suite in this process.
TEST_JOBS ?= 4

test: setup system-tools lint
	$(MAKE) --no-print-directory -j2 typecheck suite

suite: setup
	$(BIN)/pytest -n $(TEST_JOBS) --dist loadgroup

proto: setup
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. $(PROTOS)
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. $(GRPC_PROTOS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
