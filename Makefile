# Two entry points: `make demo` (the main job: the quick comparison of every variant on the shipped
# SOTU corpus) and `make test`. Both create .venv on first use.
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
	$(BIN)/synthesizer compare --preset lm --size quick --jobs 2 --out runs/demo

tour: install
	$(BIN)/python -m synthesizer.demo

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m synthesizer.bench attention

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
