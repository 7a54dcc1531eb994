"""NVIDIA device-plugin sharing configs and the ClusterPolicy that selects them.

docs/platform-model.md ("Sharing mode"): a node label ``nvidia.com/device-plugin.config=<key>``
selects key ``<key>`` of the ConfigMap named by ClusterPolicy
``spec.devicePlugin.config.name`` (default key ``spec.devicePlugin.config.default``).
Each value is YAML ``version: v1`` with ``sharing.timeSlicing`` or ``sharing.mps``
(``renameByDefault``, ``failRequestsGreaterThanOne``, ``resources[] {name, replicas}``)
and ``flags.migStrategy``. The device plugin's own schema is the reference:
replicas below 2 do not share, time-slicing and MPS exclude each other, MPS does not
work on MIG devices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from scanner.inventory import KubeObject, Position, as_mapping, join_path
from scanner.model.facts import SharingConfigFacts
from scanner.model.index import ObjectIndex

ReadYaml = Callable[[str], tuple[list[tuple[Any, dict[str, Position]]], list[tuple[str, int, int]]]]
"""Reads every YAML document of a text: (value, field positions) each, and the problems
(message, line, column). The run gives the model its YAML reader
(``scanner.sources.yaml.document.parse_plain``: the limits and marks manifests are read
with); the model reads the configs ConfigMaps hold with it and imports no source."""

CLUSTER_POLICY = "ClusterPolicy"
RESOURCE_PREFIX = "nvidia.com/"
_MAX_RESOURCE_NAME = 63
_ADVERTISED = re.compile(r"^nvidia\.com/(?:gpu|mig-\d+g\.\d+gb(?:\.me|\.me\.all|\.gfx|-me)?)$")
"""The names the device plugin advertises and a sharing config may replicate:
``nvidia.com/gpu``, and under the mixed MIG strategy ``"mig-" + profile`` for every
MIG profile whose compute instance spans its GPU instance (``<G>g.<M>gb``), with
go-nvlib's attributes (``+me``, ``+me.all``, ``+gfx``, ``-me``) and ``+`` written ``.``:
``nvidia.com/mig-1g.10gb.me``, ``nvidia.com/mig-1g.24gb-me``. Kubernetes refuses
``+`` in a resource name, and so does the plugin's config parser."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What the cluster's ClusterPolicy says about the device plugin, if one is in scope."""

    policy: KubeObject | None
    config_name: str
    default_key: str
    mig_strategy: str
    plugin_enabled: bool = True
    """``spec.devicePlugin.enabled`` is not false: with NVIDIA's DRA driver the GPU
    Operator runs without the device plugin, and GPUs are published as
    ResourceSlices, not as allocatable ``nvidia.com/gpu``."""


def cluster_setup(index: ObjectIndex) -> Setup:
    policies = [
        obj for obj in index.kind(CLUSTER_POLICY) if obj.api_version.startswith("nvidia.com/")
    ]
    if not policies:
        return Setup(None, "", "", "")
    policy = policies[0]
    spec = as_mapping(policy.body.get("spec"))
    plugin = as_mapping(spec.get("devicePlugin"))
    config = as_mapping(plugin.get("config"))
    return Setup(
        policy,
        _text(config.get("name")),
        _text(config.get("default")),
        _text(as_mapping(spec.get("mig")).get("strategy")),
        plugin_enabled=plugin.get("enabled") is not False,
    )


OPERATOR_CONFIG_MAPS: Final = (
    "default-mig-parted-config",
    "default-gpu-clients",
    "gpu-operator-trusted-ca",
    "nvidia-container-toolkit-entrypoint",
    "nvidia-device-plugin-entrypoint",
    "nvidia-driver-startup-probe",
    "nvidia-mig-manager-entrypoint",
)
"""ConfigMaps the GPU Operator creates for its operands (its assets): MIG layouts and
clients, the trusted CA, and the entrypoint scripts its privileged containers run."""


def stack_config_maps(
    setup: Setup, configs: Sequence[KubeObject], operator_config_maps: Sequence[str] = ()
) -> frozenset[str]:
    """Names of the ConfigMaps that steer the device stack: the device-plugin configs in
    scope, every ConfigMap ClusterPolicy names (``config``, ``kernelModuleConfig``,
    ``licensingConfig``, ``repoConfig``, ``certConfig``, ... at any depth of its spec:
    a ``name`` or ``configMapName``), the operator's own, and ``operator_config_maps``
    (those in scope in the operator namespaces)."""
    names = {obj.name for obj in configs} | set(OPERATOR_CONFIG_MAPS) | set(operator_config_maps)
    if setup.config_name:
        names.add(setup.config_name)
    if setup.policy is not None:
        names.update(_named_config_maps(setup.policy.body.get("spec")))
    return frozenset(names)


def _named_config_maps(value: object, parent: str = "") -> set[str]:
    found: set[str] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            naming = key == "configMapName" or (
                key == "name" and (parent == "config" or parent.endswith("Config"))
            )
            if naming and isinstance(item, str) and item:
                found.add(item)
            found |= _named_config_maps(item, str(key))
    elif isinstance(value, list):
        for item in value:
            found |= _named_config_maps(item, parent)
    return found


def config_maps(index: ObjectIndex, setup: Setup, read: ReadYaml) -> list[KubeObject]:
    """ConfigMaps that hold device-plugin configs: the one ClusterPolicy names, and any
    ConfigMap with a value shaped as one (``_looks_like_config``: Helm installs of the
    plugin)."""
    found = []
    for obj in index.kind("ConfigMap"):
        if (setup.config_name and obj.name == setup.config_name) or _looks_like_config(obj, read):
            found.append(obj)
    return found


_PLUGIN_FLAGS: Final = frozenset(
    {
        "migStrategy",
        "failOnInitError",
        "mpsRoot",
        "nvidiaDriverRoot",
        "nvidiaDevRoot",
        "gdsEnabled",
        "mofedEnabled",
        "useNodeFeatureAPI",
        "deviceDiscoveryStrategy",
        "plugin",
        "gfd",
    }
)
"""The device plugin's config ``flags`` (its v1 ``Flags``: the command-line options)."""


def _looks_like_config(obj: KubeObject, read: ReadYaml) -> bool:
    """Whether a value of the ConfigMap is a device-plugin config, in YAML or JSON
    (the plugin reads either): ``sharing.timeSlicing``/``sharing.mps`` or one of the
    plugin's ``flags``, with or without ``version`` (the plugin takes a missing one as
    v1). A value that does not parse but spells ``version:`` and ``sharing:``/``flags:``
    counts too (PG205 reports it); any other ConfigMap with ``flags`` (a feature flag
    service's) is not one."""
    for value in as_mapping(obj.body.get("data")).values():
        if not (isinstance(value, str) and _may_be_config(value)):
            continue
        documents, problems = read(value)
        if problems and not documents:
            if _spells_config_keys(value):
                return True
            continue
        for body, _ in documents:
            if not isinstance(body, dict):
                continue
            sharing, flags = body.get("sharing"), body.get("flags")
            if isinstance(sharing, dict) and ("timeSlicing" in sharing or "mps" in sharing):
                return True
            if isinstance(flags, dict) and not _PLUGIN_FLAGS.isdisjoint(flags):
                return True
    return False


def _may_be_config(value: str) -> bool:
    """Whether ``value`` spells what ``_looks_like_config`` looks for, before it is
    parsed: an application's config that mentions ``feature_flags`` is not composed.
    Escapes are read first: ``"time\\u0053licing"`` (YAML or JSON) and a quoted key
    broken over lines with ``\\`` spell keys the text does not (found in review)."""
    if "\\" in value:
        value = _ESCAPE.sub(_unescape, value)
    if "sharing" in value and ("timeSlicing" in value or "mps" in value):
        return True
    if "flags" in value and any(flag in value for flag in _PLUGIN_FLAGS):
        return True
    return _spells_config_keys(value)


def _spells_config_keys(value: str) -> bool:
    """``version:`` with ``sharing:`` or ``flags:``: a config, even one that does not parse."""
    return "version:" in value and ("sharing:" in value or "flags:" in value)


_ESCAPE: Final = re.compile(
    r"\\(?:x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|\r?\n[ \t]*)"
)
"""The escapes that can spell a letter in YAML's double-quoted scalars and JSON
strings, and YAML's escaped line break (the next line's indentation dropped)."""


def _unescape(match: re.Match[str]) -> str:
    digits = match.group(1) or match.group(2) or match.group(3)
    if digits is None:
        return ""  # an escaped line break joins the lines
    code = int(digits, 16)
    return chr(code) if code <= 0x10FFFF else match.group(0)


def parse_entry(
    key: str, text: object, data_path: str, line: int, read: ReadYaml
) -> dict[str, Any]:
    """One ConfigMap data value as facts. ``line`` is the file line of the data key;
    a block scalar's content starts on the next line, so embedded positions are offset
    from there (``*Line`` facts are absolute file lines, 0 when unknown)."""
    entry: dict[str, Any] = {
        "key": key,
        "path": join_path(data_path, key),
        "line": line,
        "valid": False,
        "error": "",
        "version": "",
        "mode": "exclusive",
        "timeSlicing": False,
        "mps": False,
        "renameByDefault": False,
        "renameLine": 0,
        "renameSetting": "renameByDefault",
        "renamePath": "sharing.timeSlicing.renameByDefault",
        "failRequestsGreaterThanOne": False,
        "failLine": 0,
        "failPath": "sharing.timeSlicing.failRequestsGreaterThanOne",
        "sharingLine": line,
        "migStrategy": "",
        "migStrategySource": "",
        "resources": [],
    }
    if not isinstance(text, str):
        entry["error"] = "value is not a string"
        return entry
    documents, problems = read(text)
    lines = _Lines(text, line)
    if problems:
        message, problem_line, _ = problems[0]
        entry["error"] = f"does not parse: {message}"
        # Errors at the end of the value are reported past its last line.
        last = len(text.splitlines())
        entry["errorLine"] = lines.base + min(problem_line, last) if lines.multiline else line
        return entry
    if len(documents) != 1 or not isinstance(documents[0][0], Mapping):
        entry["error"] = "is not a YAML mapping"
        return entry
    body, positions = documents[0]
    _read_config(entry, body, lambda path: lines.at(positions, path))
    return entry


class _Lines:
    """File lines of the fields inside one ConfigMap value."""

    __slots__ = ("base", "line", "multiline")

    def __init__(self, text: str, line: int) -> None:
        self.line = line
        self.multiline = "\n" in text.strip()
        self.base = line if self.multiline else line - 1

    def at(self, positions: Mapping[str, Position], path: str) -> int:
        """The file line of ``path`` inside the value; 0 when the value has no such field."""
        position = positions.get(path)
        if position is None:
            return 0
        return self.base + position[0] if self.multiline else self.line


def _read_config(entry: dict[str, Any], body: Mapping[str, Any], at: Callable[[str], int]) -> None:
    """The sharing facts of a config that parsed as a mapping (``parse_entry``)."""
    line = entry["line"]
    # The plugin takes a config without a version as v1 (config.go, parseConfigFrom).
    entry["version"] = _text(body.get("version")) if "version" in body else "v1"
    flags = as_mapping(body.get("flags"))
    entry["migStrategy"] = _text(flags.get("migStrategy"))
    entry["migStrategySource"] = "config" if entry["migStrategy"] else ""
    sharing = as_mapping(body.get("sharing"))
    entry["sharingLine"] = at("sharing") or line
    time_slicing = sharing.get("timeSlicing")
    mps = sharing.get("mps")
    entry["timeSlicing"] = isinstance(time_slicing, Mapping)
    entry["mps"] = isinstance(mps, Mapping)
    chosen_key = "timeSlicing" if entry["timeSlicing"] else "mps" if entry["mps"] else ""
    chosen = as_mapping(sharing.get(chosen_key)) if chosen_key else {}
    prefix = f"sharing.{chosen_key}"
    entry["renameByDefault"] = chosen.get("renameByDefault") is True
    entry["renameLine"] = at(f"{prefix}.renameByDefault") if chosen_key else 0
    entry["failRequestsGreaterThanOne"] = chosen.get("failRequestsGreaterThanOne") is True
    entry["failLine"] = at(f"{prefix}.failRequestsGreaterThanOne") if chosen_key else 0
    resources = [
        _resource(as_mapping(resource), f"{prefix}.resources[{index}]", at, line)
        for index, resource in enumerate(_list(chosen.get("resources")))
    ]
    entry["resources"] = resources
    if chosen_key and not resources:
        # The plugin refuses it ("no resources specified") on every node selecting it.
        entry["error"] = f"has {prefix} with no resources, which the device plugin refuses"
        entry["errorLine"] = at(prefix) or line
        return
    shares = any(resource["replicas"] >= 2 for resource in resources)
    if entry["timeSlicing"] and shares:
        entry["mode"] = "time-slicing"
    elif entry["mps"] and shares:
        entry["mode"] = "mps"
    entry["valid"] = True


def _resource(
    resource: Mapping[str, Any], subpath: str, at: Callable[[str], int], line: int
) -> dict[str, Any]:
    """One shared resource of a config: its name, replicas and lines."""
    name = _text(resource.get("name"))
    replicas = resource.get("replicas")
    return {
        "name": name,
        "known": known_resource(name),
        "advertisedAs": _plus_spelling(name),
        "replicas": replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0,
        "subpath": subpath,
        "line": at(subpath) or line,
        "replicasLine": at(f"{subpath}.replicas") or at(subpath) or line,
    }


def config_facts(obj: KubeObject, setup: Setup, read: ReadYaml) -> SharingConfigFacts:
    """The ``sharingConfig`` subject: one device-plugin ConfigMap, its entries, and
    ``resources``: every sharing resource of every valid entry, with its entry's key."""
    data = as_mapping(obj.body.get("data"))
    referenced = bool(setup.config_name) and obj.name == setup.config_name
    entries = []
    for key in sorted(data):
        path = join_path("data", key)
        entry = parse_entry(key, data[key], "data", obj.position(path)[0], read)
        if referenced and setup.plugin_enabled and setup.mig_strategy and entry["valid"]:
            # The operator runs the plugin with MIG_STRATEGY from ClusterPolicy, which
            # the plugin takes over flags.migStrategy (flag, environment, file).
            entry["migStrategy"] = setup.mig_strategy
            entry["migStrategySource"] = "ClusterPolicy"
        entries.append(entry)
    return {
        "name": obj.name,
        "namespace": obj.namespace,
        "resources": [
            # The path names the field inside the embedded document, for the
            # fingerprint; the finding's position comes from ``line``.
            {**resource, "key": entry["key"], "path": f"{entry['path']}:{resource['subpath']}"}
            for entry in entries
            if entry["valid"]
            for resource in entry["resources"]
        ],
        "referenced": referenced,
        "defaultKey": setup.default_key if obj.name == setup.config_name else "",
        "entries": entries,
        "keys": sorted(data),
    }


def entries_by_key(
    configs: Sequence[Mapping[str, Any]], setup: Setup
) -> dict[str, Mapping[str, Any]]:
    """The entries node labels select: those of the ConfigMap ClusterPolicy names.

    Without a ClusterPolicy in scope that names one, a single device-plugin ConfigMap is
    taken as the one in use (Helm installs of the plugin); with several, none is assumed.
    A ClusterPolicy that names a ConfigMap the scan does not hold selects no entries:
    another ConfigMap in scope is not the one its nodes read.
    """
    return {
        entry["key"]: entry for config in _in_use(configs, setup) for entry in config["entries"]
    }


def with_fallback(setup: Setup, configs: Sequence[Mapping[str, Any]]) -> Setup:
    """``setup`` with the key a node without the ``nvidia.com/device-plugin.config``
    label uses. ClusterPolicy names it (``devicePlugin.config.default``). The plugin's
    Helm chart, without ``config.default``, runs its config manager with the fallback
    strategies ``named`` then ``single``: the key ``default``, else the only key. The
    GPU Operator's plugin has no fallback, so with a ClusterPolicy that runs it (its
    device plugin enabled) nothing changes."""
    if (setup.policy is not None and setup.plugin_enabled) or setup.default_key:
        return setup
    keys = sorted(
        {entry["key"] for config in _in_use(configs, setup) for entry in config["entries"]}
    )
    key = "default" if "default" in keys else keys[0] if len(keys) == 1 else ""
    return replace(setup, default_key=key) if key else setup


def _in_use(configs: Sequence[Mapping[str, Any]], setup: Setup) -> Sequence[Mapping[str, Any]]:
    referenced = [c for c in configs if c["referenced"]]
    if referenced or setup.config_name:
        return referenced
    return configs if len(configs) == 1 else []


def known_resource(name: str) -> bool:
    """Whether the device plugin accepts ``name`` as a sharing resource and advertises
    it. Its parser (``NewResourceName``) puts ``nvidia.com/`` before a bare name and
    takes at most 63 characters in all."""
    qualified = name if name.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + name
    return len(qualified) <= _MAX_RESOURCE_NAME and bool(_ADVERTISED.match(qualified))


def _plus_spelling(name: str) -> str:
    """The advertised name of a MIG profile written with mig-parted's ``+``
    (``nvidia.com/mig-1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``); "" otherwise."""
    dotted = name.replace("+", ".")
    return dotted if "+" in name and known_resource(dotted) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def cluster_facts(
    setup: Setup,
    configs: Sequence[tuple[KubeObject, Mapping[str, Any]]],
    nodes: Sequence[tuple[KubeObject, Mapping[str, Any]]],
    entries: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """``cluster.devicePlugin``: what ClusterPolicy names, whether it exists in scope, and
    ``dangling``: object ref -> [{message, path}] for references to configs that are not
    there (PG206).

    Absence of evidence: a ConfigMap ClusterPolicy names counts as missing only when
    other device-plugin ConfigMaps are in scope; a key counts as missing only when the
    ConfigMap that should hold it is in scope.
    """
    named = [facts for obj, facts in configs if setup.config_name and obj.name == setup.config_name]
    dangling: dict[str, list[dict[str, str]]] = {}
    if setup.policy is not None:
        policy_ref = setup.policy.ref.logical_name
        config_path = "spec.devicePlugin.config"
        if setup.config_name and not named and configs:
            dangling.setdefault(policy_ref, []).append(
                {
                    "message": f"ClusterPolicy names device-plugin ConfigMap {setup.config_name}, "
                    f"but the device-plugin ConfigMaps in scope are "
                    f"{', '.join(sorted(obj.name for obj, _ in configs))}",
                    "path": f"{config_path}.name",
                }
            )
        if named and setup.default_key and setup.default_key not in named[0]["keys"]:
            dangling.setdefault(policy_ref, []).append(
                {
                    "message": f"ClusterPolicy default device-plugin config key "
                    f"{setup.default_key} is not in ConfigMap {setup.config_name}",
                    "path": f"{config_path}.default",
                }
            )
    if entries:
        for obj, facts in nodes:
            key = facts.get("devicePluginConfig", "")
            if key and key not in entries:
                dangling.setdefault(obj.ref.logical_name, []).append(
                    {
                        "message": f"{obj.kind} {obj.name} selects device-plugin config {key}, "
                        f"which the config map does not have (keys: {', '.join(sorted(entries))})",
                        "path": str(facts["devicePluginConfigPath"]),
                    }
                )
    return {
        "policyKnown": setup.policy is not None,
        "configName": setup.config_name,
        "configFound": bool(named),
        "defaultKey": setup.default_key,
        "keys": list(named[0]["keys"]) if named else [],
        "migStrategy": setup.mig_strategy,
        "dangling": dangling,
    }
