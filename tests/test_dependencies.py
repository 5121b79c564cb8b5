"""pyproject.toml declares every third-party module the package imports: a plain ``pip install twotower`` must
bring all that the base commands import, and each optional module must be one an extra installs."""
from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from twotower.utils.extras import EXTRAS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: not named in pyproject.toml: sentence-transformers installs them, and its extra is the one to ask for
WITH_SENTENCE_TRANSFORMERS = {"transformers", "huggingface-hub"}


def _dist(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the files under src/twotower that import it (at any depth, lazy imports included)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "src" / "twotower").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "twotower" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _distribution(module: str) -> str:
    # an installed module names its distribution (yaml -> PyYAML, faiss -> faiss-cpu); tomli (Python 3.10 only)
    # may be absent, and is its own name
    dists = packages_distributions().get(module) or [module]
    return _dist(dists[0])


def test_every_module_the_base_install_imports_is_a_base_dependency():
    base = {_dist(r) for r in _project()["dependencies"]}
    undeclared = {m: sorted(files) for m, files in _third_party_imports().items()
                  if m not in EXTRAS and _distribution(m) not in base}
    assert undeclared == {}, f"imported but not in [project] dependencies: {undeclared}"


def test_every_optional_module_is_installed_by_the_extra_its_message_names():
    extras = {name: {_dist(r) for r in reqs} for name, reqs in _project()["optional-dependencies"].items()}
    for module, (dist, extra) in EXTRAS.items():
        assert extra in extras, f"{module}: no extra [{extra}] in pyproject.toml"
        if dist in WITH_SENTENCE_TRANSFORMERS:
            assert "sentence-transformers" in extras[extra], module
        else:
            assert _dist(dist) in extras[extra], f"{module}: {dist} is not in [{extra}]"
