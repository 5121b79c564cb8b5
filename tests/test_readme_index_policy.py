"""The README's account of `twotower index build`'s choices states the constants the code uses."""
import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_readme_states_the_missed_target_tolerance_and_the_kind_margin() -> None:
    from twotower.index.autotune import MISSED_RECALL_TOLERANCE, IndexPolicy

    said = re.search(r"When no setting meets the target, the\s+cheapest one within ([0-9.]+) of the best recall", README)
    assert said is not None, "README no longer says what a missed recall target keeps"
    assert float(said.group(1)) == MISSED_RECALL_TOLERANCE
    assert f"only when more than {IndexPolicy().kind_margin:.0%} faster" in README


def test_readme_names_the_flags_the_missed_target_warning_advises() -> None:
    from twotower.pipeline.index_build import missed_target_advice

    advice = missed_target_advice(lambda v: f"--index {v}", "--target-recall")
    for flag in re.findall(r"--index [^\s)]+|--target-recall", advice):
        assert f"`{flag}`" in README, flag
