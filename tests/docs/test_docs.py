"""The docs do not lie: README.md and every page under docs/ are checked against the repository.

- every relative link resolves to a file or folder of the repository, and its `#anchor` to a heading;
- every repository path in backticks (`gpuclaim/dra/cel/`, `tests/...`, `e2e/...`) exists, and every
  `gpuclaim.x.y` name in backticks imports;
- every `gpuclaim ...` command in a code block parses with the real CLI's parser, every `gpuclaim CMD`
  in inline code names a real subcommand and only its real flags, every `python -m MODULE` names an
  importable module, and every `python -m e2e.bench NAME` a real benchmark;
- every `$ gpuclaim ...` line of a `console` block is run (offline commands only) and prints exactly
  the output shown under it;
- Python code blocks import only names that exist;
- docs/configuration.md lists exactly the keys of the config dataclasses, each with its true type and
  default, and its defaults file equals the built-in defaults.

Generic over README.md and docs/**/*.md, so a page someone adds is checked too.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.util
import io
import re
import shlex
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml

from gpuclaim import cli
from gpuclaim.dra import config as config_module

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
CONFIG_PAGE = ROOT / "docs" / "configuration.md"

# Top-level entries of the repository: a backticked token starting with one of these and a slash is a path.
PATH_ROOTS = ("gpuclaim/", "e2e/", "tests/", "charts/", "docs/", ".ci/")
ROOT_FILES = ("Dockerfile", "pyproject.toml", "README.md")
# Offline commands cheap enough to run for a console block.
RUNNABLE = ("cel", "lint", "convert", "score", "fleet")


# --- reading Markdown ---


@dataclass(frozen=True)
class CodeBlock:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str


@dataclass(frozen=True)
class Page:
    path: Path
    prose: list[tuple[int, str]]  # (line number, text) outside code blocks
    blocks: list[CodeBlock]

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")


def read_page(path: Path, text: str | None = None) -> Page:
    """The page at `path`; `text` stands in for its content (the self-tests' broken pages)."""
    prose: list[tuple[int, str]] = []
    blocks: list[CodeBlock] = []
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{path.relative_to(ROOT)}:{start + 1}: code block is never closed"
        blocks.append(CodeBlock(path, start + 1, lang, "\n".join(body)))
        i += 1
    return Page(path, prose, blocks)


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def code_spans(page: Page) -> Iterator[tuple[int, str]]:
    for number, text in page.prose:
        for m in _CODE_SPAN.finditer(text):
            yield number, m.group(2).strip()


def links(page: Page) -> Iterator[tuple[int, str]]:
    for number, text in page.prose:
        for m in _LINK.finditer(_CODE_SPAN.sub("", text)):
            yield number, m.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links become their text, then lower case, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Page) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, text in page.prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", text)
        if m is None:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


PAGE_CACHE = {path: read_page(path) for path in PAGES}


def page_ids() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in PAGES]


def test_the_docs_exist_and_readme_is_short() -> None:
    assert (ROOT / "docs" / "index.md").is_file()
    assert (ROOT / "docs" / "dev").is_dir()
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; at most 300 (move the rest into docs/)"


# --- (1) links and paths ---


def _inside_repo(target: Path) -> bool:
    try:
        target.resolve().relative_to(ROOT)
    except ValueError:
        return False
    return True


def link_problems(page: Page) -> list[str]:
    problems = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        where = f"{page.name}:{number}: link {target!r}"
        if not file_part:  # an anchor on this page
            if fragment not in anchors(page):
                problems.append(f"{where}: this page has no heading with anchor #{fragment}")
            continue
        dest = page.path.parent / file_part
        if not _inside_repo(dest) or not dest.exists():
            problems.append(f"{where}: no such file or folder in the repository")
            continue
        if fragment:
            if dest.suffix != ".md" or dest.is_dir():
                problems.append(f"{where}: an anchor into something that is not a Markdown page")
            elif fragment not in anchors(PAGE_CACHE.get(dest.resolve()) or read_page(dest)):
                problems.append(f"{where}: {dest.resolve().relative_to(ROOT)} has no heading with anchor #{fragment}")
    return problems


def _path_tokens(span: str) -> Iterator[str]:
    for token in span.split():
        token = token.strip("'\"(),;")
        token = token.split("::")[0]  # pytest node ids
        if any(c in token for c in "<>*{}$[]|"):
            continue  # a placeholder or a glob, not a path
        if token.startswith(PATH_ROOTS) or token in ROOT_FILES or token.startswith(("../", "./")):
            yield token


_DOTTED = re.compile(r"^(gpuclaim(?:\.[A-Za-z_]\w*)+)(?:\(.*)?$")


def resolve_dotted(name: str) -> str | None:
    """None when `gpuclaim.a.b.c` names a module or an attribute of one; else why not."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module_name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            continue
        obj: object = importlib.import_module(module_name)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def path_problems(page: Page) -> list[str]:
    problems = []
    for number, span in code_spans(page):
        for token in _path_tokens(span):
            base = page.path.parent if token.startswith(("../", "./")) else ROOT
            target = base / token
            if not _inside_repo(target) or not target.exists():
                problems.append(f"{page.name}:{number}: `{token}` does not exist in the repository")
        m = _DOTTED.match(span)
        if m and m.group(1) != "gpuclaim.io":  # gpuclaim.io is the label domain
            why = resolve_dotted(m.group(1))
            if why:
                problems.append(f"{page.name}:{number}: `{m.group(1)}`: {why}")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=page_ids())
def test_links_resolve(path: Path) -> None:
    assert link_problems(PAGE_CACHE[path]) == []


@pytest.mark.parametrize("path", PAGES, ids=page_ids())
def test_paths_and_module_names_exist(path: Path) -> None:
    assert path_problems(PAGE_CACHE[path]) == []


# --- (2) commands ---


def _parser() -> Any:
    built = cli._build_parser()
    return built[0] if isinstance(built, tuple) else built


PARSER = _parser()


def _subparsers(parser: Any) -> dict[str, Any]:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return dict(action.choices)
    return {}


SUBCOMMANDS = _subparsers(PARSER)
assert SUBCOMMANDS, "the gpuclaim parser has no subcommands"
GLOBAL_OPTIONS = {s for a in PARSER._actions for s in a.option_strings}


def _benchmarks() -> tuple[str, ...]:
    from e2e.bench.__main__ import BENCHMARKS

    return tuple(BENCHMARKS)


def shell_commands(block: CodeBlock) -> Iterator[tuple[int, list[str] | str]]:
    """(line, argv) of every command in a shell-like block: continuation lines joined, pipes and && split.

    A usage synopsis (`gpuclaim lint FILE [--slices F]`, continued on indented lines) comes as one string,
    to be checked as inline synopses are.
    """
    if block.lang in ("yaml", "yml", "json", "python", "go"):
        return
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        i += 1
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        elif block.lang == "console":
            continue  # output
        if line.startswith("gpuclaim ") and "[" in line:
            while i < len(lines) and lines[i].startswith(" ") and lines[i].strip().startswith("["):
                line += " " + lines[i].strip()
                i += 1
            yield block.line + 1 + start, line
            continue
        line = re.sub(r"[<$]\([^)]*\)", "FILE", line)  # process and command substitution
        for segment in re.split(r"\s*(?:&&|\|\||\||;)\s*", line):
            try:
                argv = shlex.split(segment, comments=True)
            except ValueError:
                continue  # not shell (an output line with an odd quote)
            if argv[:1] == ["gpuclaim"] or (argv[:1] in (["python"], ["python3"]) and argv[1:2] == ["-m"]):
                yield block.line + 1 + start, argv


def _extras() -> set[str]:
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["project"].get("optional-dependencies", {}))


def command_problem(argv: list[str]) -> str | None:
    if argv[0] == "gpuclaim":
        args = argv[1:]
    elif argv[2:3] == ["gpuclaim"]:
        args = argv[3:]
    else:
        module = argv[2] if len(argv) > 2 else ""
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"python -m {module}: no such module"
        if module == "e2e.bench":
            names = [a for a in argv[3:] if not a.startswith("-")]
            if not names or names[0] not in _benchmarks():
                return f"python -m e2e.bench {' '.join(argv[3:])}: benchmarks are {', '.join(_benchmarks())}"
        if module == "pytest":
            missing = [a for a in argv[3:] if not a.startswith("-") and not (ROOT / a.split("::")[0]).exists()]
            if missing:
                return f"python -m pytest: no such test path {', '.join(missing)}"
        if module == "pip" and "install" in argv[3:]:
            for target in argv[3:]:
                m = re.fullmatch(r"(?:\.|gpuclaim)\[([\w,-]+)\]", target)
                unknown = [e for e in (m.group(1).split(",") if m else []) if e not in _extras()]
                if unknown:
                    return f"pip install {target}: pyproject.toml has no extra {', '.join(unknown)}"
        return None

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            PARSER.parse_args(args)
    except SystemExit as exc:
        if exc.code not in (0, None) or not {"-h", "--help", "--version"} & set(args):
            return f"gpuclaim {' '.join(args)}: {stderr.getvalue().strip() or f'exit {exc.code}'}"
    return None


def inline_command_problem(span: str) -> str | None:
    """An inline `gpuclaim CMD [--flag X] ...` synopsis: a real subcommand and only its real flags."""
    tokens = span.replace("[", " ").replace("]", " ").replace("|", " ").split()
    tokens = [t.split("=")[0] for t in tokens]
    if tokens[:1] != ["gpuclaim"]:
        if tokens[:3] in (["python", "-m", "e2e.bench"], ["python3", "-m", "e2e.bench"]) and len(tokens) > 3:
            name = tokens[3]
            if not name.isupper() and name not in _benchmarks():
                return f"`{span}`: no benchmark {name!r} (benchmarks are {', '.join(_benchmarks())})"
        return None
    rest = tokens[1:]
    while rest and rest[0] in GLOBAL_OPTIONS:
        rest = rest[1:]
    if not rest or rest[0].isupper() or rest[0].endswith(":"):
        return None  # a placeholder, or a message that starts with the command's name
    name = rest[0]
    if name not in SUBCOMMANDS:
        return f"`{span}`: gpuclaim has no command {name!r}"
    parser = SUBCOMMANDS[name]
    nested = _subparsers(parser)  # `gpuclaim fleet nodes|pods ...`: the flags of the view named
    views = [t for t in rest[1:] if t in nested]
    known = {s for a in parser._actions for s in a.option_strings} | GLOBAL_OPTIONS
    known |= {s for view in views for a in nested[view]._actions for s in a.option_strings}
    unknown = [t for t in rest[1:] if t.startswith("-") and t != "-" and t not in known and not t.startswith("-o")]
    unknown += [t for t in rest[1:] if t.startswith("-o") and t != "-o" and t not in known]
    if unknown:
        return f"`{span}`: gpuclaim {name} has no option {', '.join(unknown)}"
    return None


def command_problems(page: Page) -> list[str]:
    problems = []
    for block in page.blocks:
        for number, argv in shell_commands(block):
            why = inline_command_problem(argv) if isinstance(argv, str) else command_problem(argv)
            if why:
                problems.append(f"{page.name}:{number}: {why}")
    for number, span in code_spans(page):
        why = inline_command_problem(span)
        if why:
            problems.append(f"{page.name}:{number}: {why}")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=page_ids())
def test_commands_parse(path: Path) -> None:
    assert command_problems(PAGE_CACHE[path]) == []


def console_runs(page: Page) -> Iterator[tuple[int, list[str], str]]:
    """(line, argv, expected output) for each runnable `$ gpuclaim ...` of a console block."""
    for block in page.blocks:
        if block.lang != "console":
            continue
        lines = block.text.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ gpuclaim "):
                continue
            argv = shlex.split(line[2:])[1:]
            if argv[0] not in RUNNABLE:
                continue
            output = []
            for later in lines[i + 1 :]:
                if later.startswith("$ "):
                    break
                output.append(later)
            yield block.line + 1 + i, argv, "\n".join(output).rstrip("\n")


CONSOLE_RUNS = [(page, number, argv, out) for page in PAGE_CACHE.values() for number, argv, out in console_runs(page)]


@pytest.mark.parametrize(("page", "number", "argv", "expected"), CONSOLE_RUNS,
                         ids=[f"{p.name}:{n}" for p, n, _, _ in CONSOLE_RUNS])  # fmt: skip
def test_console_examples_print_what_they_show(
    page: Page, number: int, argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        cli.main(argv)
    shown = (out.getvalue() + err.getvalue()).rstrip("\n")
    assert shown == expected, f"{page.name}:{number}: `gpuclaim {shlex.join(argv)}` prints something else"


def python_import_problems(page: Page) -> list[str]:
    problems = []
    for block in page.blocks:
        if block.lang != "python":
            continue
        try:
            tree = ast.parse(block.text)
        except SyntaxError as exc:
            problems.append(f"{page.name}:{block.line}: python block does not parse: {exc}")
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                why = resolve_dotted(name) if name.startswith("gpuclaim.") else None
                if why:
                    problems.append(f"{page.name}:{block.line + node.lineno}: import {name}: {why}")
    return problems


@pytest.mark.parametrize("path", PAGES, ids=page_ids())
def test_python_examples_import_real_names(path: Path) -> None:
    assert python_import_problems(PAGE_CACHE[path]) == []


# --- (3) the configuration reference ---


@dataclass(frozen=True)
class Key:
    type: str
    default: Any  # REQUIRED, or the default in config-file form
    is_list_of_mappings: bool


REQUIRED = object()


def file_form(value: Any) -> Any:
    """A config value as it is written in the file: camelCase mappings, lists, null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {config_module._camel(f.name): file_form(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [file_form(v) for v in value]
    if isinstance(value, Mapping):
        return {k: file_form(v) for k, v in value.items()}
    return value


def type_name(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (a for a in args if a is not type(None))
        return f"{type_name(inner)} or null"
    if origin is Literal:
        return "one of: " + ", ".join(args)
    if origin is tuple:
        inner = args[0]
        return "list of mapping" if dataclasses.is_dataclass(inner) else f"list of {type_name(inner)}"
    if origin in (Mapping, dict):
        return f"mapping of {type_name(args[0])} to {type_name(args[1])}"
    names = {bool: "bool", int: "int", float: "number", str: "string"}
    assert tp in names, f"config schema type {tp!r} has no name in the docs test"
    return names[tp]


def schema_keys(cls: type = config_module.Config, prefix: str = "") -> dict[str, Key]:
    """Every key of the config dataclasses: nested sections expanded, list items as `key[].field`."""
    out: dict[str, Key] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = f"{prefix}{config_module._camel(f.name)}"
        tp = hints[f.name]
        if f.default is not dataclasses.MISSING:
            default = file_form(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = file_form(f.default_factory())
        else:
            default = REQUIRED
        if dataclasses.is_dataclass(tp):
            out.update(schema_keys(tp, path + "."))
            continue
        args = typing.get_args(tp)
        listed = typing.get_origin(tp) is tuple and dataclasses.is_dataclass(args[0])
        out[path] = Key(type_name(tp), default, listed)
        if listed:
            out.update(schema_keys(args[0], path + "[]."))
    return out


def documented_keys(page: Page) -> dict[str, tuple[int, str, str]]:
    """key -> (line, type cell, default cell) from the tables of docs/configuration.md."""
    out: dict[str, tuple[int, str, str]] = {}
    for number, text in page.prose:
        cells = [c.strip() for c in text.strip().strip("|").split("|")]
        if len(cells) < 3 or not re.fullmatch(r"`[A-Za-z][\w.\[\]]*`", cells[0]):
            continue
        key = cells[0].strip("`")
        assert key not in out, f"configuration.md:{number}: {key} is documented twice"
        out[key] = (number, cells[1], cells[2])
    return out


def config_key_problems(page: Page) -> list[str]:
    schema, documented = schema_keys(), documented_keys(page)
    return [f"{key}: in gpuclaim/dra/config.py, not documented" for key in sorted(set(schema) - set(documented))] + [
        f"{key}: documented, not in gpuclaim/dra/config.py" for key in sorted(set(documented) - set(schema))
    ]


def test_configuration_reference_lists_exactly_the_config_keys() -> None:
    assert config_key_problems(PAGE_CACHE[CONFIG_PAGE]) == []


def config_cell_problems(page: Page) -> list[str]:
    problems = []
    schema = schema_keys()
    for key, (number, type_cell, default_cell) in documented_keys(page).items():
        if key not in schema:
            continue
        want = schema[key]
        where = f"configuration.md:{number}: {key}"
        if type_cell != want.type:
            problems.append(f"{where}: type {type_cell!r}, the code says {want.type!r}")
        if want.default is REQUIRED:
            if default_cell != "required":
                problems.append(f"{where}: default {default_cell!r}, but the key is required")
            continue
        m = re.fullmatch(r"`([^`]*)`", default_cell)
        if m is None:
            if not want.is_list_of_mappings:  # those are checked through the defaults file
                problems.append(f"{where}: default {default_cell!r} is not a YAML value in backticks")
            continue
        shown = yaml.safe_load(m.group(1))
        if shown != want.default or (type(shown) is bool and type(want.default) is not bool):
            problems.append(f"{where}: default {m.group(1)} reads as {shown!r}, the code's default is {want.default!r}")
    return problems


def test_configuration_reference_types_and_defaults_are_true() -> None:
    assert config_cell_problems(PAGE_CACHE[CONFIG_PAGE]) == []


def test_configuration_defaults_file_is_the_builtin_default() -> None:
    page = PAGE_CACHE[CONFIG_PAGE]
    heading = next(n for n, text in page.prose if text.startswith("## The defaults"))
    block = next(b for b in page.blocks if b.lang == "yaml" and b.line > heading)
    data = yaml.safe_load(block.text)
    assert config_module.load_config(data) == config_module.Config()
    assert data == file_form(config_module.Config()), "the defaults file must show every key with its default"


# --- the checks themselves catch a lie ---


def _page(text: str) -> Page:
    return read_page(ROOT / "docs" / "broken-example.md", text)


def test_a_broken_link_anchor_path_or_name_is_caught() -> None:
    page = _page("# T\n\n[a](nowhere.md) [b](index.md#no-such-heading) [c](#t)\n"
                           "`gpuclaim/dra/nope/` `gpuclaim.dra.allocator.no_such_function()`\n")  # fmt: skip
    assert len(link_problems(page)) == 2
    assert len(path_problems(page)) == 2


def test_a_broken_command_is_caught() -> None:
    page = _page("`gpuclaim lint FILE [--no-such-flag]` `gpuclaim frobnicate` `python -m e2e.bench nope`\n"
                           "```sh\ngpuclaim cel --bogus 'x'\npython -m e2e.bench nonesuch --quick\n"
                           "gpuclaim lint a.yaml | python -m no.such.module\n"
                           "python -m pip install '.[x]' && python -m pytest tests/no\n```\n")  # fmt: skip
    assert len(command_problems(page)) == 8


def test_a_wrong_config_key_type_or_default_is_caught() -> None:
    page = _page("| key | type | default | meaning |\n|---|---|---|---|\n"
                 "| `webhook.tls.minVersion` | one of: 1.2, 1.3 | `1.2` | an unquoted 1.2 is a number |\n"
                 "| `webhook.listen` | int | `0.0.0.0:8443` | wrong type |\n"
                 "| `validation.podPolicy` | one of: off, warn, deny | `off` | an unquoted off is false |\n"
                 "| `webhook.noSuchKey` | bool | `true` | not a key |\n")  # fmt: skip
    assert len(config_cell_problems(page)) == 3
    problems = config_key_problems(page)
    assert "webhook.noSuchKey: documented, not in gpuclaim/dra/config.py" in problems
    assert "conversion.enabled: in gpuclaim/dra/config.py, not documented" in problems
