"""Every example a docstring shows (``>>>``) runs and prints what it says: the losses' docstrings promise a
runnable example of their math, and an example that no longer runs misleads the reader who copies it."""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import twotower

SRC = Path(twotower.__file__).parent
MODULES = sorted(
    ".".join(("twotower", *p.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
    for p in SRC.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def test_the_losses_show_examples():
    # the contract of losses/base.py: each loss's docstring carries a runnable example
    assert {"twotower.losses.softmax", "twotower.losses.bpr", "twotower.losses.listwise"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (output above)"
