"""Issue 21, class 1, Helm: only vendored charts, no repository lookups, no plugins or
post-renderers, nothing read outside the chart.

No helm binary exists for the test machines, so Helm is tested statically and with a
stand-in ``helm`` put first on PATH that records its argv, environment and working
directory (and the files it can see there) and prints a recorded render.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from cli_run import ROOT, poolgate

from scanner.sources import helmcheck

from .support import fake_tool, listening, repository, write

CHART = ROOT / "fixtures" / "helm" / "trainer"
RECORDED = ROOT / "fixtures" / "recorded" / "helm-trainer.yaml"
CHART_YAML = "apiVersion: v2\nname: trainer\nversion: 0.1.0\n"


def recording_helm(log: Path) -> str:
    return f"""
files = sorted(
    os.path.relpath(os.path.join(d, name), os.getcwd())
    for d, dirs, names in os.walk(os.getcwd()) for name in dirs + names
)
contents = "".join(open(os.path.join(d, n), errors="replace").read()
                   for d, _, names in os.walk(os.getcwd()) for n in names)
record = {{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "files": files,
          "path_entries": os.listdir(os.environ["PATH"]),
          "plugins": os.listdir(os.environ.get("HELM_PLUGINS", "/nonexistent")),
          "token_seen": "c2VjcmV0LXRva2Vu" in contents}}
with open({json.dumps(str(log))}, "a") as handle:
    handle.write(json.dumps(record) + "\\n")
sys.stdout.write(open({json.dumps(str(RECORDED))}).read())
"""


def _chart(root: Path, name: str = "chart") -> Path:
    chart = root / name
    shutil.copytree(CHART, chart)
    return chart


def _run(tmp_path: Path, repo: Path, *paths: str) -> tuple[Any, list[dict[str, Any]]]:
    log = tmp_path / "helm.log"
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "helm", recording_helm(log))
    env = {
        "PATH": os.pathsep.join([str(bin_dir), os.environ["PATH"]]),
        "HELM_PLUGINS": "/home/runner/plugins",
        "HELM_POST_RENDERER": "/home/runner/post",
        "HELM_REPOSITORY_CONFIG": "/home/runner/repositories.yaml",
        "GITHUB_TOKEN": "ghp_secret",
        "HTTPS_PROXY": "http://proxy.example:3128",
    }
    result = poolgate("scan", *paths, "--format", "json", cwd=repo, env=env)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def _notes(result: Any) -> list[tuple[str, int | None, str]]:
    return [(n["uri"], n["line"], n["message"]) for n in json.loads(result.stdout)["notifications"]]


def test_helm_runs_on_a_private_copy_with_no_plugins_and_a_clean_environment(
    tmp_path: Path,
) -> None:
    """The chart sits at the repository root, so ``.git`` is inside it: the copy Helm
    reads has no ``.git`` (``.Files.Get ".git/config"`` would print the token)."""
    repo = repository(tmp_path)
    for entry in CHART.iterdir():
        (shutil.copytree if entry.is_dir() else shutil.copy)(entry, repo / entry.name)
    write(repo, {"templates/notes.txt": "see .Files", ".helmignore": "*.bak\n"})
    (repo / "templates" / "alias.yaml").symlink_to(repo / "templates" / "deployment.yaml")
    result, calls = _run(tmp_path, repo, ".")
    assert result.returncode == 1, result.stdout + result.stderr
    (call,) = calls
    assert not call["token_seen"]
    assert ".git" not in {Path(name).parts[0] for name in call["files"]}
    assert {"Chart.yaml", "values.yaml", "templates/alias.yaml", ".helmignore"} <= set(
        call["files"]
    )
    copy = Path(call["cwd"])
    assert copy.name == repo.name and repo not in copy.parents and not copy.exists()
    assert call["argv"][:4] == ["template", "repo", str(copy), "--namespace"]
    assert not {"--post-renderer", "--dependency-update", "--enable-dns", "--verify"} & set(
        call["argv"]
    )
    env = call["env"]
    assert env["HELM_NO_PLUGINS"] == "1" and call["plugins"] == []
    assert env["HELM_PLUGINS"] != "/home/runner/plugins"
    assert not {
        "HELM_POST_RENDERER",
        "HELM_REPOSITORY_CONFIG",
        "GITHUB_TOKEN",
        "HTTPS_PROXY",
    } & set(env)
    assert call["path_entries"] == ["helm"]


def test_dependencies_that_are_not_vendored_are_refused(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    chart = _chart(repo)
    (chart / "Chart.yaml").write_text(
        CHART_YAML
        + "dependencies:\n"
        + "  - name: redis\n    version: 17.0.0\n    repository: https://charts.bitnami.com/bitnami\n"
        + "  - name: common\n    version: 1.0.0\n    repository: file://../common\n"
        + "  - name: local\n    version: 0.1.0\n"
    )
    write(chart, {"charts/local/Chart.yaml": "apiVersion: v2\nname: local\nversion: 0.1.0\n"})
    result, calls = _run(tmp_path, repo, "chart")
    assert calls == []  # helm never ran
    assert result.returncode == 3
    never = "is not vendored in charts/ (poolgate never downloads charts: commit them, `helm dependency build`)"
    assert _notes(result) == [
        ("chart/Chart.yaml", 5, f'Helm chart chart not rendered: dependency "redis" {never}'),
        ("chart/Chart.yaml", 8, f'Helm chart chart not rendered: dependency "common" {never}'),
    ]


def _tgz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_vendored_dependencies_render(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    chart = _chart(repo)
    (chart / "Chart.yaml").write_text(
        CHART_YAML
        + "dependencies:\n  - name: dir\n    version: 0.1.0\n  - name: packed\n    version: 1.0.0\n"
    )
    write(chart, {"charts/dir/Chart.yaml": "apiVersion: v2\nname: dir\nversion: 0.1.0\n"})
    (chart / "charts" / "packed-1.0.0.tgz").write_bytes(
        _tgz({"packed/Chart.yaml": b"apiVersion: v2\nname: packed\nversion: 1.0.0\n"})
    )
    result, calls = _run(tmp_path, repo, "chart")
    assert result.returncode == 1, result.stdout + result.stderr
    assert len(calls) == 1 and "charts/packed-1.0.0.tgz" in calls[0]["files"]


def test_schema_references_that_leave_the_schema_are_refused(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    chart = _chart(repo)
    with listening() as server:
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"port": {"type": "integer"}},
            "properties": {
                "port": {"$ref": "#/$defs/port"},
                "a": {"$ref": f"{server.url}/schema.json"},
                "b": {"$ref": "file:///etc/passwd"},
                "c": {"$ref": "../../.git/config"},
                "d": {"$dynamicRef": "other.json#x"},
                "e": {"$schema": "http://evil.example/meta"},
            },
        }
        (chart / "values.schema.json").write_text(json.dumps(schema, indent=1))
        (chart / "charts").mkdir()
        (chart / "charts" / "sub-1.0.0.tgz").write_bytes(
            _tgz({"sub/values.schema.json": b'{"$ref": "https://evil.example/s.json"}'})
        )
        result, calls = _run(tmp_path, repo, "chart")
    assert calls == [] and server.requests == []
    prefix = "Helm chart chart not rendered: "
    assert [(uri, line, message.removeprefix(prefix)) for uri, line, message in _notes(result)] == [
        (
            "chart/values.schema.json",
            13,
            f'$ref "{server.url}/schema.json" points outside the schema',
        ),
        ("chart/values.schema.json", 16, '$ref "file:///etc/passwd" points outside the schema'),
        ("chart/values.schema.json", 19, '$ref "../../.git/config" points outside the schema'),
        ("chart/values.schema.json", 22, '$dynamicRef "other.json#x" points outside the schema'),
        (
            "chart/values.schema.json",
            25,
            '$schema "http://evil.example/meta" is not a known JSON Schema draft',
        ),
        (
            "chart/charts/sub-1.0.0.tgz",
            None,
            'sub-1.0.0.tgz (sub/values.schema.json): $ref "https://evil.example/s.json" points outside the schema',
        ),
    ]


@pytest.mark.parametrize("target", ["outside", "git"])
def test_links_out_of_the_chart_are_refused(tmp_path: Path, target: str) -> None:
    """Links that stay in the repository but leave the chart (``.Files`` would read
    them), and links into ``.git``."""
    repo = repository(tmp_path)
    chart = _chart(repo)
    write(repo, {"shared/secret.txt": "team secret\n", "chart/.git/config": "token\n"})
    (chart / "files").mkdir()
    link = chart / "files" / "data"
    link.symlink_to(
        repo / "shared" / "secret.txt" if target == "outside" else chart / ".git" / "config"
    )
    result, calls = _run(tmp_path, repo, "chart")
    assert calls == []
    where = "outside the chart" if target == "outside" else "into .git"
    assert _notes(result) == [
        ("chart/files/data", None, f"Helm chart chart not rendered: symbolic link points {where}")
    ]


def test_a_git_directory_inside_the_chart_is_left_out_of_the_copy(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    chart = _chart(repo)
    write(chart, {"sub/.git/config": "token\n", ".GIT/x": "y\n"})
    (chart / "link").symlink_to(chart / "sub" / ".git" / "config")
    assert [p.message for p in helmcheck.problems(chart)] == ["symbolic link points into .git"]
    (chart / "link").unlink()
    assert helmcheck.problems(chart) == []
    copy = tmp_path / "copy"
    helmcheck.private_copy(chart, copy)
    copied = {p.relative_to(copy).as_posix() for p in copy.rglob("*")}
    assert "sub" in copied and not any(".git" in name.lower() for name in copied)


def test_archives_are_read_within_a_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small archive that unpacks to more than the limit (a gzip bomb) is refused
    after reading at most the limit (here 1 MiB, to keep the test small)."""
    monkeypatch.setattr(helmcheck, "MAX_BYTES", 1024 * 1024)
    chart = _chart(tmp_path)
    bomb = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=bomb, mode="wb") as packed,
        tarfile.open(fileobj=packed, mode="w|") as archive,
    ):
        info = tarfile.TarInfo("x/big.bin")
        info.size = 8 * 1024 * 1024
        archive.addfile(info, io.BytesIO(bytes(info.size)))
    (chart / "charts").mkdir()
    (chart / "charts" / "x-1.0.0.tgz").write_bytes(bomb.getvalue())
    assert len(bomb.getvalue()) < 64 * 1024
    (problem,) = helmcheck.problems(chart)
    assert problem.message == "the chart holds more than 1 MiB (limit)"


def test_copies_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helmcheck, "MAX_FILES", 3)
    chart = _chart(tmp_path)
    with pytest.raises(helmcheck.Refused, match="more than 3 files"):
        helmcheck.private_copy(chart, tmp_path / "copy")
