# Two commands on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo lint test-slow test-min bench docs clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,examples,docs,dask]"
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -n 2 --dist worksteal -q

# The version-floor run: a second virtualenv at the minimum versions pyproject.toml
# declares (numpy, scipy, scikit-learn, joblib, the test extras and dask; see
# .ci/min_requirements.py), the same suite. A floor is raised only with its reason
# in CHANGELOG.md.
MIN_VENV ?= .venv-min
test-min: $(STAMP)
	test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(BIN)/python .ci/min_requirements.py > $(MIN_VENV)/floors.txt
	$(MIN_VENV)/bin/python -m pip install --quiet -r $(MIN_VENV)/floors.txt
	$(MIN_VENV)/bin/python -m pip install --quiet --no-deps -e .
	$(MIN_VENV)/bin/python -m pytest -n 2 --dist worksteal -q -p no:cacheprovider

test-slow: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m slow tests

demo: $(STAMP)
	$(BIN)/python examples/showcase.py

# The bench extra: diffprivlib adds peer rows to the tables when it imports;
# statsmodels ships half of benchmarks/real_data.py's datasets.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/run_all.py

# HTML documentation in doc/_build/html; runs the examples/plot_*.py gallery (each
# example must finish within 60 s) and fails on any Sphinx warning.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html doc doc/_build/html

clean:
	rm -rf $(VENV) $(MIN_VENV) .pytest_cache .ruff_cache
	rm -rf doc/_build doc/generated doc/auto_examples doc/sg_execution_times.rst
