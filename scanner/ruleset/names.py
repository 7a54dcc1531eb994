"""A rule is named by its id (``PG301``) or its name (``privileged-outside-operator``),
wherever a user names one: ``--enable/--disable``, ``rules show``, the config's
``spec.rules`` keys and ``spec.exemptions[].rule``, and ``poolgate.io/ignore``
annotations. This is the one resolver all of them use, so a name works in every
place an id does and an unknown one gets the same "did you mean" everywhere.

Ids are matched in any case (``pg301``), as before; names too (they are lowercase).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from scanner.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from scanner.config.values import Config, RuleOverride
    from scanner.ruleset.docs import RuleDoc


@dataclass(frozen=True, slots=True)
class RuleNames:
    """The ids and names of the loaded rules."""

    ids: frozenset[str] = frozenset()
    by_name: Mapping[str, str] = field(default_factory=dict)
    """Name -> id."""

    @classmethod
    def of(cls, docs: Iterable[RuleDoc]) -> RuleNames:
        listed = list(docs)
        return cls(
            frozenset(doc.id for doc in listed), {doc.name.lower(): doc.id for doc in listed}
        )

    @classmethod
    def of_ids(cls, ids: Iterable[str]) -> RuleNames:
        """Ids alone (callers that have no names at hand)."""
        return cls(frozenset(ids))

    def resolve(self, text: str) -> str | None:
        """The id ``text`` names, or ``None``."""
        key = text.strip()
        if key.upper() in self.ids:
            return key.upper()
        return self.by_name.get(key.lower())

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.resolve(text) is not None

    def suggestion(self, text: str) -> str:
        """`` (did you mean X?)`` for the closest id or name, or ``""``."""
        import difflib  # only when a rule is misspelt

        key = text.strip()
        candidates = {**{rule: rule for rule in self.ids}, **dict.fromkeys(self.by_name)}
        close = difflib.get_close_matches(key.upper(), [c.upper() for c in candidates], 1, 0.6)
        if not close:
            return ""
        found = next(c for c in candidates if c.upper() == close[0])
        return f" (did you mean {found}?)"

    def require(self, texts: Sequence[str], option: str) -> list[str]:
        """The ids ``texts`` name; a ``UsageError`` naming every unknown one."""
        unknown = [text for text in texts if self.resolve(text) is None]
        if unknown:
            named = ", ".join(f"{text}{self.suggestion(text)}" for text in unknown)
            raise UsageError(f"{option}: unknown rule {named}", hint="see `poolgate rules list`")
        return [self.resolve(text) or "" for text in texts]

    def configured(self, config: Config) -> Config:
        """``config`` with rule names in ``spec.rules`` and ``spec.exemptions`` turned into
        ids. Unknown ones are kept as written (``configfile.check_rule_overrides``
        reports them); one rule set twice, by id and by name, is a ``ConfigError``."""
        rules: dict[str, RuleOverride] = {}
        twice: list[str] = []
        for key, override in config.rules.items():
            rule_id = self.resolve(key) or key
            if rule_id in rules:
                twice.append(f"{config.source or 'config'}:{override.line}: spec.rules: {key}")
            rules[rule_id] = override
        if twice:
            raise ConfigError(
                "spec.rules sets a rule twice (by id and by name): " + "; ".join(twice),
                hint="keep one entry per rule",
            )
        exemptions = tuple(
            replace(item, rule=self.resolve(item.rule) or item.rule) for item in config.exemptions
        )
        return replace(config, rules=rules, exemptions=exemptions)
