import subprocess
import sys

import twotower


def test_every_public_name_resolves():
    for name in twotower.__all__:
        assert getattr(twotower, name) is not None, name


def test_import_is_cheap_and_side_effect_free():
    code = "import sys, twotower; print('torch' in sys.modules, 'faiss' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_explanations_are_exported_from_the_top_level():
    import twotower.explain

    assert {"explain_recommendation", "explain_recommendations"} <= set(twotower.__all__)
    assert twotower.explain_recommendations is twotower.explain.explain_recommendations
    assert twotower.explain_recommendation is twotower.explain.explain_recommendation
