"""The commented ``.poolgate.yaml`` that ``poolgate config init`` writes, and where.

It holds exactly the built-in defaults: values come from ``Config()`` and comments
from the schema's descriptions and ``x-rules`` (the rules a key changes), so neither
can drift from what poolgate does without a file.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Final

from scanner.config.file import API_VERSION, CONFIG_FILE_NAME, KIND
from scanner.config.validation import schema
from scanner.config.values import Config
from scanner.errors import UsageError


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
        "weightBucketPublicAccess": require.weight_bucket_public_access,
        "cmek": require.cmek,
    }
    spec_values: dict[str, Any] = {
        "operatorNamespaces": list(config.operator_namespaces),
        "systemNamespaces": list(config.system_namespaces),
        "trustDomainLabel": config.trust_domain_label,
        "skuLabel": config.sku_label,
        "skuLabels": list(config.sku_labels),
        "poolLabels": list(config.pool_labels),
        "extendedResourceToleration": config.extended_resource_toleration,
        "admissionPreview": config.admission_preview,
        "workloadIdentityKeys": list(config.workload_identity_keys),
        "workloadIdentityAccounts": list(config.workload_identity_accounts),
        "admins": [],
        "ruleDirs": list(config.rule_dirs),
    }
    out = [
        "# poolgate configuration. Every key is optional: one left out keeps the default",
        "# written here; the rules each key changes are named after it. For editors:",
        "# `poolgate config schema` prints the JSON schema this file is checked with.",
        f"apiVersion: {API_VERSION}",
        f"kind: {KIND}",
        "metadata:",
        "  name: default",
        "spec:",
        "  require:",
    ]
    for key, value in require_values.items():
        out.extend(_comment(_described(require_schema[key]), "    "))
        out.append(f"    {key}: {_flow(value)}")
    for key, value in spec_values.items():
        out.extend(_comment(_described(spec_schema[key]), "  "))
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


def _described(entry: dict[str, Any]) -> str:
    """A key's description, and the rules it changes (the schema's ``x-rules``)."""
    rules = entry.get("x-rules", [])
    description: str = entry["description"]
    return description + (f" Rules: {', '.join(rules)}." if rules else "")


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
