# hweval: two entry points do all set-up on a fresh machine.
#   make run   -> .venv, install, run the quick plan on this machine, print where the report is
#   make test  -> .venv, install with test extras, run pytest
# On a GPU node whose torch is preinstalled system-wide, keep it:  make VENV_FLAGS=--system-site-packages run

PYTHON ?= python3
VENV ?= .venv
VENV_FLAGS ?=
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# The CPU wheel this machine has; never let an unpinned 'torch' pull a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0
PLAN ?= plans/quick.yaml
PYTEST_ARGS ?=

.PHONY: run test install clean bench

$(VENV)/.stamp: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install "$(TORCH_PIN)"
	$(PIP) install -e '.[test]'
	touch $@

install: $(VENV)/.stamp

run: install
	$(VENV)/bin/hweval run --plan $(PLAN)

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) benchmarks/kernel_fidelity.py

clean:
	rm -rf $(VENV) out build *.egg-info
