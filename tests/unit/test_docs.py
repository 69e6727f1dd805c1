"""The docs say what the code does: the layer diagram is the import contract, the
README's command blocks render as code, and every command the docs show exists with the
flags they give it."""

import re
import tomllib
from pathlib import Path

import click

from streamtrain.cli import main

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
    r"(broker|topics|worker|lag|scale|forecast|trace|simulate|demo|keda|cluster|lighthouse)\b"
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


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BREAK = re.compile(r"\s(?:\||>|;|&&|#)\s|\s#")


def _shell_texts(text: str) -> list[str]:
    """Command lines of the code blocks (continuations joined) and inline code spans."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    lines = [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines()]
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    spans = [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    return [SHELL_BREAK.split(line, maxsplit=1)[0] for line in [*lines, *spans]]


def _flags(words: list[str]) -> list[str]:
    return [m.group(1) for w in words if (m := re.match(r"\[?(--[a-z][a-z0-9-]*)", w))]


def _streamtrain_uses(text: str):
    """(command path, flags) for every `streamtrain ...` (or bare `worker ...`) shown."""
    top = set(main.commands)
    for line in _shell_texts(text):
        words = line.split()
        starts = [i + 1 for i, w in enumerate(words) if w.endswith("streamtrain")]
        if words and words[0] in top:
            starts.append(0)
        for start in starts:
            command: click.Command = main
            path: list[str] = []
            i = start
            while isinstance(command, click.Group) and i < len(words):
                if words[i] not in command.commands:
                    break
                command = command.commands[words[i]]
                path.append(words[i])
                i += 1
            if path:
                yield path, command, _flags(words[i:])


def test_every_streamtrain_command_in_the_docs_exists_with_its_flags():
    unknown = []
    for doc in DOCS:
        for path, command, flags in _streamtrain_uses(doc.read_text()):
            known = {"--help"}
            for param in command.params:
                known.update(param.opts, param.secondary_opts)
            unknown += [
                f"{doc.name}: streamtrain {' '.join(path)} {f}" for f in flags if f not in known
            ]
    assert unknown == []


def test_every_benchmark_command_in_the_docs_exists_with_its_flags():
    unknown = []
    for doc in DOCS:
        for line in _shell_texts(doc.read_text()):
            for match in re.finditer(r"python -m benchmarks\.(\w+)(.*)", line):
                module = ROOT / "benchmarks" / f"{match.group(1)}.py"
                if not module.exists():
                    unknown.append(f"{doc.name}: no benchmarks/{module.name}")
                    continue
                source = module.read_text()
                flags = _flags(match.group(2).split())
                unknown += [
                    f"{doc.name}: {module.name} {f}" for f in flags if f'"{f}"' not in source
                ]
    assert unknown == []


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_relative_link_in_the_docs_reaches_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.name}: {target}")
            elif anchor:
                headings = re.findall(r"^#+ (.+)$", file.read_text(), re.MULTILINE)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{doc.name}: {target}")
    assert broken == []


def test_every_python_file_the_docs_name_exists():
    """A renamed or moved module shows here until the docs follow it."""
    files = {
        p.relative_to(ROOT).as_posix()
        for top in ("streamtrain", "tests", "benchmarks", "examples")
        for p in (ROOT / top).rglob("*.py")
    }
    missing = []
    for doc in DOCS:
        # shell and Python examples name the user's own files; diagrams and prose name ours
        text = re.sub(r"```(?:sh|python)\n.*?```", "", doc.read_text(), flags=re.DOTALL)
        for name in set(re.findall(r"(?<![\w/.*<-])((?:\w+/)*\w+\.py)\b", text)):
            if not any(f == name or f.endswith("/" + name) for f in files):
                missing.append(f"{doc.name}: {name}")
    assert sorted(missing) == []
