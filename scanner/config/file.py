"""``.poolgate.yaml``: discovery, validation against the published schema, and the typed value.

The file is a ``GpuPoolGate`` object checked with ``schemas/config.schema.json``
(the same file editors can use). Like pre-commit's ``cfgv`` and yamllint:

* a key the schema does not know is a warning (``FILE:LINE: unknown key spec.x``),
  so an older poolgate still runs with a newer file; except inside an exemption,
  where it is an error: a misspelt ``match`` or ``kind`` would be ignored and the
  exemption would suppress more than it says;
* a value of the wrong type or shape is an error naming the key path and line
  (``FILE:LINE: spec.require.podSecurity: expected one of ...``), every problem
  of the file at once, before any scanning.

Discovery walks up from the first scanned path to the repository root (the
directory holding ``.git``); outside a repository it stops at the working
directory, so a writable ancestor (``/tmp``) cannot set the policy. ``parse``
takes the file's bytes and a check for its ``ruleDirs``, so a config read from a
git commit (``scanner.config.policy``) goes through the same validation.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final

from scanner.config.values import AdminSubject, Config, Exemption, Require, RuleOverride
from scanner.errors import ConfigError, UsageError, printable
from scanner.findings.records import Level
from scanner.inventory import LineMap, Position, join_path
from scanner.sources.yaml import surrogates
from scanner.sources.yaml.document import parse_plain

CONFIG_FILE_NAME: Final = ".poolgate.yaml"
API_VERSION: Final = "poolgate.io/v1alpha1"
KIND: Final = "GpuPoolGate"
MAX_CONFIG_SIZE: Final = 1024 * 1024

_JSON_TYPES: Final = {
    dict: "mapping",
    list: "list",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A configuration and what loading it had to say."""

    config: Config
    warnings: tuple[str, ...] = ()
    """One line each: ``FILE:LINE: unknown key spec.x (ignored)``."""
    path: Path | None = None
    """The file read; ``None`` when no file was found (built-in defaults)."""
    sha256: str = ""
    """SHA-256 of the file's bytes (hex); empty for the built-in defaults."""


RuleDirCheck = Callable[[str], tuple[str, str]]
"""A ``spec.ruleDirs`` entry -> (the directory to load, "") or ("", the problem)."""


def search_path(start: Path) -> tuple[list[Path], Path | None]:
    """The directories discovery looks in from ``start``, nearest first, and the one
    it stops at: the repository root (the nearest directory holding ``.git``), else
    the working directory when ``start`` is inside it. Outside both it looks nowhere
    (``[], None``): a directory no one vouches for does not set the policy."""
    here = Path(os.path.abspath(start))
    if not here.is_dir():
        here = here.parent
    chain = [here, *here.parents]
    for index, directory in enumerate(chain):
        if os.path.lexists(directory / ".git"):
            return chain[: index + 1], directory
    cwd = Path(os.path.abspath(Path.cwd()))
    if cwd in chain:
        return chain[: chain.index(cwd) + 1], cwd
    return [], None


def nearest(start: Path) -> tuple[Path | None, Path | None]:
    """(the nearest ``.poolgate.yaml`` file discovery finds from ``start``, the
    directory the walk stops at); no check of where a symbolic link points."""
    chain, boundary = search_path(start)
    for directory in chain:
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate, boundary
    return None, boundary


def discover(start: Path) -> Path | None:
    """The nearest ``.poolgate.yaml`` at or above ``start``, not above the repository root.

    The repository root is the nearest directory holding ``.git``; without one the
    walk stops at the working directory, and finds nothing when ``start`` is outside
    it (``search_path``). A config that is a symbolic link must stay inside the
    directory where the walk stops: the scanned tree may be an untrusted pull request.
    """
    found, boundary = nearest(start)
    if found is not None and boundary is not None and found.is_symlink():
        target = Path(os.path.realpath(found))
        if boundary != target.parent and boundary not in target.parents:
            raise ConfigError(
                f"{display_path(found)}: symbolic link points outside the repository",
                hint="replace it with a file or pass --config",
            )
    return found


def resolve(paths: Sequence[str], explicit: str | Path | None = None) -> LoadedConfig:
    """The configuration of a scan: ``explicit`` if given, else discovered from ``paths[0]``.

    Standard input (``-``) starts the search in the working directory. No file found
    means the built-in defaults (the full security floor).
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise UsageError(f"--config {path}: no such file", hint="check the path")
        return load(path)
    start = Path.cwd() if not paths or paths[0] == "-" else Path(paths[0])
    found = discover(start)
    loaded = load(found) if found is not None else LoadedConfig(Config())
    others = _other_configs(paths[1:], found)
    if others:
        named = [display_path(other) if other else "" for other in others]
        warning = mixed_configs(display_path(found) if found is not None else "", named)
        loaded = replace(loaded, warnings=(*loaded.warnings, warning))
    if found is None and search_path(start)[1] is None:
        unused = Path(os.path.abspath(start))
        unused = (unused if unused.is_dir() else unused.parent) / CONFIG_FILE_NAME
        if unused.is_file():
            warning = (
                f"{display_path(unused)} is not used: it is outside a repository and the "
                "working directory, where discovery does not look; pass --config to use it"
            )
            loaded = replace(loaded, warnings=(*loaded.warnings, warning))
    return loaded


def mixed_configs(used: str, others: Sequence[str]) -> str:
    """The warning when scanned paths fall under configs (``""``: none) other than
    ``used`` (``""``: the built-in defaults)."""
    shown = used or "the built-in defaults"
    named = ", ".join(other or "no file" for other in others)
    return (
        f"the paths scanned fall under different configs ({named} besides {shown}): "
        f"{shown} {'applies' if used else 'apply'} to all of them; give --config, "
        "or scan each tree on its own"
    )


def _other_configs(paths: Sequence[str], found: Path | None) -> list[Path | None]:
    """The configs other than ``found`` that ``paths`` would each discover, in order
    (one discovery per directory: pre-commit passes thousands of files)."""
    others: list[Path | None] = []
    seen: dict[Path, Path | None] = {}
    for path in paths:
        start = Path.cwd() if path == "-" else Path(os.path.abspath(path))
        directory = start if start.is_dir() else start.parent
        if directory not in seen:
            seen[directory] = discover(directory)
        config = seen[directory]
        if config != found and config not in others:
            others.append(config)
    return others


def load(path: Path) -> LoadedConfig:
    """Read, validate and convert one config file; ``ConfigError`` lists every problem."""
    shown = display_path(path)
    try:
        if path.stat().st_size > MAX_CONFIG_SIZE:
            raise ConfigError(f"{shown}: larger than {MAX_CONFIG_SIZE // 1024} KiB")
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{shown}: cannot read: {error.strerror or error}") from None
    return parse(data, path, shown, _work_tree_dirs(path, shown))


def parse(data: bytes, path: Path, shown: str, rule_dir: RuleDirCheck) -> LoadedConfig:
    """Validate and convert a config file's bytes. ``path`` becomes ``Config.source``
    (where the file sits in the work tree: findings and notifications name it by
    its repository path), ``shown`` names it in messages, and ``rule_dir`` checks
    and resolves each ``spec.ruleDirs`` entry. ``ConfigError`` lists every problem."""
    if len(data) > MAX_CONFIG_SIZE:
        raise ConfigError(f"{shown}: larger than {MAX_CONFIG_SIZE // 1024} KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{shown}: cannot read: {error}") from None
    documents, parse_problems = parse_plain(text)
    if parse_problems:
        _raise([f"{shown}:{line}:{column}: {message}" for message, line, column in parse_problems])
    if len(documents) != 1:
        what = "is empty" if not documents else "holds more than one YAML document"
        raise ConfigError(f"{shown}:1: {what}; expected one {KIND} object")
    body, positions = documents[0]
    if not isinstance(body, dict):
        raise ConfigError(f"{shown}:1: expected a {KIND} mapping, got {_describe(body)}")
    if surrogates.may_hold(text):
        # As in manifests: cel-cpp ends a string at a NUL, so a guard comparing the
        # name in Python (scanner/evaluate/optimize/guards.py) would disagree with CEL about it.
        body = surrogates.replaced(body)
    lines = LineMap(positions)
    problems, warnings = _check_schema(body, lines, shown)
    if problems:
        _raise(problems)
    config = _convert(body, lines, path, shown, problems, rule_dir)
    if problems:
        _raise(problems)
    return LoadedConfig(config, tuple(warnings), path, hashlib.sha256(data).hexdigest())


def check_rule_overrides(config: Config, defaults: Mapping[str, Mapping[str, Any]]) -> None:
    """Rule ids in ``spec.rules`` and ``spec.exemptions`` must name loaded rules
    (``defaults``: rule id -> the params its file declares), and ``params`` may set
    only parameters the rule declares, each of its default's type: a misspelt or
    mistyped parameter would otherwise leave the default in force unseen, or turn
    every evaluation of the rule into an error."""
    shown = display_path(Path(config.source)) if config.source else CONFIG_FILE_NAME
    problems: list[str] = []
    for rule_id, override in config.rules.items():
        where = f"{shown}:{override.line}: {join_path('spec.rules', rule_id)}"
        if rule_id not in defaults:
            problems.append(f"{where}: unknown rule id {rule_id}")
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
        f"{shown}:{exemption.line}: spec.exemptions[{index}].rule: unknown rule id {exemption.rule}"
        for index, exemption in enumerate(config.exemptions)
        if exemption.rule not in defaults
    ]
    if any("unknown rule id" in problem for problem in problems):
        _raise(problems, hint="see `poolgate rules list`; user rules need --rules or spec.ruleDirs")
    if problems:
        _raise(problems, hint="`poolgate rules show ID` lists a rule's parameters")


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


def _raise(problems: list[str], hint: str = "") -> None:
    """One error line per problem (keys and values from the file escaped: ``printable``)."""
    if len(problems) == 1:
        raise ConfigError(printable(problems[0]), hint=hint)
    raise ConfigError(f"{len(problems)} config problems:", hint=hint, lines=problems)


@cache
def schema() -> dict[str, Any]:
    """The published JSON schema of ``.poolgate.yaml``."""
    text = (resources.files("scanner") / "schemas" / "config.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator  # lazy: only runs with a config file

    return Draft202012Validator(schema())


def _check_schema(
    body: Mapping[str, Any], lines: LineMap, shown: str
) -> tuple[list[str], list[str]]:
    """(problems, warnings): unknown keys warn (but inside an exemption), everything
    else is a problem."""
    problems: set[tuple[int, str]] = set()  # jsonschema repeats some, e.g. per missing key
    warnings: set[tuple[int, str]] = set()
    for error in _validator().iter_errors(body):
        path = _field_path(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            for key in _extra_keys(error.instance, error.schema):
                key_path = join_path(path, str(key))
                line = _line(lines, key_path)
                if key_path.startswith(_EXEMPTIONS):
                    problems.add((line, f"{shown}:{line}: {key_path}: {_WIDENS}"))
                else:
                    warnings.add((line, f"{shown}:{line}: unknown key {key_path} (ignored)"))
            continue
        line = _line(lines, path)
        problems.add((line, f"{shown}:{line}: {path or '(top level)'}: {_message(error)}"))
    return [text for _, text in sorted(problems)], [text for _, text in sorted(warnings)]


_EXEMPTIONS: Final = "spec.exemptions["
_WIDENS: Final = (
    "unknown key in an exemption (ignoring it could make the exemption suppress more "
    "than it says; check the spelling: rule, match.namespace, match.kind, match.name, "
    "reason, expires)"
)


def _extra_keys(instance: Mapping[str, Any], subschema: Mapping[str, Any]) -> list[Any]:
    known = subschema.get("properties", {})
    return [key for key in instance if key not in known]


def _message(error: Any) -> str:
    """jsonschema's messages, reworded where they would not help someone editing YAML."""
    value = error.instance
    expected = error.schema.get("x-expected") if isinstance(error.schema, Mapping) else None
    if expected:
        return f"expected {expected}, got {_describe(value)}"
    if error.validator == "type":
        types = error.validator_value
        names = [types] if isinstance(types, str) else list(types)
        wanted = " or ".join(_JSON_NAMES.get(name, name) for name in names)
        return f"expected a {wanted}, got {_describe(value)}"
    if error.validator == "enum":
        options = ", ".join(json.dumps(option) for option in error.validator_value)
        return f"expected one of {options}; got {_describe(value)}"
    if error.validator == "const":
        return f"expected {json.dumps(error.validator_value)}, got {_describe(value)}"
    if error.validator == "required":
        missing = [key for key in error.validator_value if key not in value]
        return f"missing required key {', '.join(missing)}"
    if error.validator == "uniqueItems":
        return "lists an entry twice"
    if error.validator == "minLength":
        return "must not be empty"
    message: str = error.message
    return message


_JSON_NAMES: Final = {"object": "mapping", "array": "list", "boolean": "boolean (true/false)"}


def _describe(value: object) -> str:
    if value is None:
        return "null"
    kind = _JSON_TYPES.get(type(value), type(value).__name__)
    if isinstance(value, dict | list):
        return f"a {kind}"
    text = json.dumps(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _field_path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = join_path(path, part if isinstance(part, int) else str(part))
    return path


def _line(lines: LineMap, path: str) -> int:
    found: Position | None = lines.lookup(path)
    return found[0] if found is not None else 1


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
        ("workloadIdentityKeys", "workload_identity_keys"),
        ("workloadIdentityAccounts", "workload_identity_accounts"),
    ):
        if key in spec:
            values[attribute] = tuple(spec[key])
    for key, attribute in (
        ("trustDomainLabel", "trust_domain_label"),
        ("skuLabel", "sku_label"),
        ("extendedResourceToleration", "extended_resource_toleration"),
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
            line=_line(lines, join_path("spec.rules", str(rule_id))),
        )
        for rule_id, item in (spec.get("rules") or {}).items()
    }
    values["rule_dirs"] = tuple(
        _rule_dirs(spec.get("ruleDirs", ()), lines, shown, problems, rule_dir)
    )
    values["exemptions"] = tuple(_exemptions(spec.get("exemptions", ()), lines, shown, problems))
    return Config(**values)


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
            line = _line(lines, f"spec.ruleDirs[{index}]")
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
                line = _line(lines, f"{where}.expires")
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
            line=_line(lines, where),
        )


def display_path(path: Path) -> str:
    """``path`` as the user would type it: relative to the working directory when under it."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def init_target(argument: str, force: bool) -> Path:
    """Where ``poolgate config init PATH`` writes: ``PATH/.poolgate.yaml`` for a directory
    (one named with a trailing slash must exist: it is never taken for a file name)."""
    path = Path(argument)
    if argument.endswith(("/", os.sep)) and not path.is_dir():
        raise UsageError(f"{argument}: no such directory")
    target = path / CONFIG_FILE_NAME if path.is_dir() else path
    if target.exists() and not force:
        raise UsageError(f"{target} already exists", hint="pass --force to overwrite it")
    if not target.parent.is_dir():
        raise UsageError(f"{target.parent}: no such directory")
    return target


def default_text() -> str:
    """A commented ``.poolgate.yaml`` holding exactly the built-in defaults.

    Values come from ``Config()`` and comments from the schema's descriptions, so
    neither can drift from what poolgate does without a file.
    """
    config = Config()
    require = config.require
    spec_schema = schema()["properties"]["spec"]["properties"]
    require_schema = spec_schema["require"]["properties"]
    require_values: dict[str, Any] = {
        "runtimeClass": require.runtime_class or False,
        "imageDigestPin": require.image_digest_pin,
        "signatureVerify": require.signature_verify,
        "podSecurity": require.pod_security,
        "networkPolicy": require.network_policy or False,
        "workloadIdentity": require.workload_identity,
        "timeSliceSameTrustOnly": require.time_slice_same_trust_only,
        "forbidNodeWideObjectIAM": require.forbid_node_wide_object_iam,
    }
    spec_values: dict[str, Any] = {
        "operatorNamespaces": list(config.operator_namespaces),
        "systemNamespaces": list(config.system_namespaces),
        "trustDomainLabel": config.trust_domain_label,
        "skuLabel": config.sku_label,
        "poolLabels": list(config.pool_labels),
        "extendedResourceToleration": config.extended_resource_toleration,
        "workloadIdentityKeys": list(config.workload_identity_keys),
        "workloadIdentityAccounts": list(config.workload_identity_accounts),
        "admins": [],
        "ruleDirs": list(config.rule_dirs),
    }
    out = [
        "# poolgate configuration. Every key is optional: one left out keeps the default",
        "# written here. Schema: scanner/schemas/config.schema.json in the poolgate package.",
        f"apiVersion: {API_VERSION}",
        f"kind: {KIND}",
        "metadata:",
        "  name: default",
        "spec:",
        "  require:",
    ]
    for key, value in require_values.items():
        out.extend(_comment(require_schema[key]["description"], "    "))
        out.append(f"    {key}: {_flow(value)}")
    for key, value in spec_values.items():
        out.extend(_comment(spec_schema[key]["description"], "  "))
        flow = _flow(value)
        if len(flow) <= 60:
            out.append(f"  {key}: {flow}")
        else:
            out.append(f"  {key}:")
            out.extend(f"    - {_flow(item)}" for item in value)
        if key == "admins":
            out.append("  #   - {kind: Group, name: platform-admins}")
    out += [
        *_comment(spec_schema["rules"]["description"] + " Example:", "  "),
        "  #   PG204: {level: note}       # error | warning | note",
        "  #   PG306: {enabled: false}",
        "  #   PG603: {params: {minutes: 30}}   # parameters: `poolgate rules show PG603`",
        "  rules: {}",
        *_comment(spec_schema["exemptions"]["description"], "  "),
        *_comment(spec_schema["exemptions"]["items"]["properties"]["match"]["description"], "  "),
        "  # An exemption without a reason, or after its expiry date, does not suppress.",
        "  # Example:",
        "  #   - rule: PG301",
        "  #     match: {namespace: monitoring, kind: DaemonSet, name: dcgm-exporter}",
        "  #     reason: DCGM exporter needs device access; owned by the platform team.",
        "  #     expires: 2027-03-31",
        "  exemptions: []",
    ]
    return "\n".join(out) + "\n"


def _comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, 88, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ")


def _flow(value: Any) -> str:
    """A YAML flow value; JSON is valid YAML, so quoting is JSON's."""
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
        return value
    return json.dumps(value)


_RESERVED: Final = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"})

_PLAIN: Final = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
