"""Bottlerocket's NVIDIA device-plugin settings in a Karpenter ``EC2NodeClass``.

Bottlerocket nodes run NVIDIA's device plugin themselves, configured by TOML settings
in the node's user data, which an ``EC2NodeClass`` holds in ``spec.userData``::

    [settings.kubelet-device-plugins.nvidia]
    device-sharing-strategy = "time-slicing"        # "none" (default), "time-slicing", "mps"

    [settings.kubelet-device-plugins.nvidia.time-slicing]
    replicas = 4                                     # default 1
    rename-by-default = false                        # default false
    fail-requests-greater-than-one = true            # default false

With ``time-slicing`` and at least two replicas the NodePools using the class share
their GPUs as the device plugin's own ``sharing.timeSlicing`` would: every GPU is
advertised ``replicas`` times, as ``nvidia.com/gpu`` (``nvidia.com/gpu.shared`` when
renamed). ``mps`` shares them through MPS (its replicas are not read here).

The user data is the pull request's text: it is parsed only when it names the
device-plugin settings, only up to ``MAX_USER_DATA`` characters, with Python's TOML
parser (no code runs); text that does not parse as TOML (a shell script, MIME parts of
another AMI family) holds no Bottlerocket settings.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from scanner.inventory import KubeObject, as_mapping
from scanner.model.facts import SharingConfigFacts
from scanner.model.index import ObjectIndex

MAX_USER_DATA: Final = 64 * 1024
"""Characters of user data parsed: EC2 takes 16 KiB of user data."""

TABLE: Final = "settings.kubelet-device-plugins.nvidia"
"""The settings table, as the key of the sharing config it makes."""

_HEADER: Final = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\"-]+?)\s*\]\s*(?:#.*)?$")
_KEY: Final = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")


@dataclass(frozen=True, slots=True)
class Sharing:
    """How a node class's device plugin shares GPUs, and where it says so."""

    mode: str
    """``time-slicing`` or ``mps``."""
    replicas: int
    rename: bool
    fail_requests: bool
    line: int
    """File line of the settings table (the ``userData`` line when unknown)."""
    rename_line: int
    fail_line: int
    replicas_line: int


def sharing(node_class: KubeObject) -> Sharing | None:
    """The GPU sharing a node class's Bottlerocket settings configure; None when they
    share nothing (or there are none)."""
    user_data = as_mapping(node_class.body.get("spec")).get("userData")
    if (
        not isinstance(user_data, str)
        or len(user_data) > MAX_USER_DATA
        or "kubelet-device-plugins" not in user_data
    ):
        return None
    nvidia = _settings(user_data)
    strategy = nvidia.get("device-sharing-strategy")
    if strategy not in ("time-slicing", "mps"):
        return None
    time_slicing = _table(nvidia, ("time-slicing",))
    replicas = time_slicing.get("replicas", 1)
    replicas = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0
    if strategy == "time-slicing" and replicas < 2:
        return None  # one replica per GPU: each GPU is advertised once, unshared
    lines = _lines(node_class, user_data)
    base = lines.get((TABLE, ""), 0) or lines.get(("", ""), 0)
    sliced = f"{TABLE}.time-slicing"
    return Sharing(
        mode=str(strategy),
        replicas=replicas if strategy == "time-slicing" else 0,
        rename=time_slicing.get("rename-by-default") is True,
        fail_requests=time_slicing.get("fail-requests-greater-than-one") is True,
        line=base,
        rename_line=lines.get((sliced, "rename-by-default"), 0),
        fail_line=lines.get((sliced, "fail-requests-greater-than-one"), 0),
        replicas_line=lines.get((sliced, "replicas"), 0) or lines.get((sliced, ""), 0) or base,
    )


@lru_cache(maxsize=64)
def _settings(user_data: str) -> dict[str, Any]:
    """The device-plugin settings table of the user data ({} when it is not TOML). Cached:
    every NodePool naming a node class reads them, and the model once more."""
    try:
        settings = tomllib.loads(user_data)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        return {}
    return _table(settings, ("settings", "kubelet-device-plugins", "nvidia"))


def _table(value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def _lines(node_class: KubeObject, user_data: str) -> dict[tuple[str, str], int]:
    """File lines of the tables (key ``""``) and keys of a block-scalar ``userData``:
    (table, key) -> line; ``("", "")`` is the ``userData`` line itself. Tables and keys
    spelt otherwise (dotted keys, quoted names) are not found and fall back to it."""
    line = node_class.position("spec.userData")[0]
    found: dict[tuple[str, str], int] = {("", ""): line}
    if "\n" not in user_data.strip():
        return found  # one line, or a quoted string: its parts have no lines of their own
    table = ""
    for number, text in enumerate(user_data.splitlines(), start=line + 1):
        header = _HEADER.match(text)
        if header:
            table = header.group(1).replace('"', "")
            found.setdefault((table, ""), number)
            continue
        key = _KEY.match(text)
        if key:
            found.setdefault((table, key.group(1)), number)
    return found


def sharing_configs(index: ObjectIndex) -> list[tuple[KubeObject, SharingConfigFacts]]:
    """The ``sharingConfig`` subjects of the node classes whose settings share GPUs."""
    found = []
    for node_class in index.kind("EC2NodeClass"):
        if not node_class.api_version.startswith("karpenter.k8s.aws/"):
            continue
        shared = sharing(node_class)
        if shared is not None:
            found.append((node_class, config_facts(node_class, shared)))
    return found


def config_facts(node_class: KubeObject, found: Sharing) -> SharingConfigFacts:
    """The ``sharingConfig`` subject of a node class's settings: one entry, read like a
    device-plugin ConfigMap's (PG203, PG204), its settings named as Bottlerocket names
    them."""
    path = "spec.userData"
    time_slicing = found.mode == "time-slicing"
    resource: dict[str, Any] = {
        "name": "nvidia.com/gpu",
        "known": True,
        "advertisedAs": "",
        "replicas": found.replicas,
        "subpath": f"{TABLE}.time-slicing",
        "line": found.replicas_line,
        "replicasLine": found.replicas_line,
    }
    resources = [resource] if time_slicing else []
    entry: dict[str, Any] = {
        "key": TABLE,
        "path": path,
        "line": found.line,
        "valid": True,
        "error": "",
        "version": "v1",
        "mode": found.mode,
        "timeSlicing": time_slicing,
        "mps": not time_slicing,
        "renameByDefault": found.rename,
        "renameLine": found.rename_line,
        "renameSetting": "rename-by-default",
        "renamePath": f"{TABLE}.time-slicing.rename-by-default",
        "failRequestsGreaterThanOne": found.fail_requests,
        "failLine": found.fail_line,
        "failPath": f"{TABLE}.time-slicing.fail-requests-greater-than-one",
        "sharingLine": found.line,
        "migStrategy": "",
        "migStrategySource": "",
        "resources": resources,
    }
    return {
        "name": node_class.name,
        "namespace": "",
        "referenced": False,
        "defaultKey": "",
        "keys": [],
        "entries": [entry],
        "resources": [
            {**shared, "key": TABLE, "path": f"{path}:{shared['subpath']}"} for shared in resources
        ],
    }
