"""Registry of subcommands: name -> (module, summary, issue that builds it).

Modules are imported lazily so `gpuclaim cel` does not pay for aiohttp or the
kubernetes client. Each module exposes `configure(parser)` and `run(args) -> int`.
"""

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    summary: str
    issue: int


COMMANDS: dict[str, Command] = {
    "demo": Command("gpuclaim.commands.demo", "run the whole stack on a sample GPU fleet and report", 9),
    "convert": Command("gpuclaim.commands.convert", "show what the webhook makes of legacy GPU pods", 4),
    "lint": Command("gpuclaim.commands.lint", "check DRA manifests as the validating webhook would", 5),
    "score": Command("gpuclaim.commands.score", "the extender's node scores for one pod", 7),
    "cel": Command("gpuclaim.commands.cel", "evaluate a DRA CEL selector as the scheduler would", 2),
    "webhook": Command("gpuclaim.commands.webhook", "run the admission webhook server", 6),
    "extender": Command("gpuclaim.commands.extender", "run the scheduler extender server", 7),
    "certs": Command("gpuclaim.commands.certs", "issue / rotate serving certificates, inject the caBundle", 6),
}

__all__ = ["COMMANDS", "Command"]
