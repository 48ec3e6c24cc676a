"""e2e/oracle/gobuild: without Go the oracle suites skip with a message, except under CI, where they fail; the
binary is cached by a hash that changes with the sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.outcomes import Failed, Skipped

from e2e.oracle import gobuild


def test_without_go_the_oracles_skip_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gobuild.shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(Skipped, match="Go toolchain not found"):
        gobuild.require_go()


def test_without_go_under_ci_the_oracles_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gobuild.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="CI must run the oracles"):
        gobuild.require_go()


def test_the_cache_key_follows_the_go_sources(tmp_path: Path) -> None:
    go = gobuild.go_tool()
    if go is None:
        pytest.skip("Go toolchain not found on PATH")
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "main.go").write_text("package main\nfunc main() {}\n")
    (tmp_path / "notes.txt").write_text("a")
    first = gobuild.source_hash(tmp_path, go)
    (tmp_path / "notes.txt").write_text("b")  # not a build input
    assert gobuild.source_hash(tmp_path, go) == first
    (tmp_path / "main.go").write_text("package main\nfunc main() { println() }\n")
    assert gobuild.source_hash(tmp_path, go) != first
