"""The exit codes of every command (docs/usage.md, "Exit codes").

0 nothing at or above ``--fail-on``; 1 findings; 2 usage, config or rule error;
3 incomplete (unreadable input, rule evaluation errors) when nothing else failed;
4 internal error; 130 interrupted.
"""

from __future__ import annotations

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_INTERRUPTED = (
    0,
    1,
    2,
    3,
    4,
    130,
)
