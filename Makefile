# Each target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-processes test check lint bench clean pythons

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

# Python 3.12 with this venv's Ray, for the 3.12 Ray tests and benchmarks: built once under
# .venv/pythons (minutes: Ray's wheel), then found; nothing when pyenv has no 3.12.
pythons: $(STAMP)
	$(BIN)/python -m devtools.pythons 3.12

demo: $(STAMP)
	$(BIN)/python examples/ray_demo.py

demo-processes: $(STAMP)
	$(BIN)/python examples/processes_demo.py

# The test files run on three workers (pytest-xdist; a file's tests stay together, so a
# module's Ray cluster is started once); the 25 slowest are listed at the end.
TEST_WORKERS ?= 3
test: $(STAMP) pythons
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# The inner loop: the in-memory tests (no Ray, no subprocess hub) and the linters, ~1-2 min.
check: $(STAMP)
	$(BIN)/python -m pytest -q -m "not integration"
	$(MAKE) lint

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples devtools
	$(BIN)/mypy

bench: $(STAMP) pythons
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
