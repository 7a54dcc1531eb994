"""Manifests a pull request hides from a walk, while ``kubectl apply -f DIR -R`` applies
them (issue 21, item 2), through ``poolgate scan`` as the Action runs it.

Each attack used to end "no findings", exit 0: a directory named like a marker file
(``Chart.yaml``, ``kustomization.yaml``) made its directory look rendered and no
file in it was read; dotfiles and dot-directories were skipped; a ``.json`` manifest
was read only when its first 64 KiB held the bytes ``"apiVersion"``. The near misses
are what ordinary repositories hold (a ``tsconfig.json`` with comments, a large
``package-lock.json``, GitHub workflows): they must stay quiet.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import cli_run
import pytest

TIMEOUT = 120
PRIVILEGED_POD = """apiVersion: v1
kind: Pod
metadata:
  name: miner
  namespace: team-a
spec:
  containers:
    - name: miner
      image: ghcr.io/evil/miner@sha256:{digest}
      securityContext:
        privileged: true
"""
DIGEST = "0" * 64
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: team-a\n"
KUSTOMIZATION = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
MARKERS = ["Chart.yaml", "kustomization.yaml", "kustomization.yml", "Kustomization"]
posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs symlinks and pipes")


def marker_message(what: str, marker: str) -> str:
    kind = "Helm chart" if marker == "Chart.yaml" else "Kustomization"
    return (
        f"{what}, not a regular file: the directory is scanned as plain manifests, "
        f"not rendered as a {kind}"
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def scan(repo: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = cli_run.poolgate("scan", *args, "--format", "json", cwd=repo, timeout=TIMEOUT)
    assert result.returncode in (0, 1, 3), result.stderr
    return result, json.loads(result.stdout)


def privileged(report: dict[str, Any]) -> list[tuple[str, int]]:
    """(uri, line) of every PG301 finding: the privileged container reported."""
    return sorted(
        (finding["location"]["uri"], finding["location"]["line"])
        for finding in report["findings"]
        if finding["ruleId"] == "PG301"
    )


def notes(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((n["level"], n["uri"], n["message"]) for n in report["notifications"])


# --- marker names that are not regular files -------------------------------------


@pytest.mark.parametrize("marker", MARKERS)
@pytest.mark.parametrize("where", ["k8s/", ""], ids=["subdirectory", "repository-root"])
def test_a_directory_named_like_a_marker_hides_nothing(repo: Path, marker: str, where: str) -> None:
    write(repo, f"{where}pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, f"{where}{marker}/nested.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    result, report = scan(repo, ".")
    assert result.returncode == 1
    # kubectl apply -R reads the "marker" directory too.
    assert privileged(report) == [(f"{where}{marker}/nested.yaml", 11), (f"{where}pod.yaml", 11)]
    assert notes(report) == [("error", f"{where}{marker}", marker_message("a directory", marker))]


@posix_only
@pytest.mark.parametrize("marker", MARKERS)
def test_a_dangling_link_named_like_a_marker_hides_nothing(repo: Path, marker: str) -> None:
    write(repo, "k8s/pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    (repo / "k8s" / marker).symlink_to("missing")
    result, report = scan(repo, ".")
    assert result.returncode == 1
    assert privileged(report) == [("k8s/pod.yaml", 11)]
    assert notes(report) == [("error", f"k8s/{marker}", marker_message("a symbolic link", marker))]


@posix_only
def test_a_pipe_or_link_named_like_a_marker_is_reported_beside_a_valid_one(repo: Path) -> None:
    """A valid kustomization does not make a broken marker beside it harmless: the
    directory is read file by file, as kubectl apply -R reads it."""
    write(repo, "k8s/pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, "k8s/kustomization.yaml", KUSTOMIZATION + "resources: []\n")
    os.mkfifo(repo / "k8s" / "Chart.yaml")
    write(repo, "chart-source.yaml", "name: x\n")
    (repo / "k8s" / "Kustomization").symlink_to(repo / "chart-source.yaml")
    result, report = scan(repo, ".")
    assert result.returncode == 1
    assert privileged(report) == [("k8s/pod.yaml", 11)]
    assert notes(report) == [
        ("error", "k8s/Chart.yaml", marker_message("a named pipe, socket or device", "Chart.yaml")),
        ("error", "k8s/Kustomization", marker_message("a symbolic link", "Kustomization")),
    ]


def test_a_broken_marker_alone_makes_the_run_incomplete(repo: Path) -> None:
    write(repo, "k8s/cm.yaml", CONFIGMAP.format(name="settings"))
    (repo / "k8s" / "Chart.yaml").mkdir()
    result, report = scan(repo, ".")
    assert result.returncode == 3
    assert report["summary"]["objects"] == 1
    assert notes(report) == [
        ("error", "k8s/Chart.yaml", marker_message("a directory", "Chart.yaml"))
    ]


def test_a_named_file_beside_a_broken_marker_is_read_and_the_marker_reported(repo: Path) -> None:
    """The pre-commit path: staged files are named one by one, and the directory they
    sit in is not taken for a chart either."""
    write(repo, "k8s/pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, "k8s/cm.yaml", CONFIGMAP.format(name="settings"))
    (repo / "k8s" / "Chart.yaml").mkdir()
    result, report = scan(repo, "k8s/pod.yaml", "k8s/cm.yaml")
    assert result.returncode == 1
    assert privileged(report) == [("k8s/pod.yaml", 11)]
    assert report["summary"]["objects"] == 2
    # Reported once, though both staged files met it.
    assert notes(report) == [
        ("error", "k8s/Chart.yaml", marker_message("a directory", "Chart.yaml"))
    ]


# --- dotfiles and dot-directories ---------------------------------------------------


def test_dotfiles_and_dot_directories_are_scanned(repo: Path) -> None:
    write(repo, ".pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, ".deploy/pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, ".github/k8s/pod.yml", PRIVILEGED_POD.format(digest=DIGEST))
    write(repo, ".git/pod.yaml", PRIVILEGED_POD.format(digest=DIGEST))  # git's own data
    result, report = scan(repo, ".")
    assert result.returncode == 1
    assert privileged(report) == [
        (".deploy/pod.yaml", 11),
        (".github/k8s/pod.yml", 11),
        (".pod.yaml", 11),
    ]
    assert report["summary"]["files"] == 3 and report["notifications"] == []


def test_configuration_files_are_never_scanned_as_objects(repo: Path) -> None:
    """``.poolgate.yaml`` files (the one in use, nested ones) and a ``--config`` file
    inside the scanned tree are configuration, walked or named; so is a config under
    any other name."""
    config = "apiVersion: poolgate.io/v1alpha1\nkind: GpuPoolGate\nmetadata:\n  name: {name}\n"
    write(repo, ".poolgate.yaml", config.format(name="root"))
    write(repo, "k8s/.poolgate.yaml", config.format(name="nested"))
    write(repo, "ci/gate.yaml", config.format(name="explicit"))
    write(repo, "k8s/cm.yaml", CONFIGMAP.format(name="settings"))
    runs = {
        (".", "--config", "ci/gate.yaml"): (1, 1),
        (".poolgate.yaml", "k8s/cm.yaml"): (1, 1),
        # ci/gate.yaml, not in use, is a file read like any other, but its document is
        # configuration (a GpuPoolGate of poolgate.io), never an object.
        (".",): (2, 1),
    }
    for args, counts in runs.items():
        result, report = scan(repo, *args)
        assert result.returncode == 0, args
        assert (report["summary"]["files"], report["summary"]["objects"]) == counts, args


# --- JSON manifests ---------------------------------------------------------------


def json_pod(head: str = '"apiVersion": "v1", "kind": "Pod",') -> str:
    """A privileged Pod as JSON, ``head`` on its first line; ``privileged`` on line 6."""
    return (
        "{" + head + "\n"
        ' "metadata": {"name": "miner", "namespace": "team-a"},\n'
        ' "spec": {"containers": [{"name": "miner",\n'
        '   "image": "ghcr.io/evil/miner@sha256:' + DIGEST + '",\n'
        '   "securityContext": {\n'
        '     "privileged": true}}]}}\n'
    )


YAML_ESCAPED_KEY = '? "\\x61pi\\\n  Version"\n: v1\n'
"""``apiVersion: v1`` as YAML may spell it: an escaped letter, an escaped line break."""


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("escaped-key.json", json_pod('"\\u0061piVersion": "v1", "kind": "Pod",'), 6),
        ("escaped-letters.json", json_pod('"api\\u0056ersion": "v1", "kind": "Pod",'), 6),
        ("padded.json", " \n" * 40_000 + json_pod(), 40_006),
        (
            "late-key.json",
            json_pod('"kind": "Pod", "x": "' + "y" * 70_000 + '", "apiVersion": "v1",'),
            6,
        ),
        ("yaml-inside.json", PRIVILEGED_POD.format(digest=DIGEST), 11),
        ("yaml-escapes.json", YAML_ESCAPED_KEY + PRIVILEGED_POD.format(digest=DIGEST)[15:], 13),
    ],
)
def test_a_json_manifest_is_read_however_it_is_spelled(
    repo: Path, name: str, text: str, line: int
) -> None:
    """The finding lands on the line of ``privileged`` in the file a reviewer opens."""
    write(repo, f"k8s/{name}", text)
    result, report = scan(repo, ".")
    assert result.returncode == 1, report["notifications"]
    assert privileged(report) == [(f"k8s/{name}", line)]


def test_a_json_stream_is_read_not_skipped(repo: Path) -> None:
    """kubectl applies JSON values one after another; YAML, which poolgate parses JSON
    as (to keep positions), wants ``---`` between them: the second value is PG001, and
    the run incomplete, rather than skipped."""
    write(repo, "k8s/stream.json", '{"a": 1}\n' + json_pod())
    result, report = scan(repo, ".")
    assert result.returncode == 3
    assert [
        (f["ruleId"], f["location"]["uri"], f["location"]["line"]) for f in report["findings"]
    ] == [("PG001", "k8s/stream.json", 2)]


def test_a_json_manifest_over_the_size_limit_is_reported_not_skipped(repo: Path) -> None:
    write(repo, "k8s/big.json", " " * 70_000 + json_pod('"\\u0061piVersion": "v1", "kind": "Pod",'))
    write(repo, "web/package-lock.json", json.dumps({"packages": {"x": "y" * 70_000}}))
    result, report = scan(repo, ".", "--max-file-size", "64KiB")
    assert result.returncode == 3
    assert notes(report) == [("error", "k8s/big.json", "file is larger than 65,536 bytes; skipped")]


def test_a_truncated_json_manifest_is_still_pg001(repo: Path) -> None:
    write(repo, "k8s/broken.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {')
    result, report = scan(repo, ".")
    assert result.returncode == 3
    assert [(f["ruleId"], f["location"]["uri"]) for f in report["findings"]] == [
        ("PG001", "k8s/broken.json")
    ]


# --- near misses: what ordinary repositories hold -----------------------------------


def test_other_tools_files_stay_quiet(repo: Path) -> None:
    """No error, no finding, nothing counted: other tools' JSON, JSON with comments, a
    large lockfile (over the size limit too), CI workflows and hook configs."""
    write(
        repo, "web/tsconfig.json", '{\n  // comment\n  "compilerOptions": {"strict": true,},\n}\n'
    )
    write(repo, ".devcontainer/devcontainer.json", '{\n  /* c */ "image": "x", // y\n}\n')
    write(repo, ".vscode/settings.json", '{"dir": "C:\\\\x64\\\\bin", // z\n}\n')
    write(repo, "i18n/fr.json", json.dumps({"greeting": "d\u00e9j\u00e0 vu"}))
    write(repo, "schema/pod.json", json.dumps({"properties": {"apiVersion": {}, "kind": {}}}))
    lock = {"name": "web", "lockfileVersion": 3, "packages": {}}
    for index in range(2000):
        lock["packages"][f"node_modules/p{index}"] = {"version": "1.0.0", "dev": True}
    write(repo, "web/package-lock.json", json.dumps(lock, indent=2))
    write(repo, "web/big/package-lock.json", json.dumps(lock, indent=2) + " " * 11 * 1024 * 1024)
    write(
        repo,
        ".github/workflows/ci.yml",
        "on: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: echo ${{ github.sha }}\n",
    )
    write(repo, ".pre-commit-config.yaml", "repos:\n  - repo: local\n    hooks: []\n")
    write(repo, ".pre-commit-hooks.yaml", "- id: x\n  name: x\n  entry: x\n  language: system\n")
    write(repo, "k8s/cm.yaml", CONFIGMAP.format(name="settings"))
    result, report = scan(repo, ".")
    assert result.returncode == 0
    assert report["findings"] == [] and report["notifications"] == []
    assert (report["summary"]["files"], report["summary"]["objects"]) == (4, 1)
