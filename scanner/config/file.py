"""One ``.poolgate.yaml`` read, validated and converted into the typed ``Config``.

The text is parsed with the project's YAML reader (positions kept for messages),
checked against the published schema (``scanner.config.validation``), and
converted; every problem of the file is reported at once, before any scanning.
Its ``ruleDirs`` must stay inside the repository that holds it. ``parse`` takes
the file's bytes and a check for its ``ruleDirs``, so a config read from a git
commit (``scanner.policy``) goes through the same validation. Which file
a scan uses is ``scanner.config.discovery``'s decision.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from scanner.config import validation
from scanner.config.validation import UnknownKey, describe, line_of
from scanner.config.values import AdminSubject, Config, Exemption, Require, RuleOverride
from scanner.errors import ConfigError, printable
from scanner.findings.records import Level
from scanner.inventory import LineMap, join_path
from scanner.sources.yaml import surrogates
from scanner.sources.yaml.document import CONFIG_KIND, parse_plain

CONFIG_FILE_NAME: Final = ".poolgate.yaml"
API_VERSION: Final = "poolgate.io/v1alpha1"
KIND: Final = CONFIG_KIND
MAX_CONFIG_SIZE: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A configuration and what loading it had to say."""

    config: Config
    warnings: tuple[str, ...] = ()
    """One line each, about which file applies (``scanner.config.discovery``)."""
    path: Path | None = None
    """The file read; ``None`` when no file was found (built-in defaults)."""
    sha256: str = ""
    """SHA-256 of the file's bytes (hex); empty for the built-in defaults."""
    unknown: tuple[UnknownKey, ...] = ()
    """Keys the schema does not know, left out of ``config``: a scan that meets one is
    incomplete (``scanner.policy``), ``config validate`` fails."""


RuleDirCheck = Callable[[str], tuple[str, str]]
"""A ``spec.ruleDirs`` entry -> (the directory to load, "") or ("", the problem)."""


def load(path: Path) -> LoadedConfig:
    """Read, validate and convert one config file; ``ConfigError`` lists every problem."""
    loaded, problems = examine_file(path)
    if problems:
        raise_problems(problems)
    return loaded


def examine_file(path: Path) -> tuple[LoadedConfig, list[str]]:
    """``examine`` of the file at ``path``; ``ConfigError`` when it cannot be read."""
    shown = display_path(path)
    try:
        if path.stat().st_size > MAX_CONFIG_SIZE:
            raise ConfigError(f"{shown}: larger than {MAX_CONFIG_SIZE // 1024} KiB")
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{shown}: cannot read: {error.strerror or error}") from None
    return examine(data, path, shown, _work_tree_dirs(path, shown))


def parse(data: bytes, path: Path, shown: str, rule_dir: RuleDirCheck) -> LoadedConfig:
    """Validate and convert a config file's bytes (``examine``); ``ConfigError`` lists
    every problem."""
    loaded, problems = examine(data, path, shown, rule_dir)
    if problems:
        raise_problems(problems)
    return loaded


def examine(
    data: bytes, path: Path, shown: str, rule_dir: RuleDirCheck
) -> tuple[LoadedConfig, list[str]]:
    """(the config as far as it converts, every problem of the file in one pass: the
    schema's, and the conversion's in the sections the schema passed). ``path``
    becomes ``Config.source`` (where the file sits in the work tree: findings and
    notifications name it by its repository path), ``shown`` names it in messages,
    and ``rule_dir`` checks and resolves each ``spec.ruleDirs`` entry. A file that is
    not one YAML mapping raises ``ConfigError``: there is nothing more to check."""
    if len(data) > MAX_CONFIG_SIZE:
        raise ConfigError(f"{shown}: larger than {MAX_CONFIG_SIZE // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{shown}: cannot read: {error}") from None
    documents, parse_problems = parse_plain(text)
    if parse_problems:
        raise_problems([f"{shown}:{line}:{col}: {text}" for text, line, col in parse_problems])
    if len(documents) != 1:
        what = "is empty" if not documents else "holds more than one YAML document"
        raise ConfigError(f"{shown}:1: {what}; expected one {KIND} object")
    body, positions = documents[0]
    if not isinstance(body, dict):
        raise ConfigError(f"{shown}:1: expected a {KIND} mapping, got {describe(body)}")
    if surrogates.may_hold(text):
        # As in manifests: cel-cpp ends a string at a NUL, so a guard comparing the
        # name in Python (scanner/evaluate/optimize/guards.py) would disagree with CEL about it.
        body = surrogates.replaced(body)
    lines = LineMap(positions)
    checked = validation.check(body, lines, shown)
    problems = list(checked.problems)
    config = _convert(_usable(body, checked.broken), lines, path, shown, problems, rule_dir)
    digest = hashlib.sha256(data).hexdigest()
    return LoadedConfig(config, (), path, digest, tuple(checked.unknown)), problems


def _usable(body: Mapping[str, Any], broken: frozenset[str]) -> dict[str, Any]:
    """``body`` without the sections the schema found a problem in (``spec.require``,
    or all of ``spec``), whose values the conversion could not trust."""
    if "spec" in broken or not isinstance(body.get("spec"), Mapping):
        return {key: value for key, value in body.items() if key != "spec"}
    spec = {key: value for key, value in body["spec"].items() if f"spec.{key}" not in broken}
    return {**body, "spec": spec}


def check_rule_overrides(
    config: Config,
    defaults: Mapping[str, Mapping[str, Any]],
    suggestion: Callable[[str], str] = lambda _: "",
) -> None:
    """Rule ids in ``spec.rules`` and ``spec.exemptions`` must name loaded rules
    (``defaults``: rule id -> the params its file declares; names were turned into ids
    already, and ``suggestion`` says `` (did you mean X?)`` for one that is not), and
    ``params`` may set
    only parameters the rule declares, each of its default's type: a misspelt or
    mistyped parameter would otherwise leave the default in force unseen, or turn
    every evaluation of the rule into an error."""
    problems = rule_override_problems(config, defaults, suggestion)
    if any("unknown rule id" in problem for problem in problems):
        raise_problems(problems, hint=UNKNOWN_RULE_HINT)
    if problems:
        raise_problems(problems, hint=PARAMETER_HINT)


UNKNOWN_RULE_HINT: Final = "see `poolgate rules list`; user rules need --rules or spec.ruleDirs"
PARAMETER_HINT: Final = "`poolgate rules show ID` lists a rule's parameters"


def rule_override_problems(
    config: Config,
    defaults: Mapping[str, Mapping[str, Any]],
    suggestion: Callable[[str], str] = lambda _: "",
) -> list[str]:
    """The problems ``check_rule_overrides`` raises, one line each."""
    shown = display_path(Path(config.source)) if config.source else CONFIG_FILE_NAME
    problems: list[str] = []
    for rule_id, override in config.rules.items():
        where = f"{shown}:{override.line}: {join_path('spec.rules', rule_id)}"
        if rule_id not in defaults:
            problems.append(f"{where}: unknown rule id {rule_id}{suggestion(rule_id)}")
            continue
        declared = defaults[rule_id]
        for name, value in override.params.items():
            field_path = join_path(join_path(where, "params"), str(name))
            if name not in declared:
                has = ", ".join(sorted(map(str, declared))) or "none"
                problems.append(f"{field_path}: {rule_id} has no parameter {name} (it has: {has})")
            elif not _same_type(declared[name], value):
                problems.append(
                    f"{field_path}: {_type_name(value)} where the rule's default is "
                    f"{_type_name(declared[name])} ({json.dumps(declared[name])})"
                )
    problems += [
        f"{shown}:{exemption.line}: spec.exemptions[{index}].rule: unknown rule id "
        f"{exemption.rule}{suggestion(exemption.rule)}"
        for index, exemption in enumerate(config.exemptions)
        if exemption.rule not in defaults
    ]
    return problems


def _type_name(value: object) -> str:
    """A parameter value's type as CEL names it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "null" if value is None else "map"


def _same_type(default: object, value: object) -> bool:
    """Whether a config value may replace a parameter's default: the same CEL type (a
    whole number for a double is one), or any value for a null default."""
    if default is None:
        return True
    wanted, given = _type_name(default), _type_name(value)
    return given == wanted or (wanted == "double" and given == "int")


def raise_problems(problems: list[str], hint: str = "") -> None:
    """One error line per problem (keys and values from the file escaped: ``printable``)."""
    if len(problems) == 1:
        raise ConfigError(printable(problems[0]), hint=hint)
    raise ConfigError(f"{len(problems)} config problems:", hint=hint, lines=problems)


def _convert(
    body: Mapping[str, Any],
    lines: LineMap,
    path: Path,
    shown: str,
    problems: list[str],
    rule_dir: RuleDirCheck,
) -> Config:
    """The validated document as a ``Config``; semantic problems are appended to ``problems``."""
    spec: Mapping[str, Any] = body.get("spec") or {}
    require = _require(spec.get("require") or {})
    values: dict[str, Any] = {"require": require, "source": str(path)}
    for key, attribute in (
        ("operatorNamespaces", "operator_namespaces"),
        ("systemNamespaces", "system_namespaces"),
        ("poolLabels", "pool_labels"),
        ("skuLabels", "sku_labels"),
        ("workloadIdentityKeys", "workload_identity_keys"),
        ("workloadIdentityAccounts", "workload_identity_accounts"),
    ):
        if key in spec:
            values[attribute] = tuple(spec[key])
    for key, attribute in (
        ("trustDomainLabel", "trust_domain_label"),
        ("skuLabel", "sku_label"),
        ("extendedResourceToleration", "extended_resource_toleration"),
        ("admissionPreview", "admission_preview"),
    ):
        if key in spec:
            values[attribute] = spec[key]
    values["admins"] = tuple(
        AdminSubject(item["kind"], item["name"], item.get("namespace", ""))
        for item in spec.get("admins", ())
    )
    values["rules"] = {
        rule_id: RuleOverride(
            level=Level.parse(item["level"]) if "level" in item else None,
            enabled=item.get("enabled"),
            params=dict(item.get("params", {})),
            line=line_of(lines, join_path("spec.rules", str(rule_id))),
        )
        for rule_id, item in (spec.get("rules") or {}).items()
    }
    values["rule_dirs"] = tuple(
        _rule_dirs(spec.get("ruleDirs", ()), lines, shown, problems, rule_dir)
    )
    values["exemptions"] = tuple(_exemptions(spec.get("exemptions", ()), lines, shown, problems))
    values["exclude"] = tuple(spec.get("exclude", ()))
    _check_excludes(values["exclude"], lines, shown, problems)
    return Config(**values)


def _check_excludes(
    patterns: Iterable[str], lines: LineMap, shown: str, problems: list[str]
) -> None:
    from scanner.config import excludes  # only a config with exclude patterns needs it

    for index, pattern in enumerate(patterns):
        problem = excludes.check(pattern)
        if problem:
            line = line_of(lines, f"spec.exclude[{index}]")
            problems.append(f"{shown}:{line}: spec.exclude[{index}]: {pattern!r}: {problem}")


def _require(section: Mapping[str, Any]) -> Require:
    defaults = Require()
    runtime_class = section.get("runtimeClass", defaults.runtime_class)
    network_policy = section.get("networkPolicy", defaults.network_policy)
    return Require(
        runtime_class=runtime_class if runtime_class is not False else "",
        image_digest_pin=section.get("imageDigestPin", defaults.image_digest_pin),
        signature_verify=section.get("signatureVerify", defaults.signature_verify),
        pod_security=section.get("podSecurity", defaults.pod_security),
        network_policy=network_policy if network_policy is not False else "",
        workload_identity=section.get("workloadIdentity", defaults.workload_identity),
        time_slice_same_trust_only=section.get(
            "timeSliceSameTrustOnly", defaults.time_slice_same_trust_only
        ),
        weight_bucket_public_access=section.get(
            "weightBucketPublicAccess", defaults.weight_bucket_public_access
        ),
        cmek=section.get("cmek", defaults.cmek),
        forbid_node_wide_object_iam=section.get(
            "forbidNodeWideObjectIAM", defaults.forbid_node_wide_object_iam
        ),
    )


def _rule_dirs(
    entries: Iterable[str],
    lines: LineMap,
    shown: str,
    problems: list[str],
    rule_dir: RuleDirCheck,
) -> Iterable[str]:
    for index, entry in enumerate(entries):
        directory, problem = rule_dir(entry)
        if problem:
            line = line_of(lines, f"spec.ruleDirs[{index}]")
            problems.append(f"{shown}:{line}: spec.ruleDirs[{index}]: {entry}: {problem}")
        else:
            yield directory


def _work_tree_dirs(path: Path, shown: str) -> RuleDirCheck:
    """The check of a work-tree config's rule directories: each inside the repository
    that holds the config (the config's own directory outside a repository), symlinks
    resolved: a pull request's ``.poolgate.yaml`` must not make its CI job read files
    elsewhere on the runner (``/``, ``../../.kube``) and print them in rule errors."""
    base = Path(os.path.abspath(path)).parent
    root = _repository(base).resolve()

    def check(entry: str) -> tuple[str, str]:
        directory = base / entry
        if not directory.is_dir():
            return "", f"no such directory (relative to {display_path(base)})"
        if not directory.resolve().is_relative_to(root):
            return "", (
                f"outside the repository ({display_path(root)}); a config's rule "
                "directories must be inside it (give others with --rules)"
            )
        return str(directory), ""

    return check


def _repository(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``.git``, else ``start``."""
    for candidate in (start, *start.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return start


def _exemptions(
    entries: Iterable[Mapping[str, Any]], lines: LineMap, shown: str, problems: list[str]
) -> Iterable[Exemption]:
    for index, entry in enumerate(entries):
        where = f"spec.exemptions[{index}]"
        expires = None
        if "expires" in entry:
            try:
                expires = datetime.date.fromisoformat(entry["expires"])
            except ValueError:
                line = line_of(lines, f"{where}.expires")
                problems.append(
                    f"{shown}:{line}: {where}.expires: {entry['expires']} is not a calendar date"
                )
                continue
        match = entry.get("match") or {}
        yield Exemption(
            rule=entry["rule"],
            namespace=match.get("namespace", ""),
            kind=match.get("kind", ""),
            name=match.get("name", ""),
            reason=str(entry.get("reason", "")).strip(),
            expires=expires,
            line=line_of(lines, where),
        )


def display_path(path: Path) -> str:
    """``path`` as the user would type it: relative to the working directory when under it."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)
