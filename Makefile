# paperclub: `make run` and `make test` are the whole quick start.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU-only PyTorch. On this kind of machine torch==2.13.0 resolves to a CPU
# wheel that is already on disk; elsewhere point pip at PyTorch's CPU index:
#   make run TORCH_INDEX=--index-url=https://download.pytorch.org/whl/cpu
TORCH       ?= torch==2.13.0
TORCH_INDEX ?=
STAMP  := $(VENV)/.installed

.PHONY: run test venv console bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH_INDEX) "$(TORCH)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/paperclub run --load-samples

console: $(STAMP)
	$(BIN)/paperclub console --load-samples

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
