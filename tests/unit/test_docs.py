"""The docs say what the code does: the layer diagram is the import contract, and the
README's command blocks render as code."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _layers_block(text: str) -> list[str]:
    match = re.search(r"```layers\n(.*?)```", text, re.DOTALL)
    assert match, "docs/architecture.md has no ```layers block"
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


def _normalise(layer: str) -> str:
    return " | ".join(part.strip() for part in layer.split("|"))


def test_the_architecture_page_draws_the_layers_the_import_contract_checks():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    documented = _layers_block((ROOT / "docs" / "architecture.md").read_text())
    assert [_normalise(x) for x in documented] == [_normalise(x) for x in layers]


def test_every_top_level_module_sits_in_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    package = ROOT / "streamtrain"
    modules = {
        f"streamtrain.{p.stem if p.is_file() else p.name}"
        for p in package.iterdir()
        if (p.is_file() and p.suffix == ".py" and p.stem not in {"__init__", "__main__"})
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert modules - named == set(), "add the new module to the layers contract and the docs"


COMMAND_LINE = re.compile(
    r"\s*(\.venv/bin/)?streamtrain "
    r"(broker|topics|worker|lag|scale|forecast|trace|simulate|demo|keda|cluster)\b"
)


def test_readme_command_lines_are_inside_code_blocks():
    inside = False
    stray = []
    for number, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside and re.match(COMMAND_LINE, line):
            stray.append(number)
    assert not inside, "an unclosed code fence in README.md"
    assert stray == [], f"README.md lines {stray} are commands outside a code block"
