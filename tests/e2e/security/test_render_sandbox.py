"""Issue 21, class 1, defence in depth: how a renderer runs when it does run.

No ``git`` on its PATH, an environment built from an allowlist (no ``GIT_*``, proxy,
credential or cloud variable), a private empty home, and a fresh network namespace
where the platform allows one (probed once per run; without one the render runs
anyway, the static refusal being the guard). Checked with stand-in tools that record
what they see, and with the real kubectl given a hostile kustomization directly, as if
the static check had missed it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_run import poolgate

from scanner.sources import sandbox
from scanner.sources.rendered import RenderFailed, run_tool

from .support import (
    CONFIGMAP,
    fake_tool,
    has_git,
    kubectl,
    listening,
    repository,
    upload_pack,
    write,
)

SECRETS = {
    "GIT_DIR": "/somewhere/.git",
    "GIT_SSH_COMMAND": "touch /tmp/pwned",
    "GIT_CONFIG_PARAMETERS": "'core.sshCommand=touch /tmp/pwned'",
    "HTTPS_PROXY": "http://proxy.example:3128",
    "http_proxy": "http://proxy.example:3128",
    "ALL_PROXY": "socks5://proxy.example:1080",
    "NO_PROXY": "*",
    "GITHUB_TOKEN": "ghp_secret",
    "ACTIONS_RUNTIME_TOKEN": "runtime-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/runner/gcp.json",
    "AZURE_CLIENT_SECRET": "azure-secret",
    "KUBECONFIG": "/home/runner/.kube/config",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "KUSTOMIZE_PLUGIN_HOME": "/home/runner/plugins",
    "HELM_PLUGINS": "/home/runner/helm-plugins",
    "LANG": "C.UTF-8",
}
ALLOWED = {
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "KUBECONFIG",
    "KUSTOMIZE_PLUGIN_HOME",
    *sandbox.KEPT,
}


def observing_tool(log: Path, url: str = "") -> str:
    """A stand-in renderer that records its environment, what its PATH offers, its home
    and (given ``url``) whether it can reach the network, and prints one ConfigMap."""
    return f"""
import shutil, urllib.request
path_dirs = os.environ.get("PATH", "").split(os.pathsep)
reached = None
if {url!r}:
    try:
        urllib.request.urlopen({url!r} + "/from-renderer", timeout=5)
        reached = True
    except OSError:
        reached = False
record = {{
    "argv": sys.argv,
    "env": dict(os.environ),
    "path_entries": sorted(name for d in path_dirs if os.path.isdir(d) for name in os.listdir(d)),
    "git": shutil.which("git"),
    "home": sorted(os.listdir(os.environ["HOME"])),
    "plugins": sorted(os.listdir(os.environ.get("KUSTOMIZE_PLUGIN_HOME", "/nonexistent"))),
    "kubeconfig_exists": os.path.exists(os.environ.get("KUBECONFIG", "")),
    "reached": reached,
}}
with open({json.dumps(str(log))}, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
print({json.dumps(CONFIGMAP.format(name="rendered"))})
"""


def _scan_with(bin_dir: Path, repo: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    env = {**SECRETS, "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]])}
    return poolgate("scan", *paths, "--format", "json", cwd=repo, env=env)


def test_the_renderer_sees_no_git_no_secrets_and_a_private_home(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": "resources: [cm.yaml]\n",
            "app/cm.yaml": CONFIGMAP.format(name="x"),
        },
    )
    log = tmp_path / "log"
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "kustomize", observing_tool(log))
    result = _scan_with(bin_dir, repo, "app")
    assert result.returncode == 0, result.stdout + result.stderr
    (seen,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert set(seen["env"]) <= ALLOWED, set(seen["env"]) - ALLOWED
    assert seen["env"]["LANG"] == "C.UTF-8"  # locale passes
    assert seen["path_entries"] == ["kustomize"] and seen["git"] is None
    assert seen["home"] == [] and seen["plugins"] == []
    assert not seen["kubeconfig_exists"]
    private = Path(seen["env"]["HOME"]).parent
    for variable in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TMPDIR", "KUSTOMIZE_PLUGIN_HOME"):
        assert Path(seen["env"][variable]).parent == private
    assert Path(seen["env"]["PATH"]).parent == private
    assert not private.exists()  # removed after the render
    assert repo not in private.parents


def test_the_renderer_has_no_network_where_the_platform_allows(tmp_path: Path) -> None:
    if not sandbox.network_isolation():
        pytest.skip(
            "this machine allows no unprivileged network namespace (the static check guards)"
        )
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": "resources: [cm.yaml]\n",
            "app/cm.yaml": CONFIGMAP.format(name="x"),
        },
    )
    log = tmp_path / "log"
    with listening() as server:
        fake_tool(tmp_path / "bin", "kustomize", observing_tool(log, server.url))
        result = _scan_with(tmp_path / "bin", repo, "app")
    assert result.returncode == 0, result.stdout + result.stderr
    (seen,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert seen["reached"] is False and server.requests == []


FAKE_UNSHARE = """
if sys.argv[1:] == ["--version"]:
    sys.exit(print("unshare from util-linux 2.0"))
with open({log}, "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\\n")
if {works}:
    assert sys.argv[1:4] == ["--net", "--map-root-user", "--"], sys.argv
    os.execv(sys.argv[4], sys.argv[4:])
sys.stderr.write("unshare: unshare failed: Operation not permitted\\n")
sys.exit(1)
"""


@pytest.mark.parametrize("works", [True, False])
def test_the_namespace_is_probed_once_per_run_and_optional(tmp_path: Path, works: bool) -> None:
    """A platform without user namespaces (``unshare`` fails) still renders, without one;
    where it works every render goes through it, and the probe runs once."""
    repo = repository(tmp_path)
    for name in ("one", "two"):
        write(
            repo,
            {
                f"{name}/kustomization.yaml": "resources: [cm.yaml]\n",
                f"{name}/cm.yaml": CONFIGMAP.format(name=name),
            },
        )
    bin_dir = tmp_path / "bin"
    unshare_log = tmp_path / "unshare.log"
    fake_tool(
        bin_dir, "unshare", FAKE_UNSHARE.format(log=json.dumps(str(unshare_log)), works=works)
    )
    tool_log = tmp_path / "tool.log"
    fake_tool(bin_dir, "kustomize", observing_tool(tool_log))
    result = _scan_with(bin_dir, repo, "one", "two")
    assert result.returncode == 0, result.stdout + result.stderr
    calls = [json.loads(line) for line in unshare_log.read_text().splitlines()]
    unshare = str(bin_dir / "unshare")
    assert calls[0] == ["--net", "--map-root-user", "--", unshare, "--version"]  # the probe
    renders = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert len(renders) == 2
    if works:
        assert len(calls) == 3 and all(call[3].endswith("/bin/kustomize") for call in calls[1:])
    else:
        assert len(calls) == 1  # renders ran without it


def test_real_kubectl_in_the_sandbox_cannot_run_git_or_fetch(tmp_path: Path) -> None:
    """As if the static check had missed both attacks: the sandbox alone stops them."""
    if not has_git():
        pytest.skip("git is not installed: nothing for the sandbox to hide")
    marker = tmp_path / "PWNED"
    with listening() as server:
        write(
            tmp_path,
            {
                "git/kustomization.yaml": f"resources:\n  - {upload_pack(marker)}\n",
                "http/kustomization.yaml": f"configMapGenerator:\n  - name: x\n    files: [x={server.url}/meta]\n",
            },
        )
        failures = [_sandboxed_failure(tmp_path, name) for name in ("git", "http")]
    assert not marker.exists()
    assert "no 'git' program on path" in failures[0]
    if sandbox.network_isolation():
        assert server.requests == [] and "network is unreachable" in failures[1]


def _sandboxed_failure(tmp_path: Path, name: str) -> str:
    """Build ``tmp_path/name`` with the real kubectl in the sandbox; its error ("" if none)."""
    scratch = tmp_path / f"scratch-{name}"
    scratch.mkdir()
    argv, env = sandbox.prepare(str(kubectl()), ["kustomize", str(tmp_path / name)], scratch)
    try:
        run_tool(argv, env, tmp_path, 120)
    except RenderFailed as error:
        return str(error)
    return ""
