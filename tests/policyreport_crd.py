"""Validate PolicyReports against the upstream CRDs, as the API server would.

The ``v1alpha2`` ``openAPIV3Schema`` of the CRDs vendored in
``tests/data/policyreport-crd/`` (source and license in its README), checked with
``jsonschema``. Two things the API server does beyond JSON Schema are done here too:

* an unknown field is not an error there but silently dropped (a structural
  schema's pruning), so a misspelt field would vanish without a word: here every
  object whose schema lists its ``properties`` refuses any other;
* ``format: int32`` / ``int64`` bound integers (``timestamp.nanos``, ``seconds``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = Path(__file__).resolve().parent / "data" / "policyreport-crd"
FILES = {
    "PolicyReport": "wgpolicyk8s.io_policyreports.yaml",
    "ClusterPolicyReport": "wgpolicyk8s.io_clusterpolicyreports.yaml",
}
VERSION = "v1alpha2"


@functools.cache
def crd(kind: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((CRD_DIR / FILES[kind]).read_text())
    return document


@functools.cache
def schema(kind: str) -> dict[str, Any]:
    """The CRD's ``v1alpha2`` schema, strict about unknown fields."""
    [version] = [v for v in crd(kind)["spec"]["versions"] if v["name"] == VERSION]
    assert version["served"] is True
    return _strict(version["schema"]["openAPIV3Schema"])


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: _strict(value) for key, value in node.items()}
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    return strict


_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def validate(obj: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``obj`` is a valid report of its kind
    at ``wgpolicyk8s.io/v1alpha2``."""
    assert obj["apiVersion"] == f"wgpolicyk8s.io/{VERSION}", obj["apiVersion"]
    validator = jsonschema.Draft7Validator(schema(obj["kind"]), format_checker=_FORMATS)
    validator.validate(obj)


def validate_all(objects: Iterable[dict[str, Any]]) -> None:
    for obj in objects:
        validate(obj)


def load_stream(text: str) -> list[dict[str, Any]]:
    """The documents of a ``--format policyreport`` stream, each validated."""
    objects = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    validate_all(objects)
    return objects
