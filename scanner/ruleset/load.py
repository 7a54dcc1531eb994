"""Rules: load YAML files, validate them against the shipped schema, compile their CEL once.

Every problem of every rule file is collected before failing, each as
``file:line: field: message``, so a broken rule pack is fixed in one pass
(kube-linter's ``ValidateAndInstantiate`` habit). Expressions are compiled once
here and never per object.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final, NamedTuple

from scanner.cel import Engine, Program, ResultKind, analysis
from scanner.cel.analysis import RuleAnalysis, analyze_rule
from scanner.config.values import Config, RuleOverride
from scanner.errors import CelError, RuleLoadError
from scanner.findings.records import Level
from scanner.inventory import Position, join_path
from scanner.ruleset import admission
from scanner.ruleset import cache as rulecache
from scanner.ruleset.admission.policy import Policy
from scanner.ruleset.docs import RuleDoc
from scanner.ruleset.names import RuleNames
from scanner.sources.yaml.document import parse_plain

DOCUMENT_RULES = ("PG001", "PG002", "PG003", "PG004", "PG005")
PREVIEW_RULE = "PG606"
"""The admission preview: built in, stamped by ``scanner.evaluate.preview``."""
BUILTIN_RULES = (*DOCUMENT_RULES, PREVIEW_RULE)
"""Built-in rules whose findings come from poolgate itself, not from CEL: reading
documents (PG001-PG003), checking suppressions (PG004, ``scanner.findings.suppress``) and
identities defined twice where they are applied together (PG005, ``scanner.model.duplicates``)."""


MODES = ("scan", "audit")
"""``scan`` reads manifests; ``audit`` reads a live cluster or a snapshot of one."""


@dataclass(frozen=True, slots=True)
class Validation:
    """A VAP-style check: ``expression`` is true when the subject complies."""

    expression: Program
    message: str
    message_expression: Program | None
    path: str


@dataclass(frozen=True, slots=True)
class Rule:
    """A validated, compiled rule. ``doc`` is everything reporters need."""

    doc: RuleDoc
    enabled: bool
    kinds: frozenset[str]
    condition: Program | None = None
    variables: tuple[tuple[str, Program], ...] = ()
    violations: Program | None = None
    validations: tuple[Validation, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """The ``params`` the rule file declares, before config overrides: the parameters a
    config may set, each of its default's type (``configfile.check_rule_overrides``)."""
    modes: frozenset[str] = frozenset(MODES)
    """Where the rule runs: ``scan`` (manifests) and/or ``audit`` (live cluster state)."""
    needs: frozenset[str] = frozenset()
    """Kinds the rule's facts are joined from, besides its subjects: the audit lists
    them, and does not run the rule when one of them cannot be read."""
    controlled: bool = False
    """Workload rules: also run on workloads whose controller is in the run
    (``match.controlled: include``); by default their controller's template stands
    for them (see ``controlled`` in ``scanner.model.workloads``)."""
    admission: Policy | None = None
    """An admission policy loaded as a rule (``scanner.ruleset.admission``), evaluated
    by ``scanner.evaluate.admission`` instead of the fields above."""
    export: Mapping[str, Any] = field(default_factory=dict)
    """The rule's ``admission`` section as written: how ``poolgate admission export``
    enforces it at admission (``scanner.ruleset.export``)."""

    @property
    def id(self) -> str:
        return self.doc.id

    @property
    def builtin(self) -> bool:
        return self.violations is None and not self.validations and self.admission is None

    @property
    def expressions(self) -> tuple[str, ...]:
        """The text of every expression but the variables': the condition, the
        violations, each validation's expression and message expression."""
        programs = [self.condition, self.violations]
        for validation in self.validations:
            programs += [validation.expression, validation.message_expression]
        return tuple(program.source for program in programs if program is not None)

    @property
    def analysis(self) -> RuleAnalysis:
        """What the rule's CEL reads (``scanner.cel.analysis``), its variables followed.
        Parsed when the rule loaded; a rule bound by ``scanner.evaluate.optimize.binding`` has no
        variables left, so ask the rule as loaded."""
        variables = tuple((name, program.source) for name, program in self.variables)
        return analyze_rule(self.expressions, variables)


def bundled_rules_dir() -> Path:
    """The rules shipped with poolgate: inside the wheel, or ``rules/`` of a checkout."""
    packaged = resources.files("scanner") / "bundled_rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


@cache
def _schema_text() -> str:
    return (resources.files("scanner") / "schemas" / "rule.schema.json").read_text()


@cache
def _schema_validator() -> Any:
    from jsonschema import Draft202012Validator  # lazy: most runs find every rule in rulecache

    return Draft202012Validator(json.loads(_schema_text()))


MAX_RULE_FILE_SIZE: Final = 256 * 1024
"""A rule file is a page or two of YAML (the largest bundled one is ~13 KiB)."""


def rule_files(directories: Iterable[Path]) -> list[Path]:
    """The ``*.yaml`` files of each directory, in name order; a file given as itself."""
    return [
        path
        for directory in directories
        for path in ([directory] if directory.is_file() else sorted(directory.glob("*.yaml")))
    ]


class RuleText(NamedTuple):
    """A rule file already read (from a git commit: ``--policy-ref``): its name in
    messages (``REF:path``) and its bytes."""

    name: str
    data: bytes


def load_rules(
    directories: Sequence[Path],
    engine: Engine,
    config: Config | None = None,
    texts: Sequence[RuleText] = (),
) -> list[Rule]:
    """Load, validate and compile every rule in ``directories``, then those in
    ``texts``, sorted by id. One loader for both: a rule read from a commit is
    checked exactly like one read from a file.

    Raises ``RuleLoadError`` listing every problem found in every file.
    """
    config = config or Config()
    problems: list[str] = []
    rules: dict[str, Rule] = {}
    known = rulecache.load()
    validated = _Validated(frozenset(known))
    kept = rulecache.load_analyses()
    analysis.restore(kept)
    collected = admission.Collected()
    for name, text in _texts(directories, texts, problems):
        if text is None:
            continue
        rule = _load_text(name, text, engine, problems, validated, collected)
        if rule is None:
            continue
        if rule.id in rules:
            problems.append(
                f"{name}: id {rule.id} is already defined in {rules[rule.id].doc.source}"
            )
            continue
        rules[rule.id] = rule
    if collected.files:
        _add_admission(rules, collected, engine, problems)
    for directory in directories:
        if not directory.exists():
            problems.append(f"{directory}: rule directory does not exist")
    rulecache.save(known, validated.passed)
    rulecache.save_analyses(kept, _new_analyses(rules.values(), kept))
    engine.save_cache()
    if problems:
        raise RuleLoadError(problems)
    # Overrides go on last: a config may name a rule by its name (``names``).
    overrides = RuleNames.of(rule.doc for rule in rules.values()).configured(config).rules
    return [_configured(rules[key], overrides.get(key)) for key in sorted(rules)]


def _new_analyses(rules: Iterable[Rule], kept: Mapping[str, Any]) -> dict[str, Any]:
    """The analyses of the expressions of ``rules`` (each analysed when it loaded) that
    the rule cache does not hold yet, by digest."""
    found: dict[str, Any] = {}
    for rule in rules:
        for source in (*rule.expressions, *(program.source for _, program in rule.variables)):
            entry = analysis.digest(source)
            if entry not in kept:
                found[entry] = analysis.to_json(analysis.analyze(source))
    return found


@dataclass(slots=True)
class _Validated:
    """Digests of rule files known to pass the schema, and of those that passed now."""

    known: frozenset[str]
    passed: list[str] = field(default_factory=list)


def _texts(
    directories: Sequence[Path], texts: Sequence[RuleText], problems: list[str]
) -> Iterator[tuple[str, str | None]]:
    """(name, text) of each rule file in turn; ``None`` for one that cannot be read,
    with the reason in ``problems``."""
    for path in rule_files(directories):
        yield str(path), _read_file(path, problems)
    for item in texts:
        yield item.name, _decode(item, problems)


def _read_file(path: Path, problems: list[str]) -> str | None:
    """A rule file's text, or ``None`` with the reason in ``problems``."""
    try:
        status = path.lstat()  # one call for a plain file: rules load on every run
        linked = stat.S_ISLNK(status.st_mode)
        if linked:
            status = path.stat()
        if not stat.S_ISREG(status.st_mode):  # a FIFO would block, a device never end
            problems.append(f"{path}: not a regular file")
            return None
        if linked and not path.resolve().is_relative_to(path.parent.resolve()):
            problems.append(f"{path}: a symbolic link out of its rule directory")
            return None
        if status.st_size > MAX_RULE_FILE_SIZE:
            problems.append(f"{path}: larger than {MAX_RULE_FILE_SIZE // 1024} KiB")
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f"{path}: cannot read: {error}")
        return None


def _decode(item: RuleText, problems: list[str]) -> str | None:
    """A rule text's bytes as text, within the size a rule file may have."""
    if len(item.data) > MAX_RULE_FILE_SIZE:
        problems.append(f"{item.name}: larger than {MAX_RULE_FILE_SIZE // 1024} KiB")
        return None
    try:
        return item.data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(f"{item.name}: cannot read: {error}")
        return None


def _load_text(
    name: str,
    text: str,
    engine: Engine,
    problems: list[str],
    validated: _Validated,
    collected: admission.Collected,
) -> Rule | None:
    documents, errors = parse_plain(text)
    if errors:
        problems.extend(f"{name}:{line}:{column}: {message}" for message, line, column in errors)
        return None
    if admission.holds_admission(documents):
        collected.add(name, documents)
        return None
    if len(documents) != 1:
        problems.append(f"{name}:1: a rule file holds exactly one YAML document")
        return None
    body, positions = documents[0]
    if not isinstance(body, dict):
        problems.append(f"{name}:1: a rule file is a YAML mapping")
        return None
    key = rulecache.digest(_schema_text(), text)
    if key not in validated.known:
        before = len(problems)
        for invalid in sorted(_schema_validator().iter_errors(body), key=lambda e: list(e.path)):
            field_path = _field_path(invalid.absolute_path)
            line = _line(positions, field_path)
            problems.append(f"{name}:{line}: {field_path or '(rule)'}: {invalid.message}")
        if len(problems) > before:
            return None
        validated.passed.append(key)
    return _compile(name, body, positions, engine, problems)


def _field_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = join_path(path, part)
    return path


def _line(positions: Mapping[str, Position], path: str) -> int:
    while path:
        if path in positions:
            return positions[path][0]
        path = path.rsplit(".", 1)[0] if "." in path else ""
    return 1


def _compile(
    path: str,
    body: Mapping[str, Any],
    positions: Mapping[str, Position],
    engine: Engine,
    problems: list[str],
) -> Rule | None:
    before = len(problems)

    def compile_at(field_path: str, source: str, result: ResultKind) -> Program | None:
        try:
            program = engine.compile(source, result)
            analysis.analyze(source)  # what it reads: a rule the parser cannot read is refused
            return program
        except CelError as error:
            line = _line(positions, field_path)
            where = f" (expression line {error.line}, column {error.column})" if error.line else ""
            problems.append(f"{path}:{line}: {field_path}: CEL {error.message}{where}")
            return None

    match = body.get("match", {})
    condition = None
    if "condition" in match:
        condition = compile_at("match.condition", match["condition"], ResultKind.BOOL)
    variables = []
    for index, variable in enumerate(body.get("variables", [])):
        program = compile_at(
            f"variables[{index}].expression", variable["expression"], ResultKind.ANY
        )
        if program is not None:
            variables.append((variable["name"], program))
    violations = None
    if "violations" in body:
        violations = compile_at("violations", body["violations"], ResultKind.LIST)
    validations = []
    for index, item in enumerate(body.get("validations", [])):
        where = f"validations[{index}]"
        expression = compile_at(f"{where}.expression", item["expression"], ResultKind.BOOL)
        message_expression = None
        if "messageExpression" in item:
            message_expression = compile_at(
                f"{where}.messageExpression", item["messageExpression"], ResultKind.STRING
            )
        if expression is not None:
            validations.append(
                Validation(
                    expression, item.get("message", ""), message_expression, item.get("path", "")
                )
            )
    if body.get("builtin") and body["id"] not in BUILTIN_RULES:
        problems.append(f"{path}:1: builtin: only {', '.join(BUILTIN_RULES)} are built in")
    if len(problems) > before:
        return None

    return Rule(
        doc=_doc(path, body, Level.parse(body["level"])),
        enabled=bool(body.get("enabled", True)),
        kinds=frozenset(match.get("kinds", ())),
        condition=condition,
        variables=tuple(variables),
        violations=violations,
        validations=tuple(validations),
        params=dict(body.get("params", {})),
        defaults=dict(body.get("params", {})),
        modes=frozenset(body.get("modes", MODES)),
        needs=frozenset(body.get("needs", ())),
        controlled=match.get("controlled", "skip") == "include",
        export=dict(body.get("admission", {})),
    )


def _configured(rule: Rule, override: RuleOverride | None) -> Rule:
    """``rule`` with the config's ``spec.rules`` entry for it on top of its file's level,
    enablement and parameters."""
    if override is None:
        return rule
    return replace(
        rule,
        doc=replace(rule.doc, level=override.level or rule.doc.level),
        enabled=rule.enabled if override.enabled is None else override.enabled,
        params={**rule.params, **_as_declared(override.params, rule.params)},
    )


def _add_admission(
    rules: dict[str, Rule],
    collected: admission.Collected,
    engine: Engine,
    problems: list[str],
) -> None:
    """The admission policies of ``collected`` as rules (``scanner.ruleset.admission``):
    each one's id and name are its own, which no built-in rule's name may be."""
    names = {rule.doc.name: rule.id for rule in rules.values()}
    for policy in admission.build(collected, engine.name, problems):
        if policy.name in names or policy.name in rules:
            problems.append(
                f"{policy.source}:1: {policy.kind} {policy.name} is named like rule "
                f"{names.get(policy.name, policy.name)}: rename the policy"
            )
            continue
        level = Level.ERROR
        if policy.bindings and all("Deny" not in b.actions for b in policy.bindings):
            warns = any("Warn" in b.actions for b in policy.bindings)
            level = Level.WARNING if warns else Level.NOTE
        # The config's spec.rules entry goes on with every rule's (``_configured``).
        rules[policy.name] = Rule(
            doc=admission.document(policy, level),
            enabled=True,
            kinds=frozenset(),
            admission=policy,
        )


def _doc(path: str, body: Mapping[str, Any], level: Level) -> RuleDoc:
    """The documentation half of the rule file at ``path``, at its configured ``level``."""
    return RuleDoc(
        id=body["id"],
        name=body["name"],
        level=level,
        summary=body["summary"].strip(),
        description=body["description"].strip(),
        remediation=body["remediation"].strip(),
        subject=body["subject"],
        source=path,
        security_severity=body.get("securitySeverity"),
        tags=tuple(body.get("tags", ())),
        help_uri=body.get("helpUri", ""),
    )


def _as_declared(values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Config params with a whole number given for a double default as that double:
    CEL does not mix int and double in arithmetic, so ``ratio: 1`` for a default of
    ``0.5`` would fail every evaluation (configfile.check_rule_overrides accepts it)."""
    return {
        name: float(value)
        if isinstance(defaults.get(name), float)
        and isinstance(value, int)
        and not isinstance(value, bool)
        else value
        for name, value in values.items()
    }


def select(rules: Iterable[Rule], enable: Iterable[str], disable: Iterable[str]) -> list[Rule]:
    """The rules that run: enabled by default or by ``--enable``, minus ``--disable``.

    Unknown ids in either list are a usage error, raised by the caller.
    """
    enable_set, disable_set = set(enable), set(disable)
    return [
        rule
        for rule in rules
        if (rule.enabled or rule.id in enable_set) and rule.id not in disable_set
    ]
