# The two commands of the README. Both set up a fresh clone first (scripts/setup.sh).
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: setup quickstart test schema

setup:
	@scripts/setup.sh

quickstart: setup
	$(VENV)/bin/legorl apply specs/quickstart.yaml

test: setup
	$(VENV)/bin/python -m pytest -n auto $(PYTEST_ARGS)

schema: setup
	$(VENV)/bin/legorl schema
