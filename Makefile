# paperclub: `make run` and `make test` are the whole quick start.
# The interpreter: the first Python >= 3.11 found (3.11 first: it is what the image ships and
# what the tests run on). Override with `make run PYTHON=python3.12`.
PYTHON ?= $(or $(shell for p in python3.11 python3.12 python3.13 python3; do \
            $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 \
            && { echo $$p; break; }; done),python3.11)
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU-only PyTorch, from PyTorch's CPU index (PyPI's torch is the multi-GB CUDA build), as the
# Dockerfile does. A machine that cannot reach that index but has the wheel (a mirror, a local
# folder in pip's configuration) passes an empty index: `make test TORCH_INDEX=` (.ci/run does).
TORCH       ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
STAMP  := $(VENV)/.installed

.PHONY: run test check venv console bench clean lock image

venv: $(STAMP)

# The versions the image ships, so the tests run what ships, and the test tools' own
# (deploy/requirements-test.lock: deploy/requirements.lock's pins plus pytest and the rest, so a
# new release of one cannot turn a green tree red); torch and pip are left to the lines above
# (a CPU or a default torch build; the venv's own pip).
$(STAMP): pyproject.toml Makefile deploy/requirements-test.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps \
	    $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH)"
	grep -v -E '^(torch|pip)==' deploy/requirements-test.lock > $(VENV)/constraints.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -c $(VENV)/constraints.txt -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/paperclub run --load-samples

console: $(STAMP)
	$(BIN)/paperclub console --load-samples

LINT := $(BIN)/ruff check bot store bench tests

test: $(STAMP)
	$(LINT)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast loop: every test but the `slow` ones (the real model, processes, chaos, the container,
# long fuzzing: pyproject.toml's markers), stopping at the first failure, after the linter (ruff:
# pyproject.toml). `make test` runs the linter and every test.
# The tests that run on every backend run on SQLite alone here (CHECK_BACKENDS=sqlite,postgresql
# for both); `make test` runs them on PostgreSQL too.
# They run in CHECK_WORKERS processes (pytest-xdist; CHECK_WORKERS=0 for one): most of their time
# is waiting, so 4 on 2 cores took 68 s where one took 153 s. `make test` stays in one process.
CHECK_BACKENDS ?= sqlite
CHECK_WORKERS  ?= 4
check: $(STAMP)
	$(LINT)
	PAPERCLUB_TEST_BACKENDS=$(CHECK_BACKENDS) $(BIN)/python -m pytest -m "not slow" -x -q \
	    -n $(CHECK_WORKERS) $(PYTEST_ARGS)

# deploy/requirements.lock: the image's exact versions, from pyproject.toml and
# deploy/requirements.in (the CPU torch), for Linux x86_64 and Python 3.11; then
# deploy/requirements-test.lock: the same pins and the test extra's (what `make test` installs). Needs uv
# (pip install uv). Where PyTorch's index is not reachable, a folder with the wheel does:
#   make lock LOCK_TORCH='--find-links /opt/wheels'
UV         ?= uv
LOCK_TORCH ?= --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match
lock:
	$(UV) pip compile pyproject.toml deploy/requirements.in --python-version 3.11 \
	    --python-platform x86_64-manylinux_2_28 $(LOCK_TORCH) \
	    --custom-compile-command 'make lock' -o deploy/requirements.lock
	$(UV) pip compile pyproject.toml deploy/requirements.in --extra test -c deploy/requirements.lock \
	    --python-version 3.11 --python-platform x86_64-manylinux_2_28 $(LOCK_TORCH) \
	    --custom-compile-command 'make lock' -o deploy/requirements-test.lock

# The image, as a user builds it (CI's extra steps: deploy/ci-image-prereqs.sh).
image:
	docker build -f deploy/Dockerfile -t paperclub $(BUILD_ARGS) .

clean:
	rm -rf $(VENV) build *.egg-info
