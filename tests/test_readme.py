"""The README's Python example runs as written (one short epoch instead of twenty)."""
import re
from pathlib import Path

import numpy as np
import pytest


@pytest.mark.slow
def test_readme_python_example_runs(tmp_path, monkeypatch):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    code = code.replace('"train.epochs=20"', '"train.epochs=1", "train.max_examples_per_epoch=3000", "train.progress=false"')
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert (tmp_path / "runs" / "ml" / "model.safetensors").exists()
    assert namespace["hits"].ids.shape == (1, 10)
    # the known user's list is the one `twotower recommend --user 42 --exact` prints (its code path), and the
    # item explained is one of it: the example used to explain the newcomer's top item for user 42, which could
    # be in user 42's history ("You already watched ...")
    from twotower.pipeline.recommend import exclusions_from_files, recommend_users

    run, row, recs = namespace["run"], namespace["row"], namespace["recs"]
    cli = recommend_users(run, np.array([row]), 10, exclusions_from_files(run, [], include_seen=True))
    assert np.array_equal(recs.ids, cli.ids)
    assert not set(recs.ids[0].tolist()) & set(run.seen_rows(row).tolist())
