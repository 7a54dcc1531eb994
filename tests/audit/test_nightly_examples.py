"""The example workflows' nightly audits, run step by step against the test API server.

No cloud and no GitHub runner are available here. The steps that sign in are the
clouds' own actions (``uses:``; tests/integrations/test_action.py checks them
statically), and the install is the Action's (tested there too). Every other step of
the audit job runs here as the runner runs it, in order — ``bash -e``, the job's and
the step's ``env:``, ``GITHUB_ENV`` carried to later steps — with the tools the steps
call faked as the real ones behave:

* ``aws eks update-kubeconfig`` writes a kubeconfig whose user is the exec plugin
  ``aws eks get-token`` (as the AWS CLI writes it), and ``aws eks get-token`` answers
  with an ``ExecCredential``;
* ``gcloud container clusters get-credentials`` writes one whose user is the exec
  plugin ``gke-gcloud-auth-plugin`` (``provideClusterInfo``, as gcloud writes it), and
  the plugin answers with an ``ExecCredential``;

each for the test API server, whose token they hand out only when the environment
holds what the sign-in action exports. poolgate is this checkout, where the install
step puts it (``$RUNNER_TEMP/poolgate/bin/poolgate``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .apiserver import ApiServer, Pki, write_kubeconfig
from .conftest import CONTEXT, ROOT, TOKEN

EXAMPLES = ROOT / "examples"

EXEC_CREDENTIAL = f"""
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {{"token": {TOKEN!r}, "expirationTimestamp": "2999-01-01T00:00:00Z"}},
}}))
"""


def _tool(directory: Path, name: str, body: str) -> None:
    """An executable ``directory/name`` running the Python ``body`` (sys, os, json,
    yaml imported; ``LOG`` appends a line to the calls log)."""
    path = directory / name
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys\nimport yaml\n"
        f"LOG = open({str(directory / 'calls.log')!r}, 'a')\n"
        f"LOG.write(json.dumps([{name!r}, *sys.argv[1:]]) + '\\n')\n{body}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _kubeconfig(server: str, ca: Path, name: str, exec_user: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": name, "user": {"exec": exec_user}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
        }
    )


def _fake_aws(directory: Path, lab: ApiServer, pki: Pki) -> None:
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": ["--region", "REGION", "eks", "get-token", "--cluster-name", "NAME"],
    }
    _tool(
        directory,
        "aws",
        f"""
args = sys.argv[1:]
if args[:2] == ["eks", "update-kubeconfig"]:
    options = dict(zip(args[2::2], args[3::2]))
    name, region = options["--name"], options["--region"]
    text = {_kubeconfig(lab.url, pki.ca, "ARN", exec_user)!r}
    text = text.replace("REGION", region).replace("NAME", name)
    text = text.replace("ARN", f"arn:aws:eks:{{region}}:123456789012:cluster/{{name}}")
    with open(options["--kubeconfig"], "w") as out:
        out.write(text)
elif args[2:4] == ["eks", "get-token"] and os.environ.get("AWS_SESSION_TOKEN"):
    {EXEC_CREDENTIAL.strip()}
else:
    sys.exit("aws: unexpected call or no credentials: " + " ".join(args))
""",
    )


def _fake_gcloud(directory: Path, lab: ApiServer, pki: Pki) -> None:
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "gke-gcloud-auth-plugin",
        "installHint": "Install gke-gcloud-auth-plugin for use with kubectl",
        "provideClusterInfo": True,
    }
    _tool(
        directory,
        "gcloud",
        f"""
args = sys.argv[1:]
assert args[:4] == ["container", "clusters", "get-credentials", "gpu-prod"], args
options = dict(zip(args[4::2], args[5::2]))
name = f"gke_{{options['--project']}}_{{options['--location']}}_gpu-prod"
with open(os.environ["KUBECONFIG"], "w") as out:
    out.write({_kubeconfig(lab.url, pki.ca, "NAME", exec_user)!r}.replace("NAME", name))
""",
    )
    _tool(
        directory,
        "gke-gcloud-auth-plugin",
        f"""
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
if not info["spec"]["cluster"]["server"] or not os.environ.get("CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE"):
    sys.exit("gke-gcloud-auth-plugin: no cluster info or no credentials")
{EXEC_CREDENTIAL.strip()}
""",
    )


SIGNED_IN = {
    # What aws-actions/configure-aws-credentials exports for later steps.
    "nightly-eks": {
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "example",
        "AWS_SESSION_TOKEN": "example-session",
    },
    # What google-github-actions/auth exports (setup-gcloud reads it).
    "nightly-gke": {"CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE": "/dev/null"},
    "github-workflow": {},
}


def _run_audit_job(example: Path, tmp_path: Path, secrets: dict[str, str]) -> dict[str, Any]:
    """The audit job's shell steps after the install, in order, until one fails."""
    job = yaml.safe_load(example.read_text())["jobs"]["audit"]
    workspace, temp, tools = tmp_path / "workspace", tmp_path / "runner-temp", tmp_path / "bin"
    for directory in (workspace, temp / "poolgate" / "bin"):
        directory.mkdir(parents=True)
    poolgate = temp / "poolgate" / "bin" / "poolgate"
    poolgate.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m scanner "$@"\n')
    poolgate.chmod(0o755)
    github_env = tmp_path / "github-env"
    github_env.write_text("")
    carried: dict[str, str] = {}
    ran: list[tuple[str, int, str]] = []
    for step in job["steps"]:
        if "run" not in step or step.get("name") == "Install poolgate":
            continue
        env = {
            "PATH": f"{tools}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "GITHUB_ACTIONS": "true",
            "GITHUB_ENV": str(github_env),
            "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(temp),
            "POOLGATE_CACHE_DIR": str(tmp_path / "cache"),
            **job.get("env", {}),
            **SIGNED_IN[example.stem],
            **carried,
        }
        for key, value in step.get("env", {}).items():
            env[key] = re.sub(
                r"\$\{\{\s*secrets\.(\w+)\s*\}\}", lambda m: secrets[m.group(1)], value
            )
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        ran.append((step["name"], done.returncode, done.stdout + done.stderr))
        carried.update(line.split("=", 1) for line in github_env.read_text().splitlines())
        if done.returncode != 0:
            break
    calls = tools / "calls.log"
    return {
        "ran": ran,
        "env": carried,
        "workspace": workspace,
        "temp": temp,
        "calls": [json.loads(line) for line in calls.read_text().splitlines()]
        if calls.exists()
        else [],
    }


@pytest.mark.parametrize("name", ["nightly-eks", "nightly-gke", "github-workflow"])
def test_the_nightly_audit_examples_audit_the_cluster(
    lab: ApiServer, pki: Pki, tmp_path: Path, name: str
) -> None:
    """Each example's audit reaches the cluster, writes the SARIF and the HTML report it
    uploads, leaves no kubeconfig behind, and fails the job on the findings (exit 1,
    carried through GITHUB_ENV to the last step). The cloud examples get their token
    from the kubeconfig's exec plugin, which needs the sign-in's credentials."""
    (tmp_path / "bin").mkdir()
    if name == "nightly-eks":
        _fake_aws(tmp_path / "bin", lab, pki)
    elif name == "nightly-gke":
        _fake_gcloud(tmp_path / "bin", lab, pki)
    secret = write_kubeconfig(tmp_path / "secret", lab.url, pki.ca, CONTEXT, token=TOKEN)
    result = _run_audit_job(
        EXAMPLES / f"{name}.yml", tmp_path, {"POOLGATE_KUBECONFIG": secret.read_text()}
    )
    steps = [(step, code) for step, code, _ in result["ran"]]
    expected_steps = ["Audit", "Fail on findings"]
    if name != "github-workflow":
        expected_steps.insert(0, "Connect to the cluster")
    assert steps == [(step, 1 if step == "Fail on findings" else 0) for step in expected_steps], (
        result["ran"]
    )
    assert result["env"]["POOLGATE_AUDIT_EXIT"] == "1"
    sarif = json.loads((result["workspace"] / "audit.sarif").read_text())
    uris = {  # cluster objects: a logical location only, with the cluster's URI
        r["locations"][0]["logicalLocations"][0]["properties"]["uri"]
        for r in sarif["runs"][0]["results"]
    }
    assert uris and all(uri.startswith("cluster://") for uri in uris), uris
    assert "<html" in (result["workspace"] / "audit.html").read_text()
    assert not (result["temp"] / "kubeconfig").exists()
    plugin = [call for call in result["calls"] if "get-token" in call or call[0].startswith("gke")]
    if name == "nightly-eks":
        assert result["calls"][0][:3] == ["aws", "eks", "update-kubeconfig"]
        assert plugin and plugin[0][1:] == [
            "--region",
            "us-east-1",
            "eks",
            "get-token",
            "--cluster-name",
            "gpu-prod",
        ]
        assert any("arn%3Aaws%3Aeks%3Aus-east-1" in uri for uri in uris), uris
    elif name == "nightly-gke":
        assert result["calls"][0][:4] == ["gcloud", "container", "clusters", "get-credentials"]
        assert plugin and plugin[0] == ["gke-gcloud-auth-plugin"]
        assert any("gke_my-project_us-central1_gpu-prod" in uri for uri in uris), uris
    else:
        assert result["calls"] == []
    assert lab.paths(), "the test API server was never asked"


@pytest.mark.parametrize("name", ["nightly-eks", "nightly-gke"])
def test_without_the_sign_in_the_audit_fails_as_not_run(
    lab: ApiServer, pki: Pki, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the sign-in's credentials the exec plugin fails: the audit exits 2 (it
    did not run), and the job fails with that code, sending nothing unauthenticated."""
    (tmp_path / "bin").mkdir()
    (_fake_aws if name == "nightly-eks" else _fake_gcloud)(tmp_path / "bin", lab, pki)
    monkeypatch.setitem(SIGNED_IN, name, {})
    result = _run_audit_job(EXAMPLES / f"{name}.yml", tmp_path, {})
    assert [(step, code) for step, code, _ in result["ran"]] == [
        ("Connect to the cluster", 0),
        ("Audit", 0),
        ("Fail on findings", 2),
    ], result["ran"]
    audit_log = result["ran"][1][2]
    assert "the exec credential plugin failed" in audit_log
    assert lab.paths() == []
    assert (
        os.path.exists(result["workspace"]) and not (result["workspace"] / "audit.sarif").exists()
    )
