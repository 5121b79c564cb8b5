# Two commands do all the set-up: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch 2.13.0 lies on this machine's disk; an unpinned `torch`
# could pull a multi-GB CUDA build, so it is installed first and pinned.
TORCH_PIN ?= torch==2.13.0

.PHONY: install demo test test-all bench lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q "$(TORCH_PIN)"
	$(BIN)/python -m pip install -q -e '.[text,onnx,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/twotower demo --out runs/demo

test: install
	$(BIN)/python -m pytest -m "not slow"

lint: install
	$(BIN)/ruff check src tests bench examples

test-all: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/movielens100k.py

clean:
	rm -rf $(VENV) runs .pytest_cache
