"""Kubeconfig problems are one ``poolgate: error:`` line and exit code 2, never a
traceback from the client; ``KUBECONFIG`` lists merge as client-go merges them.

No Kubernetes cluster is available where these tests run. The kubeconfig files are
real ones, read by the official ``kubernetes`` client and pointing at the HTTPS API
server of ``tests/audit/apiserver.py``, the same code path as against a real cluster.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from scanner.kinds.resources import find
from scanner.sources.cluster import Served, Settings, Target, connect
from scanner.sources.kubeconfig import TokenFile

from .apiserver import ApiServer, Pki, write_kubeconfig
from .conftest import CONTEXT, TOKEN, cli, poolgate


def good(server: ApiServer, pki: Pki, tmp_path: Path, name: str = "kubeconfig") -> Path:
    return write_kubeconfig(tmp_path / name, server.url, pki.ca, CONTEXT, token=TOKEN)


def edited(path: Path, name: str, change: Any) -> Path:
    document = yaml.safe_load(path.read_text())
    change(document)
    target = path.with_name(name)
    target.write_text(yaml.safe_dump(document))
    return target


def one_error_line(result: Any) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("poolgate: error: "), result.stderr
    return str(lines[0])


def set_user(user: dict[str, Any]) -> Any:
    def change(document: dict[str, Any]) -> None:
        document["users"][0]["user"] = user

    return change


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("bad-yaml", "kc:3:1: invalid YAML: expected the node content"),
        ("yaml-list", "not a kubeconfig (the YAML is a list, not a mapping"),
        ("scalar", "not a kubeconfig (the YAML is a number"),
        ("contexts-not-a-list", "contexts is a string, not a list"),
        ("directory", "is a directory"),
        ("empty", "is empty"),
        ("missing-token-file", "cannot read /nonexistent/token: No such file or directory"),
        ("server-not-a-url", "server 'not a url' is not an https:// URL"),
        ("ca-data-not-base64", "a certificate or key (*-data) is not base64: Invalid base64"),
        ("key-data-not-base64", "a certificate or key (*-data) is not base64: Invalid base64"),
        # Found in review: these crashed with a traceback (exit 4).
        ("socks-proxy", "a SOCKS proxy needs the PySocks package"),
        ("proxy-not-a-url", "cannot set up the connection: LocationParseError"),
        ("oidc-not-a-jwt", "the kubernetes client cannot use this kubeconfig"),
        ("azure", "auth-provider 'azure' is not supported"),
    ],
)
def test_kubeconfig_problems_are_one_line(
    lab: ApiServer, pki: Pki, tmp_path: Path, problem: str, expected: str
) -> None:
    path = tmp_path / "kc"
    base = good(lab, pki, tmp_path)
    if problem == "bad-yaml":
        path.write_text("apiVersion: v1\nclusters: [\n")
    elif problem == "yaml-list":
        path.write_text("- a\n- b\n")
    elif problem == "scalar":
        path.write_text("42\n")
    elif problem == "contexts-not-a-list":
        path = edited(base, "kc", lambda d: d.update(contexts="prod"))
    elif problem == "directory":
        path = tmp_path
    elif problem == "empty":
        path.write_text("")
    elif problem == "missing-token-file":
        path = edited(base, "kc", set_user({"tokenFile": "/nonexistent/token"}))
    elif problem == "server-not-a-url":
        path = edited(base, "kc", lambda d: d["clusters"][0]["cluster"].update(server="not a url"))
    elif problem == "ca-data-not-base64":
        path = edited(
            base,
            "kc",
            lambda d: d["clusters"][0]["cluster"].update(
                {"certificate-authority-data": "!!!notbase64"}
            ),
        )
    elif problem == "key-data-not-base64":
        path = edited(
            base,
            "kc",
            set_user({"client-certificate-data": "QUJD", "client-key-data": "!!!notbase64"}),
        )
    elif problem == "socks-proxy":
        path = edited(
            base,
            "kc",
            lambda d: d["clusters"][0]["cluster"].update({"proxy-url": "socks5://127.0.0.1:1080"}),
        )
    elif problem == "proxy-not-a-url":
        path = edited(
            base, "kc", lambda d: d["clusters"][0]["cluster"].update({"proxy-url": "not a url"})
        )
    elif problem == "oidc-not-a-jwt":
        provider = {"name": "oidc", "config": {"id-token": "abcd.abcd.abcd"}}
        path = edited(base, "kc", set_user({"auth-provider": provider}))
    elif problem == "azure":
        provider = {"name": "azure", "config": {"access-token": "x"}}
        path = edited(base, "kc", set_user({"auth-provider": provider}))
    line = one_error_line(cli("audit", env={"KUBECONFIG": str(path)}))
    assert expected in line, line


def test_an_unreadable_kubeconfig_is_one_line(lab: ApiServer, pki: Pki, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    path = good(lab, pki, tmp_path)
    path.chmod(0)
    assert "cannot read: Permission denied" in one_error_line(
        cli("audit", "--kubeconfig", str(path))
    )


def test_kubeconfig_list_skips_missing_and_empty_entries_as_client_go_does(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    config = good(lab, pki, tmp_path)
    empty = tmp_path / "empty"
    empty.write_text("")
    listed = os.pathsep.join(["/nonexistent/kubeconfig", str(empty), str(config)])
    result = cli("audit", "--format", "json", env={"KUBECONFIG": listed})
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["findings"]
    # None of them there: said as such.
    nothing = os.pathsep.join(["/nonexistent/a", "/nonexistent/b"])
    assert "does not exist (KUBECONFIG)" in one_error_line(
        cli("audit", env={"KUBECONFIG": nothing})
    )
    # --kubeconfig names one file, which must exist.
    assert "kubeconfig /nonexistent/a does not exist" in one_error_line(
        cli("audit", "--kubeconfig", "/nonexistent/a")
    )


def test_the_first_current_context_wins_as_in_client_go(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    first = write_kubeconfig(tmp_path / "first", lab.url, pki.ca, "first", token=TOKEN)
    second = write_kubeconfig(tmp_path / "second", lab.url, pki.ca, "second", token=TOKEN)
    listed = os.pathsep.join([str(first), str(second)])
    result = cli("audit", "--format", "json", env={"KUBECONFIG": listed})
    uris = {f["location"]["uri"] for f in json.loads(result.stdout)["findings"]}
    assert uris and all(uri.startswith("cluster://first/") for uri in uris)


def test_credentials_are_never_sent_over_plain_http(pki: Pki, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "SECRET-BEARER-TOKEN"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    line = one_error_line(cli("audit", "--kubeconfig", str(config)))
    assert f"server http://127.0.0.1:{port} is plain http://" in line
    assert "credentials only over HTTPS" in line
    with pytest.raises(BlockingIOError):
        listener.accept()  # no connection was even opened
    listener.close()


def test_an_http_server_without_credentials_is_allowed(tmp_path: Path) -> None:
    """``kubectl proxy`` serves http://127.0.0.1:8001 and adds the credentials itself."""
    from scanner.sources.cluster import Settings, Target, connect

    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:8001"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "proxy", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "proxy",
            }
        )
    )
    cluster = connect(Target(str(config)), Settings())
    assert cluster.host == "http://127.0.0.1:8001"
    cluster.close()


@pytest.mark.parametrize("plugin", ["missing", "failing"])
def test_a_failing_exec_plugin_is_one_line_naming_it(
    lab: ApiServer, pki: Pki, tmp_path: Path, plugin: str
) -> None:
    """EKS, GKE and AKS contexts get their token from an exec plugin. When it fails the
    client logs ``ERROR:root:...`` and goes on without credentials (then a 401): the
    one line says what failed instead."""
    command = "/nonexistent/aws-iam-authenticator"
    if plugin == "failing":
        script = tmp_path / "plugin.sh"
        script.write_text(
            "#!/bin/sh\necho 'error: SSO session expired, run aws sso login' >&2\nexit 1\n"
        )
        script.chmod(0o755)
        command = str(script)
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command}}
    config = edited(good(lab, pki, tmp_path), "kc-exec", set_user(exec_user))
    result = poolgate("audit", "--kubeconfig", str(config))
    line = one_error_line(result)
    assert f"context {CONTEXT}: the exec credential plugin failed: " in line
    expected = command if plugin == "missing" else "SSO session expired, run aws sso login"
    assert expected in line
    assert "401" not in line and "ERROR:root" not in result.stderr
    assert lab.paths() == []  # nothing was sent without credentials


def test_a_token_file_ending_in_a_line_break_is_trimmed_as_client_go_does(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """Found in review: the line break made every request's header invalid, and the
    audit gave up after five attempts blaming an "unreadable response"."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    path = edited(good(lab, pki, tmp_path), "kc", set_user({"tokenFile": str(token)}))
    result = cli("audit", "--kubeconfig", str(path), "--format", "json")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["findings"]


def test_a_rotated_token_file_is_read_again(
    lab: ApiServer, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: a ``tokenFile`` was read once, so a projected token that kubelet
    rotated during the audit made every later kind fail with 401. The file is read
    again (here on every request; ``TokenFile`` keeps it to once a minute), relative to
    the kubeconfig and trimmed."""
    monkeypatch.setattr("scanner.sources.kubeconfig.TOKEN_FILE_REREAD", 0.0)
    (tmp_path / "token").write_text(TOKEN + "\n")
    path = edited(good(lab, pki, tmp_path), "kc", set_user({"tokenFile": "token"}))
    cluster = connect(Target(str(path)), Settings())
    node = find("", "Node")
    assert node is not None
    nodes = cluster.discover([node])[node]
    assert isinstance(nodes, Served)
    assert len(cluster.list_objects(nodes)) == 2
    lab.token = "rotated-token"
    (tmp_path / "token").write_text("rotated-token\n")
    assert len(cluster.list_objects(nodes)) == 2
    cluster.close()


def test_a_token_file_is_read_again_once_a_minute(tmp_path: Path) -> None:
    now = [1000.0]
    path = tmp_path / "token"
    refresh = TokenFile(str(path), clock=lambda: now[0])
    configuration = SimpleNamespace(api_key={"BearerToken": "Bearer first"})
    path.write_text("second\n")
    refresh(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer first"  # just read by the client
    now[0] += 60
    refresh(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer second"
    path.unlink()  # between kubelet's remove and write: the last token stays
    now[0] += 60
    refresh(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer second"


def test_paths_in_several_kubeconfig_files_are_relative_to_their_own_file(
    lab: ApiServer, pki: Pki, tmp_path: Path
) -> None:
    """Found in review: with KUBECONFIG=a:b, the user's relative client certificate and
    key in ``a`` were looked up beside ``b``, the file of the cluster (the kubernetes
    client's merge); kubectl resolves each against the file that defines it."""
    base = yaml.safe_load(good(lab, pki, tmp_path).read_text())
    (tmp_path / "a" / "certs").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    for source, name in ((pki.client_cert, "client.crt"), (pki.client_key, "client.key")):
        (tmp_path / "a" / "certs" / name).write_text(Path(source).read_text())
    (tmp_path / "b" / "ca.crt").write_text(Path(pki.ca).read_text())
    credentials = {"client-certificate": "certs/client.crt", "client-key": "certs/client.key"}
    user = {"name": base["users"][0]["name"], "user": credentials}
    first = {"contexts": base["contexts"], "current-context": CONTEXT, "users": [user]}
    cluster = dict(base["clusters"][0])
    cluster["cluster"] = {"server": lab.url, "certificate-authority": "ca.crt"}
    (tmp_path / "a" / "config").write_text(yaml.safe_dump(first))
    (tmp_path / "b" / "config").write_text(yaml.safe_dump({"clusters": [cluster]}))
    listed = os.pathsep.join([str(tmp_path / "a" / "config"), str(tmp_path / "b" / "config")])
    result = cli("audit", "--format", "json", env={"KUBECONFIG": listed})
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["findings"]
