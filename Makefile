# The two commands of the README. Both set up a fresh clone first (scripts/setup.sh).
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: setup quickstart test lint schema

setup:
	@scripts/setup.sh

quickstart: setup
	$(VENV)/bin/legorl apply specs/quickstart.yaml

# --dist loadfile: a test module goes to one worker, which builds its module fixtures (a model,
# a tokenizer, a real run) once. (--dist loadgroup would group by xdist_group marks, but with
# pytest 9.2 xdist 3.8 ignores them without a word: pytest-xdist issue 1386.)
# --no-loadscope-reorder: modules start in collection order, which conftest.py makes the longest
# first (slow(minutes=N)), so no long module starts last and runs on alone. --durations: the
# slowest tests close the log, to keep the suite's time in view. One worker more than there are
# cores: many tests spend their time waiting on a harness, a container or a server, and on 2
# cores 3 workers ran the suite in 23.7 minutes where 2 took 31 (clean clones, 1502 tests).
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: setup
	$(VENV)/bin/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

# ruff and mypy with pyproject.toml's configuration (tests/test_lint.py, tests/test_types.py run the same)
lint: setup
	$(VENV)/bin/python -m ruff check lego_rl plugins
	$(VENV)/bin/python -m mypy

schema: setup
	$(VENV)/bin/legorl schema
