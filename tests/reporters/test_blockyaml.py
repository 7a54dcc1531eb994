"""scanner/reporters/blockyaml.py: every string reads back as itself, in Python and in Go."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path

import policyreport_crd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.findings.records import Finding, Level, Location
from scanner.findings.report import Report
from scanner.inventory import ObjectRef
from scanner.reporters import blockyaml
from scanner.reporters import policyreport as pr

from .conftest import RULES

TRICKY = [
    "yes", "No", "ON", "y", "null", "~", "", " ", "1.0", "0x1f", "1e3", "0.1.0", ".inf",
    "2025-06-01", "- x", "? x", ": x", "a: b", "a #b", "#c", "&a", "*a", "!tag", "%x",
    "@x", "`x", "|", ">", "<<", "=", "[x]", "{x}", "'q'", '"q"', "\\", " lead", "trail ",
    "x\n---\napiVersion: v1\nkind: Secret", "tab\tx", "cr\rx", "nel\x85x", "ls\u2028x",
    "bom\ufeffx", "rlo\u202ex", "zw\u200bx", "nul\x00x", "del\x7fx", "é漢😀",
    "k8s/train.yaml:12", "/abs/path", "plain-name_1.2",
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY)
def test_a_string_reads_back_as_itself(text: str) -> None:
    data = {"k": text, "list": [text, {"m": text}]}
    assert yaml.safe_load(blockyaml.document(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_any_text_reads_back_as_itself(key: str, text: str) -> None:
    data = {"k": text, key: [text, {"m": text, "n": 7, "b": False}], "e": {}, "l": []}
    assert yaml.safe_load(blockyaml.document(data)) == data


def test_only_quoted_strings_hold_anything_but_plain_names() -> None:
    assert (
        blockyaml.scalar("PG301-privileged-outside-operator") == "PG301-privileged-outside-operator"
    )
    assert blockyaml.scalar("apps/v1") == "apps/v1"
    assert blockyaml.scalar("x\n---") == '"x\\n---"'
    assert blockyaml.scalar("rlo\u202ex") == '"rlo\\u202ex"'  # visible in the file


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML without YAML 1.1's ``<<`` and ``=`` keys: kustomize writes YAML 1.2, where
    a plain ``<<`` is a string."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith((":merge", ":value"))]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

KUSTOMIZE = shutil.which("kustomize") or shutil.which("kubectl")


@pytest.mark.skipif(KUSTOMIZE is None, reason="neither kustomize nor kubectl is installed")
def test_go_yaml_reads_the_reports_as_python_does(tmp_path: Path) -> None:
    """kustomize parses its resources with Go's YAML library, as kubectl does."""
    findings = [
        Finding(
            rule_id="PG301",
            level=Level.ERROR,
            message=text,
            location=Location(f"k8s/{index}.yaml", index + 1, 1, "spec"),
            ref=ObjectRef("v1", "Pod", "ml", f"pod-{index}"),
        )
        for index, text in enumerate(TRICKY)
        # kustomize writes what it read as YAML again, and its writer refuses control
        # characters (Go reads them; kubectl apply converts the YAML to JSON instead).
        if not any(char in text for char in "\x00\x7f\x85")
    ]
    report = Report(findings, (), RULES, "0.1.0", "/repo")
    objects = pr.build(report, pr.Found(datetime.datetime(2025, 6, 1, tzinfo=datetime.UTC)))
    policyreport_crd.validate_all(objects)
    stream = tmp_path / "reports.yaml"
    with stream.open("w", encoding="utf-8") as handle:
        pr.write(report, handle, found=pr.Found(datetime.datetime(2025, 6, 1, tzinfo=datetime.UTC)))
    (tmp_path / "kustomization.yaml").write_text("resources: [reports.yaml]\n")
    command = (
        [KUSTOMIZE, "kustomize", str(tmp_path)]
        if KUSTOMIZE.endswith("kubectl")
        else [KUSTOMIZE, "build", str(tmp_path)]
    )
    built = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    read = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in yaml.load_all(built.stdout, Loader=Yaml12Loader)
    }
    assert read == {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }
