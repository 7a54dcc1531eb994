"""``poolgate config init/validate`` and ``scan --config`` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import mounts
import pytest
from cli_run import poolgate

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = ROOT / "fixtures" / "config" / "overrides"
HEADER = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\n"


def json_findings(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert "Traceback" not in result.stderr, result.stderr
    findings: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return findings


def test_init_writes_a_file_that_validates_and_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    written = poolgate("config", "init", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    config = tmp_path / ".poolgate.yaml"
    assert config.is_file() and config.read_text().startswith("# poolgate configuration")

    validated = poolgate("config", "validate", cwd=tmp_path)  # discovered
    assert (validated.returncode, validated.stdout, validated.stderr) == (
        0,
        "ok: .poolgate.yaml\n",
        "",
    )

    config.write_text(HEADER)
    again = poolgate("config", "init", str(tmp_path))
    assert again.returncode == 2
    assert "already exists (pass --force to overwrite it)" in again.stderr
    assert config.read_text() == HEADER
    forced = poolgate("config", "init", str(tmp_path), "--force")
    assert forced.returncode == 0 and config.read_text().startswith("# poolgate configuration")

    other = poolgate("config", "init", str(tmp_path / "strict.yaml"))
    assert other.returncode == 0 and (tmp_path / "strict.yaml").is_file()


def test_validate_reports_problems_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEADER + "spec:\n  require:\n    podSecurity: strict\n")
    result = poolgate("config", "validate", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"{bad}:5: spec.require.podSecurity: expected one of" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_checks_rule_ids_and_refuses_unknown_keys_and_warns_of_stale_exemptions(
    tmp_path: Path,
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(HEADER + "spec:\n  colour: blue\n  rules:\n    PG501: {level: note}\n")
    result = poolgate("config", "validate", str(config))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"poolgate: error: {config}:4: unknown key spec.colour\n"
    config.write_text(HEADER + "spec:\n  rules:\n    PG501: {level: note}\n")
    assert poolgate("config", "validate", str(config)).stdout == f"ok: {config}\n"

    config.write_text(HEADER + "spec:\n  rules:\n    PG9999: {level: note}\n")
    unknown = poolgate("config", "validate", str(config))
    assert unknown.returncode == 2
    assert f"{config}:5: spec.rules.PG9999: unknown rule id PG9999" in unknown.stderr

    stale = poolgate("config", "validate", str(OVERRIDES / ".poolgate.yaml"))
    assert stale.returncode == 0, stale.stderr
    assert "exemption for PG301 expired on 2001-01-31" in stale.stderr
    assert "exemption for PG104 has no reason" in stale.stderr


def test_validate_without_a_file_to_find_is_an_error(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    result = poolgate("config", "validate", cwd=tmp_path)
    assert result.returncode == 2
    assert "no .poolgate.yaml here or above" in result.stderr


def test_overrides_levels_enablement_params_and_exemptions_take_effect() -> None:
    """fixtures/config/overrides/.poolgate.yaml is discovered from the scanned path."""
    result = poolgate("scan", "fixtures/config/overrides/k8s", "--format", "json")
    findings = json_findings(result)
    by_rule = {f["ruleId"]: f for f in findings}
    # params: the rule's default minReplicas 1 is raised to 3 by the config
    assert by_rule["ACME001"]["message"] == "replicas 2 < 3"
    assert by_rule["ACME001"]["location"]["line"] == 7
    # level: PG501 lowered to note; enablement: PG401 turned off
    assert by_rule["PG501"]["level"] == "note"
    assert "PG401" not in by_rule
    # a valid exemption with globs suppresses; expired and reason-less ones do not
    assert by_rule["PG302"]["suppression"] == {
        "kind": "external",
        "justification": "NCCL needs hostIPC for shared memory; tracked in PLAT-7.",
    }
    assert by_rule["PG301"]["suppression"] is None
    assert by_rule["PG104"]["suppression"] is None
    notes = json.loads(result.stdout)["notifications"]
    config_uri = "fixtures/config/overrides/.poolgate.yaml"
    assert [(n["level"], n["uri"], n["line"], n["ruleId"], n["message"]) for n in notes] == [
        (
            "warning",
            config_uri,
            18,
            "PG004",
            "exemption for PG301 expired on 2001-01-31; it no longer suppresses",
        ),
        (
            "warning",
            config_uri,
            22,
            "PG004",
            "exemption for PG104 has no reason, so it does not suppress",
        ),
    ]
    assert result.returncode == 1  # PG301 and PG104 still fail the run


def test_explicit_config_replaces_discovery_and_defaults_hold_without_one(tmp_path: Path) -> None:
    config = tmp_path / "lenient.yaml"
    config.write_text(HEADER + "spec:\n  rules:\n    PG301: {enabled: false}\n")
    with_config = json_findings(
        poolgate(
            "scan", "fixtures/config/overrides/k8s", "--config", str(config), "--format", "json"
        )
    )
    rules = {f["ruleId"] for f in with_config}
    assert "PG301" not in rules and "PG401" in rules and "ACME001" not in rules

    (tmp_path / ".git").mkdir()
    (tmp_path / "k8s").mkdir()
    manifest = (OVERRIDES / "k8s" / "workloads.yaml").read_text()
    (tmp_path / "k8s" / "w.yaml").write_text(manifest)
    defaults = json_findings(poolgate("scan", "k8s", "--format", "json", cwd=tmp_path))
    assert {"PG301", "PG302", "PG401", "PG501"} <= {f["ruleId"] for f in defaults}


def test_scan_with_a_broken_config_fails_before_scanning(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".poolgate.yaml").write_text(HEADER + "spec:\n  skuLabel: [gpu]\n  extra: 1\n")
    (tmp_path / "w.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    result = poolgate("scan", "w.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "poolgate: error: .poolgate.yaml:4: spec.skuLabel: expected a string" in result.stderr

    (tmp_path / ".poolgate.yaml").write_text(HEADER + "spec:\n  skuLabel: gpu\n  extra: 1\n")
    incomplete = poolgate("scan", "w.yaml", cwd=tmp_path)
    assert (incomplete.returncode, incomplete.stderr) == (3, "")
    assert (
        "poolgate: error: .poolgate.yaml:5: unknown key spec.extra (the run went on without it)\n"
        in incomplete.stdout
    )


def test_init_into_a_directory_named_with_a_slash_that_does_not_exist(tmp_path: Path) -> None:
    """``newdir/`` names a directory: it is not taken for a file called ``newdir``."""
    result = poolgate("config", "init", "newdir/", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "poolgate: error: newdir/: no such directory\n"
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "newdir").mkdir()
    assert poolgate("config", "init", "newdir/", cwd=tmp_path).returncode == 0
    assert (tmp_path / "newdir" / ".poolgate.yaml").is_file()


def test_init_into_a_read_only_directory_is_one_error_line(tmp_path: Path) -> None:
    if reason := mounts.unavailable():
        pytest.skip(reason)
    locked = tmp_path / "ro"
    locked.mkdir()
    result = poolgate("config", "init", "ro", cwd=tmp_path, preexec=mounts.read_only(locked))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "poolgate: error: cannot write ro/.poolgate.yaml: read-only file system\n"
    )
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize(
    "spec",
    [
        '  "foo\\n::error file=x.yaml,line=1::INJECTED": 1\n',  # unknown key: a warning
        '  skuLabel: "a\\n::stop-commands::x"\n  "b\\n::error::INJECTED": [1]\n',  # errors
        '  require: {podSecurity: "x\\r\\n::error::INJECTED"}\n',  # one error
    ],
)
def test_keys_and_values_cannot_start_a_line_of_poolgates_output(tmp_path: Path, spec: str) -> None:
    """The config comes from the pull request, and a GitHub runner reads a line of
    stdout or stderr that starts with ``::`` as a workflow command (found in review:
    a key holding a line break forged an annotation). Line breaks in keys and values
    are shown escaped."""
    config = tmp_path / "c.yaml"
    config.write_text(HEADER + "spec:\n" + spec)
    result = poolgate("config", "validate", str(config))
    assert "Traceback" not in result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert lines and not [line for line in lines if line.lstrip().startswith("::")]
    assert "\\n::" in result.stderr


# --- a misspelt key, every problem at once, the schema (issue 25) ----------------

MISSPELT = HEADER + "spec:\n  skuLable: gpu-sku\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  containers: []\n"


def test_validate_refuses_a_misspelt_key_and_names_the_one_meant(tmp_path: Path) -> None:
    (tmp_path / ".poolgate.yaml").write_text(MISSPELT)
    result = poolgate("config", "validate", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "poolgate: error: .poolgate.yaml:4: unknown key spec.skuLable; did you mean skuLabel?\n"
    )


def test_scan_and_audit_with_a_misspelt_key_are_incomplete(tmp_path: Path) -> None:
    """The run goes on without the key, but it did not use the config that was meant:
    an error notification with the same hint, and exit code 3."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".poolgate.yaml").write_text(MISSPELT)
    (tmp_path / "pod.yaml").write_text(POD)
    scanned = poolgate("scan", "pod.yaml", "--format", "json", cwd=tmp_path)
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    audited = poolgate("audit", "--snapshot", str(dump), "--format", "json", cwd=tmp_path)
    for result in (scanned, audited):
        assert result.returncode == 3, result.stderr
        errors = [n for n in json.loads(result.stdout)["notifications"] if n["level"] == "error"]
        [note] = errors
        assert note["level"] == "error" and (note["uri"], note["line"]) == (".poolgate.yaml", 4)
        assert note["message"] == (
            "unknown key spec.skuLable (the run went on without it); did you mean skuLabel?"
        )
    text = poolgate("scan", "pod.yaml", cwd=tmp_path)
    assert text.returncode == 3
    assert (
        "poolgate: error: .poolgate.yaml:4: unknown key spec.skuLable (the run went on without "
        "it); did you mean skuLabel?" in text.stdout
    )


def test_every_problem_of_a_config_comes_in_one_pass(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        HEADER
        + "spec:\n"
        + "  require: {podSecurity: strict, runtimeClas: nvidia}\n"  # 4
        + "  trustDomainLabl: team\n"  # 5
        + "  ruleDirs: [missing]\n"  # 6
        + "  rules:\n    PG9999: {level: note}\n"  # 8
        + "  exemptions:\n    - {rule: PG301, reason: r, expires: 2027-02-30}\n"  # 10
    )
    result = poolgate("config", "validate", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("poolgate: error: 6 config problems:\n")
    listed = [line.strip() for line in result.stderr.splitlines()[1:]]
    assert [line.split(":")[1] for line in listed] == ["4", "4", "5", "6", "8", "10"]
    assert "c.yaml:4: unknown key spec.require.runtimeClas; did you mean runtimeClass?" in listed[1]
    assert "c.yaml:5: unknown key spec.trustDomainLabl; did you mean trustDomainLabel?" in listed[2]
    assert "spec.ruleDirs[0]: missing: no such directory" in listed[3]
    assert "spec.rules.PG9999: unknown rule id PG9999" in listed[4]
    assert "2027-02-30 is not a calendar date" in listed[5]


def test_config_schema_is_the_one_validation_uses_and_init_matches_it(tmp_path: Path) -> None:
    import jsonschema
    import yaml

    from scanner.config import validation

    printed = poolgate("config", "schema")
    assert printed.returncode == 0 and printed.stderr == ""
    schema = json.loads(printed.stdout)
    assert schema == validation.schema()
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert poolgate("config", "init", str(tmp_path)).returncode == 0
    jsonschema.validate(yaml.safe_load((tmp_path / ".poolgate.yaml").read_text()), schema)


def test_init_names_the_rules_behind_every_key(tmp_path: Path) -> None:
    assert poolgate("config", "init", str(tmp_path)).returncode == 0
    text = (tmp_path / ".poolgate.yaml").read_text()
    comments: list[str] = []
    named: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped)
            continue
        key = stripped.split(":")[0]
        named[key] = " ".join(comments)
        comments = []
    assert "Rules: PG103, PG605." in named["runtimeClass"]
    assert "Rules: PG102, PG104, PG605." in named["skuLabel"]
    assert "Rules: PG201." in named["trustDomainLabel"]
    for key in ("imageDigestPin", "podSecurity", "operatorNamespaces", "admins", "poolLabels"):
        assert "Rules: PG" in named[key], key


def test_the_rules_named_for_a_key_include_every_rule_reading_it() -> None:
    """``x-rules`` in the schema is written by hand; a rule whose CEL reads
    ``config.<key>`` must be listed under that key, and every id listed must exist."""
    import re

    import yaml

    from scanner.config import validation

    spec = validation.schema()["properties"]["spec"]["properties"]
    listed = {key: set(entry.get("x-rules", ())) for key, entry in spec.items()}
    listed.update(
        {
            f"require.{key}": set(entry.get("x-rules", ()))
            for key, entry in spec["require"]["properties"].items()
        }
    )
    bundled = ROOT / "rules"
    ids = {path.name.split("-")[0] for path in bundled.glob("PG*.yaml")}
    assert set().union(*listed.values()) <= ids
    for path in bundled.glob("PG*.yaml"):
        rule = yaml.safe_load(path.read_text())
        read = set(re.findall(r"\bconfig\.((?:require\.)?[A-Za-z]+)", json.dumps(rule)))
        for key in read & set(listed):
            assert rule["id"] in listed[key], (rule["id"], key)
