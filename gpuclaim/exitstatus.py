"""The one set of exit codes every `gpuclaim` command uses (see DESIGN.md, "The CLI")."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    #: the command ran and the answer is negative: lint findings, a CEL expression error
    FINDINGS = 1
    #: usage error or unreadable input, with a one-line message on stderr
    USAGE = 2
    INTERNAL = 4
    INTERRUPTED = 130


class UsageError(Exception):
    """Bad arguments or unreadable input: printed as one line, exit 2."""
