# Each target sets up what it needs: a fresh clone runs `make demo` or `make test` directly.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-processes test check lint bench clean pythons dap-js

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

# Python 3.12 with this venv's Ray, for the 3.12 Ray tests and benchmarks: built once under
# .venv/pythons (~45 s: Ray's wheel), then found; nothing when pyenv has no 3.12.
pythons: $(STAMP)
	$(BIN)/python -m devtools.pythons 3.12

# Microsoft's DAP test client (@vscode/debugadapter-testsupport, pinned by its lock file) for
# the group session's acceptance test; node_modules is not committed. Without npm that test
# is skipped, saying so.
DAP_JS := tests/integration/dap_js
$(DAP_JS)/node_modules/.installed: $(DAP_JS)/package-lock.json
	cd $(DAP_JS) && npm ci --no-audit --no-fund --silent
	touch $@

dap-js:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(DAP_JS)/node_modules/.installed; \
	else echo "no npm: the DebugClient test is skipped"; fi

demo: $(STAMP)
	$(BIN)/python examples/ray_demo.py

demo-processes: $(STAMP)
	$(BIN)/python examples/processes_demo.py

# The test files run on three workers (pytest-xdist; a file's tests stay together, so a
# module's Ray cluster is started once, and the files that ask for the same cluster run one
# after another on one worker, which keeps it: tests/conftest.py); the longest first, as
# tests/conftest.py orders them; the 25 slowest are listed at the end. The 3.12 venv
# with Ray and the other Pythons' debugpy venvs are built (the first time) while the tests
# run: the few that need one wait for it on its lock (devtools/pythons.py), the rest do not;
# what a build said is printed if it failed.
TEST_WORKERS ?= 3
test: $(STAMP) dap-js
	$(BIN)/python -m devtools.pythons 3.12 > $(VENV)/pythons.log 2>&1 & builder=$$!; \
	$(BIN)/python -m devtools.pythons debugpy > $(VENV)/debugpy-pythons.log 2>&1 & debugpy_builder=$$!; \
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25; status=$$?; \
	wait $$builder || { echo "building the 3.12 venv failed:"; cat $(VENV)/pythons.log; \
	status=1; }; \
	wait $$debugpy_builder || { echo "building the debugpy venvs failed:"; \
	cat $(VENV)/debugpy-pythons.log; status=1; }; exit $$status

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
