# Two commands do all the set-up:  `make farm` builds the catalog, `make test` tests.
# Both create .venv on first use and install everything (pinned in pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1

.PHONY: farm test bench publish gpu-adapter clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# The official model code, without its declared deps (xformers, open3d, CUDA torch).
	$(BIN)/python -m pip install --quiet --no-deps depth-anything-3==0.1.1
	touch $(STAMP)

# The GPU check runs every shipped file on LiteRT's GPU accelerator. Without a GPU that needs
# Mesa's software Vulkan driver: probed first (2 s), installed only when missing (root, apt).
gpu-adapter: $(STAMP)
	$(BIN)/python -m stages.gpu_setup

farm: $(STAMP)
	$(BIN)/python -m stages.params
	$(BIN)/python -m stages.gpu_setup --unless-skipped
	$(BIN)/dvc repro

test: gpu-adapter
	$(BIN)/python -m pytest

# make publish ARGS=--allow-unchecked-gpu  to publish a catalog whose GPU check was skipped
publish: $(STAMP)
	$(BIN)/python -m stages.publish $(ARGS)

bench: $(STAMP)
	$(BIN)/python -m stages.bench --height 896 --width 504

clean-venv:
	rm -rf $(VENV)
