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


def test_what_the_cli_s_explain_and_export_call_is_exported_from_the_top_level():
    # `twotower explain` (external ids) and `twotower export` had no name in twotower.__all__: a notebook holding the
    # item ids tt.recommend returns had to map them to rows, or import from twotower.explain / twotower.export
    import twotower.explain
    import twotower.export

    assert {"explain_by_id", "export_onnx"} <= set(twotower.__all__)
    assert twotower.explain_by_id is twotower.explain.explain_by_id
    assert twotower.export_onnx is twotower.export.export_onnx


def test_the_trained_run_s_public_methods_say_what_they_take():
    # help(tt.TrainedRun) showed user_row, seen_rows, scores_for_users, score_pairs, fingerprint and n_items bare:
    # whether they take ids or rows, and what shape comes back, was found only by reading the source
    import inspect

    run_cls = twotower.TrainedRun
    bare = [name for name, member in vars(run_cls).items() if not name.startswith("_")
            and not inspect.getdoc(member.fget if isinstance(member, property) else getattr(run_cls, name))]
    assert bare == []


def _undocumented(cls: type) -> list[str]:
    """Public methods and properties ``cls`` defines itself whose help() text is empty."""
    import inspect

    return [name for name, member in vars(cls).items() if not name.startswith("_")
            and (callable(getattr(cls, name)) or isinstance(member, property))
            and not inspect.getdoc(member.fget if isinstance(member, property) else getattr(cls, name))]


def test_the_core_classes_public_members_say_what_they_are():
    # help() showed Results.shape, Vocabulary.to_dict/from_dict, encode_users/encode_items, Trainer.validate and
    # FaissIndex.dim/search_params (and build/add/remove, whose inherited text the class-call guard hid) bare
    names = ["Results", "Vocabulary", "TwoTowerModel", "Trainer", "FaissIndex", "ExactIndex", "InBatchSoftmax",
             "FullSoftmax", "SampledSoftmax", "BPRLoss"]
    assert {n: _undocumented(getattr(twotower, n)) for n in names} == dict.fromkeys(names, [])


def test_the_search_subpackage_is_reached_from_the_top_level_without_importing_it():
    # `import twotower as tt; tt.search.SearchIndex` was "module 'twotower' has no attribute 'search'"
    code = ("import sys, twotower as tt; idx = tt.search.SearchIndex; "
            "print(idx.__module__, 'torch' in sys.modules, 'search' in dir(tt))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["twotower.search.pipeline", "False", "True"]
