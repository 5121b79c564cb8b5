"""No unsafe deserialisation or code execution anywhere in src/ and bench/ (issue 7).

A line-based scan (comments and docstring lines that merely mention a pattern
are skipped by requiring code shape); a failure names file:line. Also: the
service binds 127.0.0.1 unless told otherwise.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "src", ROOT / "bench"]

# (name, regex on code with strings and comments blanked, extra check on the raw logical line or None)
RULES = [
    ("pickle import", re.compile(r"^\s*(import|from)\s+(c?pickle|dill|cloudpickle|joblib|shelve|marshal)\b"), None),
    ("pickle call", re.compile(r"\b(c?pickle|dill|cloudpickle|joblib|marshal)\.(loads?|Unpickler)\b"), None),
    ("torch.load without weights_only=True", re.compile(r"\btorch\.load\s*\("), re.compile(r"weights_only\s*=\s*True")),
    ("allow_pickle=True", re.compile(r"allow_pickle\s*=\s*True"), None),
    ("np.load without allow_pickle=False", re.compile(r"\b(np|numpy)\.load\s*\("), re.compile(r"allow_pickle\s*=\s*False")),
    ("eval(", re.compile(r"(?<![\w.])eval\s*\("), None),
    ("exec(", re.compile(r"(?<![\w.])exec\s*\("), None),
    ("yaml.load without SafeLoader", re.compile(r"\byaml\.(load|load_all|unsafe_load|full_load)\s*\("),
     re.compile(r"Loader\s*=\s*(yaml\.)?(CSafeLoader|SafeLoader)")),
    ("trust_remote_code=True", re.compile(r"trust_remote_code\s*=\s*True"), None),
    ("pandas read_pickle", re.compile(r"\bread_pickle\s*\("), None),
    ("subprocess with shell=True", re.compile(r"shell\s*=\s*True"), None),
]


def logical_lines(path: Path) -> list[tuple[int, str, str]]:
    """``(first line number, code with strings/comments blanked, raw text)`` per logical line."""
    src = path.read_text(encoding="utf-8")
    out: list[tuple[int, str, str]] = []
    code: list[str] = []
    raw: list[str] = []
    start = None
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError) as e:  # pragma: no cover - the file would not import either
        raise AssertionError(f"{path}: cannot tokenize ({e})") from e
    for tok in tokens:
        if start is None and tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                                              tokenize.DEDENT):
            start = tok.start[0]
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            code.append('""')
            raw.append(tok.string)
        elif tok.type == tokenize.COMMENT:
            continue
        elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if start is not None:
                out.append((start, " ".join(code), " ".join(raw)))
            code, raw, start = [], [], None
        elif tok.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            code.append(tok.string)
            raw.append(tok.string)
    return out


CLASS_DEF = re.compile(r"^\s*class\s+(\w+)\s*\(([^)]*)\)", re.M)
SAFE_BASE = re.compile(r"\s*(?:yaml\.)?C?SafeLoader\s*")
LOADER_ARG = re.compile(r"\bLoader=(\w+)\s*[,)]")


def safe_loader_classes(text: str) -> set[str]:
    """Classes of a file deriving only from PyYAML's safe loader (to add a check, such as refusing duplicate
    keys); a name also defined on another base is left out."""
    bases: dict[str, set[bool]] = {}
    for name, base in CLASS_DEF.findall(text):
        bases.setdefault(name, set()).add(bool(SAFE_BASE.fullmatch(base)))
    return {name for name, safe in bases.items() if safe == {True}}


def _safe_subclass_loader(raw_joined: str, safe_classes: set[str]) -> bool:
    """``yaml.load(text, Loader=Name)`` where ``Name`` is a SafeLoader subclass defined in the same file."""
    found = LOADER_ARG.search(raw_joined)
    return found is not None and found.group(1) in safe_classes


def scan(paths: list[Path]) -> list[str]:
    findings = []
    for base in paths:
        for path in sorted(base.rglob("*.py")):
            safe_classes = safe_loader_classes(path.read_text(encoding="utf-8"))
            for lineno, code, raw in logical_lines(path):
                # re-join tokens so `torch . load (` matches `torch.load(`
                joined = re.sub(r"\s*([.(=])\s*", r"\1", code)
                raw_joined = re.sub(r"\s*([.(=])\s*", r"\1", raw)
                for name, pattern, required in RULES:
                    if name.startswith("yaml.load") and _safe_subclass_loader(raw_joined, safe_classes):
                        continue
                    if pattern.search(joined) and (required is None or not required.search(raw_joined)):
                        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                        findings.append(f"{shown}:{lineno}: {name}")
    return findings


def test_no_unsafe_deserialisation_or_code_execution():
    findings = scan(SCANNED)
    assert not findings, "unsafe patterns:\n" + "\n".join(findings)


def test_the_scanner_catches_each_pattern(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\n"
        "x = torch.load(path)\n"
        "y = np.load(p)\n"
        "z = np.load(p, allow_pickle=True)\n"
        "eval('1')\n"
        "exec(code)\n"
        "yaml.load(text)\n"
        "m = AutoModel.from_pretrained(n, trust_remote_code=True)\n"
        "ok = torch.load(p, weights_only=True)\n"
        "ok2 = np.load(p, allow_pickle=False)\n"
        "ok3 = yaml.load(t, Loader=yaml.SafeLoader)\n"
        "doc = 'torch.load(x) and eval( in a string are fine'\n"
        "# eval(x) in a comment is fine\n"
        "model.eval()\n"
    )
    found = [f.split(": ", 1)[1] for f in scan([tmp_path])]
    assert found == ["pickle import", "torch.load without weights_only=True", "np.load without allow_pickle=False",
                     "allow_pickle=True", "np.load without allow_pickle=False", "eval(", "exec(",
                     "yaml.load without SafeLoader", "trust_remote_code=True"]


def test_service_binds_loopback_by_default():
    from twotower.cli.main import build_parser
    from twotower.serving import ServiceSettings

    assert ServiceSettings().host == "127.0.0.1"
    args = build_parser().parse_args(["serve", "--run", "r"])
    assert args.host == "127.0.0.1"


@pytest.mark.parametrize("path", ["bench/serve_load.py", "bench/soak.py"])
def test_load_benches_bind_loopback_only(path):
    text = (ROOT / path).read_text()
    assert "127.0.0.1" in text and "0.0.0.0" not in text


def test_the_scanner_accepts_a_safe_loader_subclass_only(tmp_path):
    # config.py reads YAML with a SafeLoader subclass that refuses duplicate keys: safe, and was reported
    (tmp_path / "ok.py").write_text(
        "class UniqueKeys(yaml.SafeLoader):\n    pass\n"
        "data = yaml.load(text, Loader=UniqueKeys)\n"
    )
    (tmp_path / "bad.py").write_text(
        "class Unsafe(yaml.Loader):\n    pass\n"
        "a = yaml.load(text, Loader=Unsafe)\n"
        "class Twice(yaml.SafeLoader):\n    pass\n"
        "class Twice(yaml.UnsafeLoader):\n    pass\n"
        "b = yaml.load(text, Loader=Twice)\n"
    )
    assert scan([tmp_path]) == [f"{tmp_path / 'bad.py'}:3: yaml.load without SafeLoader",
                                f"{tmp_path / 'bad.py'}:8: yaml.load without SafeLoader"]
