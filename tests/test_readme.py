"""The README's Python example runs as written (one short epoch instead of twenty)."""
import re
from pathlib import Path

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
