# Two commands do all the set-up:  `make farm` builds the catalog and its report, `make test` tests.
# Both create .venv on first use and install everything (pinned in pyproject.toml).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
export DVC_NO_ANALYTICS := 1
# torch==2.13.0 (pyproject.toml) comes from the configured pip index, whatever build that serves:
# PyPI serves Linux the CUDA build, which pulls several GB of nvidia-* wheels. On such a machine
# `make TORCH_INDEX=https://download.pytorch.org/whl/cpu` (on a new .venv: make clean-venv first)
# adds PyTorch's CPU wheel index, and pip takes its 2.13.0+cpu, the CPU build (a local version
# sorts above plain 2.13.0). Empty (the default): the configured index alone.
TORCH_INDEX ?=

.PHONY: help demo clean-demo farm report test bench bench-gpu bench-npu bench-farm bench-build bench-install publish remote gpu-adapter test-long browser ssh-server dvc-yaml keys clean-venv

# The farm needs Python 3.11 (its torch build); the client alone (`pip install .`) any >= 3.9.
$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(None if sys.version_info[:2] == (3, 11) else "the farm needs Python 3.11, $(PYTHON) is %d.%d: run make PYTHON=python3.11" % sys.version_info[:2])'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e '.[farm,npu,dev,s3,ssh]'
	# npu: onnxruntime-qnn, Qualcomm's QAIRT host libraries under Qualcomm's AI Stack License (pyproject.toml).
	# The official model code, without its declared deps (xformers, open3d, CUDA torch).
	$(BIN)/python -m pip install --quiet --no-deps depth-anything-3==0.1.1
	# model-signing (make publish signs with it), apart: pip cannot resolve it with the converter's pins
	# (pyproject.toml, the verify extra); pip then reports xdsl's typing-extensions pin, which the farm outgrows.
	@echo "Installing the [verify] extra apart. Expected: pip's 'ERROR: ... typing-extensions' line below (model-signing needs typing-extensions >= 4.14.1, the converter's xdsl declares < 4.13; the farm runs with the newer one: pyproject.toml)"
	$(BIN)/python -m pip install --quiet -e '.[verify]'
	touch $(STAMP)

# Every target with its one-line description: the `## ` comment on its line. Plain `make` builds only the venv.
help:  ## list every make target with what it does
	@awk -F ':[^#]*## ' '/^[a-z][a-z-]*:.*## / { printf "make %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

# The GPU check runs every shipped file on LiteRT's GPU accelerator. Without a GPU that needs
# Mesa's software Vulkan driver: probed first (2 s), installed only when missing (root, apt).
gpu-adapter: $(STAMP)  ## install Mesa's software Vulkan driver for the GPU check where missing (root, apt)
	$(BIN)/python -m da3_litert_farm.gpu.gpu_setup

# The report's check opens it in headless Chromium: Debian's chromium + chromium-driver (root, apt).
browser: $(STAMP)  ## install Chromium for the report's check where missing (root, apt)
	$(BIN)/python -m da3_litert_farm.report.browser_setup

# make farm JOBS=N: the aspects built N at a time on a Dask LocalCluster, each in a git worktree
# sharing the DVC cache, then one `dvc repro` restores them all (da3_litert_farm/ops/build.py).
# Either holds the checkout's farm lock: a second build here is refused, naming the first (ops/farm_lock.py);
# DVC runs with dvc.lock written atomically, so a killed build leaves it readable (ops/atomic_dvc.py); the build
# ends with a summary: what ran, each cell's gates and times, the next step (ops/farm_repro.py).
farm: $(STAMP)  ## build the catalog and its report: the venv, then dvc repro (JOBS=N: N cells at a time)
	$(BIN)/python -m stages.params
	$(BIN)/python -m da3_litert_farm.gpu.gpu_setup --unless-skipped
	$(if $(JOBS),$(BIN)/python -m da3_litert_farm.ops.build --jobs $(JOBS),$(BIN)/python -m da3_litert_farm.ops.farm_lock $(BIN)/python -m da3_litert_farm.ops.farm_repro)

# The whole loop offline in minutes, under .demo/ (git ignores it): a small farm from stress weights built, signed
# with a throwaway key, published to a local remote and pulled for a phone camera (da3_litert_farm/dev/demo.py).
demo: gpu-adapter  ## the whole loop in minutes, offline, from stress weights: build, sign, publish, pull (in .demo/)
	$(BIN)/python -m da3_litert_farm.dev.demo

clean-demo:  ## remove what make demo made (.demo/)
	rm -rf .demo

# The farm (artifacts/report/index.html is its last stage), then the page checked in headless
# Chromium from disk, and its screenshot: artifacts/report/screenshot.png. Opens no window.
report: farm browser  ## the farm, then its report checked in headless Chromium, with a screenshot
	$(BIN)/python -m da3_litert_farm.report.report_check

# The SSH remote tests start their own sshd on a loopback port: OpenSSH's server (root, apt).
ssh-server: $(STAMP)  ## install OpenSSH's server for the SSH remote tests where missing (root, apt)
	$(BIN)/python -m da3_litert_farm.dev.sshd_setup

# Two workers, one per core: a run is mostly one busy core (user time ~ wall time), so a second worker
# fills the other. Each module stays on one worker whole (tests/conftest.py, SHARED_SESSION_BUILDS).
test: gpu-adapter browser ssh-server  ## run the whole test suite (two workers)
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The full versions of make test's slow scenarios: the fault suite (tests/test_faults_*.py) at 20 random kill
# points per fault instead of 2, writing docs/figures/reliability.json, the table docs/reliability.md shows
# (rendered there by dev/figures); and the shipped model at every default camera shape, not only the largest.
test-long: gpu-adapter ssh-server  ## the fault suite at 20 kill points per fault, and every default camera shape
	FARM_FAULT_TRIALS=20 FARM_FAULTS_RECORD=1 $(BIN)/python -m pytest tests/test_faults_*.py
	$(BIN)/python -m da3_litert_farm.dev.figures docs/reliability.md
	FARM_TEST_LONG=1 $(BIN)/python -m pytest tests/test_full_shapes.py

# make publish ARGS=--unsigned  to publish without a publisher key (make keys); apps that pin a key refuse it;
# make publish ARGS=--allow-unchecked-gpu  to publish a catalog whose GPU check was skipped;
# ARGS=--allow-stress  one built from stress weights (a dry run: everything then says so);
# ARGS=--allow-noncommercial  one whose weights licence does not allow commercial use (CC BY-NC: README.md, Licence)
publish: $(STAMP)  ## push the built catalog's files to the DVC remote, sign and tag the version (ARGS=--help)
	$(BIN)/python -m da3_litert_farm.ops.publish $(ARGS)

# The publisher's signing key pair, which make publish signs every release with: written at $$FARM_SIGNING_KEY,
# default ~/.config/da3-litert-farm/publisher.pem (mode 0600, never in the repository), and the public key
# beside it (.pub), which app builds pin (farm pull --trust). Never overwrites a key.
keys: $(STAMP)  ## write the publisher's signing key pair, outside the repository
	$(BIN)/python -m da3_litert_farm.ops.signing keys

# The DVC remote publish pushes to and app builds pull from (.dvc/config, committed): shown, or
# pointed elsewhere with URL=s3://BUCKET/FOLDER [ENDPOINT=https://...] or URL=ssh://USER@HOST/FOLDER.
remote: $(STAMP)  ## show the DVC remote, or point it elsewhere: URL=s3://... or ssh://... [ENDPOINT=...]
	$(BIN)/python -m da3_litert_farm.ops.remote $(URL) $(if $(ENDPOINT),--endpoint $(ENDPOINT))

# make bench ARGS=--compare-upsamplers  also times each upsampler (other flags: python -m da3_litert_farm.dev.bench -h)
bench: $(STAMP)  ## time one conversion and its inference (ARGS=...)
	$(BIN)/python -m da3_litert_farm.dev.bench --height 896 --width 504 $(ARGS)

# Where the GPU check's time goes, for one built cell MODEL-TIER-ASPECT (make farm first): set-up, compile, each
# inference, core use; ARGS="--perf --setting NAME:VAR=VALUE" to compare driver settings.
bench-gpu: gpu-adapter  ## profile the GPU check of one built cell (CELL=small-896-9x16)
	$(BIN)/python -m da3_litert_farm.dev.bench_gpu $(or $(CELL),small-896-9x16) $(ARGS)

# What compiling one shape for Qualcomm NPUs costs, and the HTP simulator's fidelity (docs/npu.md); the shipped
# 9:16 shape by default, ARGS="--height 126 --width 224 --simulate all" for every chip at the tests' shape.
bench-npu: $(STAMP)  ## time LiteRT's NPU compile per Qualcomm chip and run the HTP simulator (ARGS=...)
	$(BIN)/python -m da3_litert_farm.dev.bench_npu $(or $(ARGS),--height 896 --width 504)

# What the NPU stage adds to make farm: the shipped params from nothing (stress weights) without NPU files, then with.
bench-farm: gpu-adapter  ## time make farm's shipped matrix without NPU files, then what the npu section adds
	$(BIN)/python -m da3_litert_farm.dev.bench_farm $(ARGS)

# Sequential dvc repro vs make farm JOBS=2, the run-cache, a fresh clone; an estimate for many machines.
bench-build: gpu-adapter  ## time sequential and parallel builds, the run-cache and a fresh clone
	$(BIN)/python -m da3_litert_farm.dev.bench_build $(ARGS)

# What `pip install <farm repo>` (the client) costs an app build, next to the full farm.
bench-install: $(STAMP)  ## what installing the client costs an app build, next to the farm
	$(BIN)/python -m da3_litert_farm.dev.bench_install $(ARGS)

# dvc.yaml's code deps, rewritten from what each stage imports (da3_litert_farm/dev/dvc_yaml.py; standard
# library only, so no .venv needed).
dvc-yaml:  ## rewrite dvc.yaml's code dependencies from what each stage imports
	$(PYTHON) -m da3_litert_farm.dev.dvc_yaml --write

clean-venv:  ## remove the venv
	rm -rf $(VENV)
