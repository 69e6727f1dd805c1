# streamtrain: set-up, run and test from the project's own files.
#   make run    set up, then run the main job (for now: the embedded broker; `streamtrain demo`
#               once issue #9 lands)
#   make test   set up, then lint, type-check and run the whole test suite (what CI runs)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PROTOS := streamtrain/proto/data_plane.proto streamtrain/proto/control_plane.proto

.PHONY: setup run test lint typecheck unit integration proto system-tools clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "streamtrain needs Python 3.11, found " + sys.version' 
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Debian's docker-compose (1.29) validates docker/compose.yaml without a Docker engine.
system-tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; \
	  else \
	    echo "note: docker-compose is missing and cannot be installed here (needs root and apt-get); the compose validation test will say so"; \
	  fi; }

run: setup
	$(BIN)/streamtrain broker

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest tests/unit

integration: setup
	$(BIN)/pytest tests/integration

test: setup system-tools lint typecheck
	$(BIN)/pytest

proto: setup
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. $(PROTOS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
