"""Every shell example of README.md and docs/**/*.md is run by the tests, or says in the page why it is not.

The convention, an HTML comment on the line right before the opening fence (invisible when the page is rendered):

- no comment: a `console` block whose every `$ gpuclaim ...` line is an offline command (`test_docs.RUNNABLE`); each
  is run and must print exactly what the page shows under it (`test_docs.test_console_examples_print_what_they_show`);
- `<!-- run by: tests/DIR/FILE.py::test_name -->`: that test reads the block from the page and runs its commands
  as shown;
- `<!-- checked with --help: REASON -->`: the commands need what a test run cannot have in full (the real control
  plane, minutes of measurement); each `python -m MODULE [SUB]` of the block is run with `--help`, which must
  succeed and list every `--flag` the block uses (`gpuclaim` lines are parsed by the real parser, as everywhere);
- `<!-- not run: REASON -->`: the commands need what the tests cannot have (a helm binary, Docker, a cluster, the
  package index, the whole suite); the reason says which. Their `gpuclaim`/`python -m` lines are still parsed.

Every fenced block names its language, so a shell block cannot hide as an unlabelled one; `text` is for output,
layouts and synopses.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_docs import PAGE_CACHE, ROOT, RUNNABLE, CodeBlock, Page, read_page, shell_commands

SHELL = ("sh", "bash", "shell", "console")
_MARKER = re.compile(r"^\s*<!--\s*(not run|run by|checked with --help):\s*(.*?)\s*-->\s*$")


def marker(page: Page, block: CodeBlock) -> tuple[str, str] | None:
    """(kind, text) of the comment right before the block's opening fence, or None."""
    for number, text in page.prose:
        if number == block.line - 1:
            m = _MARKER.match(text)
            return (m.group(1), m.group(2)) if m else None
    return None


def _test_exists(test_id: str) -> bool:
    path, _, name = test_id.partition("::")
    file = ROOT / path
    # any test file: the kubectl blocks are run where the demo stack they need is, in tests/e2e
    if not (path.startswith("tests/") and file.is_file() and name):
        return False
    tree = ast.parse(file.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def block_problems(page: Page) -> list[str]:
    problems = []
    for block in page.blocks:
        where = f"{page.name}:{block.line}"
        if not block.lang:
            problems.append(f"{where}: a code block without a language (sh, console, text, yaml, ...)")
            continue
        mark = marker(page, block)
        if block.lang not in SHELL:
            if mark is not None:
                problems.append(f"{where}: a {mark[0]!r} marker on a {block.lang} block")
            continue
        if mark is None:
            dollars = [line[2:] for line in block.text.splitlines() if line.startswith("$ ")]
            runnable = block.lang == "console" and dollars and all(
                shlex.split(d)[:1] == ["gpuclaim"] and shlex.split(d)[1:2][0] in RUNNABLE for d in dollars)
            if not runnable:
                problems.append(f"{where}: a {block.lang} block that no test runs: run it in tests/docs, or mark it "
                                "<!-- not run: why -->, <!-- checked with --help: why --> or <!-- run by: TEST -->")
            continue
        kind, text = mark
        if kind == "run by" and not _test_exists(text):
            problems.append(f"{where}: <!-- run by: {text} -->: no such test function")
        elif kind != "run by" and len(text.split()) < 3:
            problems.append(f"{where}: <!-- {kind}: {text} -->: say what the commands need that the tests lack")
    return problems


@pytest.mark.parametrize("path", list(PAGE_CACHE), ids=[p.name for p in PAGE_CACHE.values()])
def test_every_shell_block_is_run_or_marked_with_the_reason(path: Path) -> None:
    assert block_problems(PAGE_CACHE[path]) == []


def test_an_unrun_unmarked_or_wrongly_marked_block_is_caught() -> None:
    page = read_page(ROOT / "docs" / "broken-example.md", "\n".join([
        "```sh", "gpuclaim demo", "```",                                       # sh, unmarked
        "```", "python -m e2e.kube up", "```",                                 # no language
        "<!-- not run: -->", "```sh", "helm install x", "```",                 # no reason
        "<!-- run by: tests/docs/test_doc_blocks.py::test_nonesuch -->", "```sh", "x", "```",
        "```console", "$ gpuclaim demo", "```",                                # console, not offline
        "<!-- not run: needs a Docker engine -->", "```sh", "docker build .", "```",  # fine
        "```console", "$ gpuclaim cel 'true'", "true", "```",                  # fine: run
    ]))  # fmt: skip
    assert len(block_problems(page)) == 5


def fragments_after_blocks(text: str) -> list[int]:
    """Lines right after a closing fence that start in lower case: the tail of a sentence whose start was lost
    (install.md once had `swapped in place.` there, left over when README was split)."""
    out, fence = [], None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if fence is None:
            m = re.match(r"^(```+|~~~+)", stripped)
            fence = m.group(1) if m else None
        elif stripped.startswith(fence):
            fence = None
            if i + 1 < len(lines) and re.match(r"^[a-z]", lines[i + 1]):
                out.append(i + 2)
    return out


@pytest.mark.parametrize("path", list(PAGE_CACHE), ids=[p.name for p in PAGE_CACHE.values()])
def test_no_sentence_fragment_follows_a_code_block(path: Path) -> None:
    assert fragments_after_blocks(path.read_text(encoding="utf-8")) == []


def test_a_fragment_after_a_block_is_caught() -> None:
    assert fragments_after_blocks("Run:\n\n```sh\nhelm install x\n```\nswapped in place.\n\nFine.\n") == [6]


# --- the blocks marked `checked with --help` ---


def help_checks() -> list[tuple[str, int, list[str]]]:
    out = []
    for page in PAGE_CACHE.values():
        for block in page.blocks:
            if (marker(page, block) or ("", ""))[0] != "checked with --help":
                continue
            for number, argv in shell_commands(block):
                if isinstance(argv, list) and argv[0] in ("python", "python3"):
                    out.append((page.name, number, argv))
    return out


HELP_CHECKS = help_checks()


def help_problem(argv: list[str]) -> str | None:
    """None when `python -m MODULE [SUB] --help` succeeds and lists every `--flag` of argv; else what is wrong."""
    command = argv[2:4] if len(argv) > 3 and re.fullmatch(r"[a-z][\w-]*", argv[3]) else argv[2:3]
    done = subprocess.run([sys.executable, "-m", *command, "--help"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, check=False)
    if done.returncode != 0:
        return f"python -m {' '.join(command)} --help: {done.stderr[-2000:]}"
    flags = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(argv[3:])))
    missing = sorted(f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", done.stdout))
    return f"python -m {' '.join(command)} has no {', '.join(missing)}" if missing else None


@pytest.mark.parametrize(("page", "number", "argv"), HELP_CHECKS, ids=[f"{p}:{n}" for p, n, _ in HELP_CHECKS])
def test_commands_checked_with_help_exist_with_every_flag_shown(page: str, number: int, argv: list[str]) -> None:
    assert help_problem(argv) is None, f"{page}:{number}"


def test_a_command_or_flag_its_help_does_not_know_is_caught() -> None:
    assert help_problem(["python", "-m", "e2e.kube", "up", "--nodes", "3", "--no-such-flag"]) == (
        "python -m e2e.kube up has no --no-such-flag")
    assert help_problem(["python", "-m", "e2e.kube", "frobnicate"]) is not None
    assert help_problem(["python", "-m", "e2e.kube", "up", "[--nodes", "N]", "[--detach]"]) is None


# --- the blocks `run by` a test of this file ---


def run_block(test_id: str) -> tuple[Page, CodeBlock]:
    """The block marked `<!-- run by: test_id -->` (exactly one in the docs)."""
    found = [(page, block) for page in PAGE_CACHE.values() for block in page.blocks
             if marker(page, block) == ("run by", test_id)]
    assert len(found) == 1, f"{len(found)} blocks are marked run by {test_id}"
    return found[0]


def _lines(block: CodeBlock) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in block.text.splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _python(argv: list[str]) -> list[str]:
    """`gpuclaim ...` is `python -m gpuclaim ...` (README), here the running interpreter's."""
    if argv[0] == "gpuclaim":
        return [sys.executable, "-m", "gpuclaim", *argv[1:]]
    if argv[0] in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    return argv


def _wait_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line or time.monotonic() < deadline, "no output"
    return line.strip()


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def test_the_api_double_example_serves_what_it_loads() -> None:
    """docs/dev/doubles.md: the double started as shown prints its kubeconfig, says how many objects it loaded from
    the directory, and serves them."""
    _, block = run_block("tests/docs/test_doc_blocks.py::test_the_api_double_example_serves_what_it_loads")
    (argv,) = _lines(block)
    load = Path(argv[argv.index("--load") + 1])
    proc = subprocess.Popen(_python(argv), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kubeconfig = _wait_line(proc, time.monotonic() + 60)
        assert Path(kubeconfig).is_file(), kubeconfig
    finally:
        err = _stop(proc)
    want = sum(1 for p in (ROOT / load).iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    m = re.search(r"e2e.apiserver: loaded (\d+) objects from", err)
    assert m is not None and int(m.group(1)) >= want, err


def test_the_local_webhook_example_answers_readyz(tmp_path: Path) -> None:
    """docs/cli.md's local run, in a fresh directory: certs, then the webhook, then curl on /readyz. Only the two
    ports are replaced by free ones (fixed ports collide with whatever else runs on the machine)."""
    _, block = run_block("tests/docs/test_doc_blocks.py::test_the_local_webhook_example_answers_readyz")
    certs, webhook, curl = _lines(block)
    ports = {"8443": str(_free_port()), "9090": str(_free_port())}

    def local(argv: list[str]) -> list[str]:
        return [re.sub(r"(127\.0\.0\.1:)(8443|9090)\b", lambda m: m.group(1) + ports[m.group(2)], a) for a in argv]

    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    done = subprocess.run(_python(certs), cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    server = subprocess.Popen(_python(local(webhook)), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            answer = subprocess.run(local(curl), cwd=tmp_path, capture_output=True, text=True, timeout=30,
                                    check=False)
            if answer.returncode == 0 or time.monotonic() > deadline or server.poll() is not None:
                break
            time.sleep(0.2)
        assert answer.returncode == 0, answer.stderr
        assert answer.stdout.startswith("ok"), answer.stdout
    finally:
        _stop(server)
