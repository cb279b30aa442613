"""pytest setup for the needle package tests (python/tests).

The tests import the installed package (tools/run_tests.sh installs it into a
fresh virtual environment with `pip install .`).  Run from a source checkout
without installing, NEEDLE_LIBRARY=build/libneedle.so and PYTHONPATH=python
give the same package.  The acceptance suite's per-category table is printed
at the end of the run."""
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "golden")

SUMMARY_LINES = []


@pytest.fixture
def golden():
    return GOLDEN


def pytest_terminal_summary(terminalreporter):
    if SUMMARY_LINES:
        terminalreporter.write_sep("-", "measured: acceptance accuracy on the bundled model, binding cost (reported)")
        for line in SUMMARY_LINES:
            terminalreporter.write_line(line)
