"""The documentation half of a rule: what reporters and ``rules show`` need.

Kept apart from compiled CEL so reporters never import the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scanner.findings.records import Level

HELP_URI = "https://github.com/poolgate/poolgate/blob/main/docs/rules.md#{anchor}"


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """Identity and documentation of one rule, read from its YAML file."""

    id: str
    name: str
    level: Level
    summary: str
    description: str
    remediation: str
    subject: str
    source: str
    """The rule file, as a display path."""
    security_severity: float | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    help_uri: str = ""

    @property
    def anchor(self) -> str:
        return f"{self.id.lower()}-{self.name}"

    @property
    def uri(self) -> str:
        return self.help_uri or HELP_URI.format(anchor=self.anchor)

    def help_markdown(self) -> str:
        return (
            f"**{self.id} {self.name}** ({self.level})\n\n{self.summary}\n\n"
            f"{self.description}\n\n**Remediation:** {self.remediation}"
        )

    def help_text(self) -> str:
        return f"{self.summary}\n\n{self.description}\n\nRemediation: {self.remediation}"
