# Everything a fresh machine needs: `make demo` and `make test` create .venv and install the
# exact pins of constraints.txt before they run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# checkov, for tests/infra/test_scanners.py: it pins boto3==1.35.49, which aioboto3's pins
# (boto3 1.40.46..1.40.61) exclude, so it gets a venv of its own (pins: constraints-scan.txt).
SCAN_VENV  := .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.installed

.PHONY: demo test lint typecheck unit install scanners clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade "pip>=24"
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

$(SCAN_STAMP): constraints-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --upgrade "pip>=24"
	$(SCAN_VENV)/bin/pip install --quiet -c constraints-scan.txt checkov
	touch $(SCAN_STAMP)

install: $(STAMP)

scanners: $(SCAN_STAMP)

demo: $(STAMP)
	$(BIN)/sqsbatch demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) $(SCAN_STAMP)
	SCANNERS_REQUIRED=1 $(BIN)/pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) $(SCAN_VENV) .mypy_cache .pytest_cache .ruff_cache
