# One definition of "check", shared by developers and .ci/run.
# `make demo` runs the main job on the bundled examples; `make test` runs every test tier.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test lint typecheck contracts rules check bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

EXAMPLES := code-review code-generation refactoring debugging
demo: install
	@# Exit 1 means "some episodes failed", which the examples are built to show.
	$(VENV)/bin/evalstream up --metrics-port 0 $(foreach d,$(EXAMPLES),--suite examples/$(d)/suite.yaml) \
		$(foreach d,$(EXAMPLES),examples/$(d)/episodes.jsonl) || test $$? -eq 1

test: install
	bash scripts/system-deps.sh
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy evalstream tests bench examples scripts

# Layers one way (import-linter), and no import cycle inside a package.
contracts: $(STAMP)
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_import_cycles.py

# Prometheus alert rules: syntax and their unit tests (promtool ships with Debian's prometheus).
rules:
	bash scripts/system-deps.sh
	promtool check rules deploy/prometheus/rules/*.yml
	promtool test rules deploy/prometheus/tests/*.yml

check: lint typecheck contracts rules test

bench: install
	$(PY) bench/engine_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist
