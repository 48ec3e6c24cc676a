"""Registry of subcommands: name -> (module, summary).

Modules are imported lazily so `gpuclaim cel` does not pay for aiohttp or the
kubernetes client. Each module exposes `configure(parser)` and `run(args) -> int`.
"""

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "demo": Command("gpuclaim.commands.demo", "run the whole stack on a sample GPU fleet and report"),
    "convert": Command("gpuclaim.commands.convert", "show what the webhook makes of legacy GPU pods"),
    "lint": Command("gpuclaim.commands.lint", "check DRA manifests as the validating webhook would"),
    "score": Command("gpuclaim.commands.score", "the extender's node scores for one pod"),
    "cel": Command("gpuclaim.commands.cel", "evaluate a DRA CEL selector as the scheduler would"),
    "webhook": Command("gpuclaim.commands.webhook", "run the admission webhook server"),
    "extender": Command("gpuclaim.commands.extender", "run the scheduler extender server"),
    "certs": Command("gpuclaim.commands.certs", "issue / rotate serving certificates, inject the caBundle"),
    "audit": Command("gpuclaim.commands.audit", "migration readiness: what conversion changes, quotas, mixed nodes"),
    "fleet": Command("gpuclaim.commands.fleet", "where devices sit free, used or stranded; which GPU each pod got"),
}

__all__ = ["COMMANDS", "Command"]
