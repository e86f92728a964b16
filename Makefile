# The two commands of the README. Both set up a fresh clone first (scripts/setup.sh).
VENV ?= .venv
PYTEST_ARGS ?=

.PHONY: setup quickstart test schema

setup:
	@scripts/setup.sh

quickstart: setup
	$(VENV)/bin/legorl apply specs/quickstart.yaml

# --dist loadgroup: the tests of one xdist_group (those sharing an expensive module fixture: a
# model, a tokenizer, a real run) go to one worker, which builds the fixture once.
test: setup
	$(VENV)/bin/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

schema: setup
	$(VENV)/bin/legorl schema
