# Two commands do all the set-up:  `make farm` builds the catalog, `make test` tests.
# Both create .venv on first use and install everything (pinned in pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1

.PHONY: farm test bench publish clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# The official model code, without its declared deps (xformers, open3d, CUDA torch).
	$(BIN)/python -m pip install --quiet --no-deps depth-anything-3==0.1.1
	touch $(STAMP)

farm: $(STAMP)
	$(BIN)/python -m stages.params
	$(BIN)/dvc repro

test: $(STAMP)
	$(BIN)/python -m pytest

publish: $(STAMP)
	$(BIN)/python -m stages.publish

bench: $(STAMP)
	$(BIN)/python -m stages.bench --height 896 --width 504

clean-venv:
	rm -rf $(VENV)
