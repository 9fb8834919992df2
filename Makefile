# Two commands do all set-up: `make demo` and `make test`. Both create and reuse .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lint test demo clean

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

# ruff.toml holds the settings: lint errors and unformatted files both fail.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two workers: the suite is mostly TensorFlow start-up and Python, which two cores run side by side.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 tests

demo: $(STAMP)
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) demo_output bench_output
