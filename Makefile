# Two entry points: `make demo` (the main job: the paper's story in a few minutes, six attention kinds on
# a position-only and a content-based task, docs/demo.md) and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo tour test bench install clean

$(BIN)/.installed: pyproject.toml requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q -e '.[train,dev,hf,eval,log,docs]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/synthesizer compare run --preset demo --jobs 2 --out runs/demo

tour: install
	$(BIN)/python -m synthesizer.demo

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m synthesizer.bench attention

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
