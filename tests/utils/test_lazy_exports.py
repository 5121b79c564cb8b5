"""Public names imported on first use keep naming what they named when the package imported them eagerly."""
import subprocess
import sys


def test_a_function_named_as_its_module_stays_the_function_after_the_module_is_imported():
    # `twotower evaluate` imports twotower.pipeline.evaluate_run (the module); Python then bound that module to the
    # package's `evaluate_run`, and `tt.evaluate_run(run)` raised "'module' object is not callable"
    code = (
        "import types, twotower as tt\n"
        "import twotower.pipeline.evaluate_run, twotower.pipeline.prepare, twotower.explain.faithfulness\n"
        "import twotower.pipeline as p, twotower.explain as e\n"
        "for f in (tt.evaluate_run, p.evaluate_run, p.prepare, e.faithfulness):\n"
        "    assert callable(f) and not isinstance(f, types.ModuleType), f\n"
        "from twotower.pipeline import evaluate_run\n"
        "assert evaluate_run is p.evaluate_run\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    import pytest

    import twotower.pipeline

    with pytest.raises(AttributeError, match="'twotower.pipeline' has no attribute 'nope'"):
        twotower.pipeline.nope  # noqa: B018
