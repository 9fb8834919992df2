# Two commands do all set-up: `make demo` and `make test`. Both create and reuse .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lint test test-tf2.20 demo clean

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

# Two workers: the suite is mostly TensorFlow start-up and Python, which two cores run side by side;
# worksteal keeps both busy to the end (a few tests train for a minute or more).
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal --durations=25 tests

# The suite on TensorFlow 2.20 (what TPU VMs ship) in an environment of its own; not part of CI,
# which tests 2.21 (both runs take about 7 minutes on 2 cores).
VENV_TF220 := .venv-tf2.20
STAMP_TF220 := $(VENV_TF220)/.installed

$(STAMP_TF220): setup.py
	test -x $(VENV_TF220)/bin/python || $(PYTHON) -m venv $(VENV_TF220)
	$(VENV_TF220)/bin/python -m pip install --quiet -e ".[test]" "tensorflow==2.20.*" \
		"tensorflow-text==2.20.*" "tensorflow-serving-api==2.20.*"
	touch $(STAMP_TF220)

test-tf2.20: $(STAMP_TF220)
	$(VENV_TF220)/bin/python -m pytest -q -n 2 --dist worksteal tests

demo: $(STAMP)
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) $(VENV_TF220) demo_output bench_output
