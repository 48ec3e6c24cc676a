"""The Go version the docs and the build errors ask for is the one the go.mod files need.

Every go.mod under e2e/ says which Go it needs (its `go` line), and e2e.kube builds with GOTOOLCHAIN=local, so an
older Go fails after minutes of set-up instead of fetching a newer toolchain. Each `Go X.Y`, `Go >= X.Y` or
`Go X.Y or newer` in README.md, docs/ and the messages of e2e/kube/build.py and e2e/oracle/gobuild.py must name
exactly the newest `go` line; README.md and docs/dev/real-control-plane.md must name it at all.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MENTION = re.compile(r"\bGo (?:>= ?|≥ ?)?(\d+\.\d+)(?:\.\d+)?\b")
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "e2e" / "kube" / "build.py",
           ROOT / "e2e" / "oracle" / "gobuild.py"]


def required_go() -> str:
    """The newest `go` line of the repository's go.mod files, as major.minor."""
    versions = set()
    for gomod in ROOT.joinpath("e2e").rglob("go.mod"):
        m = re.search(r"^go (\d+)\.(\d+)", gomod.read_text(), re.MULTILINE)
        assert m is not None, f"{gomod}: no go line"
        versions.add((int(m.group(1)), int(m.group(2))))
    assert versions
    major, minor = max(versions)
    return f"{major}.{minor}"


def go_mentions(text: str) -> list[str]:
    return MENTION.findall(text)


def test_every_stated_go_version_is_the_go_mod_files_one() -> None:
    want = required_go()
    wrong = [f"{path.relative_to(ROOT)}: Go {found}" for path in SOURCES
             for found in go_mentions(path.read_text(encoding="utf-8")) if found != want]
    assert wrong == [], f"the go.mod files need Go {want}"


def test_the_set_up_docs_say_which_go_is_needed() -> None:
    want = required_go()
    for page in ("README.md", "docs/dev/real-control-plane.md"):
        assert want in go_mentions((ROOT / page).read_text(encoding="utf-8")), f"{page} does not say Go {want}"
        assert "GOTOOLCHAIN=local" in (ROOT / page).read_text(encoding="utf-8"), page


def test_a_stale_go_version_is_caught() -> None:
    assert go_mentions("needs Go >= 1.24, or Go 1.26 or newer; go.mod; Go modules") == ["1.24", "1.26"]
