"""Issue 21, class 1: a kustomization in a pull request makes the scan run a command or
fetch a URL. Each attack runs against the real ``kubectl kustomize`` as a pull request
author would write it; the command must not run (a marker file), the URL must not be
fetched (a local server hears nothing), and the refusal names file, field and line while
the directory's plain manifests are still scanned.

The premise tests show each attack works on this kubectl without poolgate in between,
so the assertions that it does not through poolgate can fail.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest
from cli_run import poolgate
from tool_check import tool_missing

from scanner.sources import kustomization

from .support import (
    CONFIGMAP,
    PRIVILEGED,
    findings,
    has_git,
    kubectl,
    listening,
    notes,
    render_env,
    report,
    repository,
    scan,
    upload_pack,
    write,
)

REFUSED = "Kustomization app not rendered: "
REMOTE = "is a remote reference (nothing is fetched)"


def _kubectl_kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubectl()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=render_env(HOME=str(directory.parent)),
    )


def test_premise_kubectl_runs_the_upload_pack_command(tmp_path: Path) -> None:
    if not has_git():
        tool_missing("git is not installed")
    marker = tmp_path / "PWNED"
    write(tmp_path, {"app/kustomization.yaml": f"resources:\n  - {upload_pack(marker)}\n"})
    _kubectl_kustomize(tmp_path / "app")
    assert marker.exists()


def test_a_base_that_runs_a_command_is_refused_and_the_plain_manifests_are_scanned(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    write(
        repo,
        {
            "app/kustomization.yaml": f"resources:\n  - deploy.yaml\n  - {upload_pack(marker)}\n",
            "app/deploy.yaml": PRIVILEGED,
        },
    )
    result = scan(repo, "app")
    assert not marker.exists()
    assert result.returncode == 1, result.stdout + result.stderr  # a finding outranks incomplete
    assert findings(result) == [("PG301", "app/deploy.yaml", "web")]
    assert notes(result) == [
        (
            "error",
            "app/kustomization.yaml",
            3,
            f'{REFUSED}resources[1] "{upload_pack(marker)}" {REMOTE}',
        )
    ]


@pytest.mark.parametrize("field", ["resources", "bases", "components"])
def test_a_refused_render_with_nothing_else_is_incomplete(tmp_path: Path, field: str) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    write(repo, {"app/kustomization.yaml": f"{field}:\n  - {upload_pack(marker)}\n"})
    result = scan(repo, "app")
    assert not marker.exists()
    assert result.returncode == 3, result.stdout + result.stderr
    assert [line for _, _, line, _ in notes(result)] == [2]


def test_premise_kubectl_fetches_generator_files(tmp_path: Path) -> None:
    with listening() as server:
        write(
            tmp_path,
            {
                "app/kustomization.yaml": (
                    f"configMapGenerator:\n  - name: leak\n    files: [x={server.url}/meta]\n"
                )
            },
        )
        built = _kubectl_kustomize(tmp_path / "app")
    assert server.requests == ["/meta"], built.stderr
    assert "instance-metadata-secret" in built.stdout


def test_no_field_fetches_a_url(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    with listening() as server:
        url = server.url
        write(
            repo,
            {
                "app/kustomization.yaml": f"""\
resources:
  - {url}/resource.yaml
crds:
  - {url}/crd.json
configurations:
  - {url}/config.yaml
patches:
  - path: {url}/patch.yaml
patchesJson6902:
  - target: {{kind: Deployment, name: web}}
    path: {url}/json6902.yaml
patchesStrategicMerge:
  - {url}/smp.yaml
replacements:
  - path: {url}/replacement.yaml
openapi:
  path: {url}/openapi.json
configMapGenerator:
  - name: a
    files:
      - x={url}/files
    envs:
      - {url}/envs
  - name: b
    env: {url}/env
secretGenerator:
  - name: c
    files: [{url}/secret]
""",
                "app/deploy.yaml": PRIVILEGED,
            },
        )
        result = scan(repo, "app")
    assert server.requests == []
    assert "instance-metadata-secret" not in result.stdout
    assert findings(result) == [("PG301", "app/deploy.yaml", "web")]  # still scanned
    refused = [(line, message.removeprefix(REFUSED)) for _, _, line, message in notes(result)]
    assert refused == [
        (2, f'resources[0] "{url}/resource.yaml" {REMOTE}'),
        (4, f'crds[0] "{url}/crd.json" {REMOTE}'),
        (6, f'configurations[0] "{url}/config.yaml" {REMOTE}'),
        (8, f'patches[0].path "{url}/patch.yaml" {REMOTE}'),
        (11, f'patchesJson6902[0].path "{url}/json6902.yaml" {REMOTE}'),
        (13, f'patchesStrategicMerge[0] "{url}/smp.yaml" {REMOTE}'),
        (15, f'replacements[0].path "{url}/replacement.yaml" {REMOTE}'),
        (17, f'openapi.path "{url}/openapi.json" {REMOTE}'),
        (21, f'configMapGenerator[0].files[0] "x={url}/files" {REMOTE}'),
        (23, f'configMapGenerator[0].envs[0] "{url}/envs" {REMOTE}'),
        (25, f'configMapGenerator[1].env "{url}/env" {REMOTE}'),
        (28, f'secretGenerator[0].files[0] "{url}/secret" {REMOTE}'),
    ]


def test_nothing_outside_the_checkout_is_built(tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(
        other,
        {
            "kustomization.yaml": "resources: [ns.yaml]\n",
            "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: leaked\n",
        },
    )
    (other / ".git").mkdir()
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": (
                f"resources:\n  - file://{other}\n  - {other}/ns.yaml\n  - ../../other\n"
                "  - ../escape\n"
            ),
        },
    )
    (repo / "escape").symlink_to(other)  # a base inside the repository, by its name
    result = scan(repo, "app")
    assert "leaked" not in result.stdout
    assert result.returncode == 3
    assert [(line, message.removeprefix(REFUSED)) for _, _, line, message in notes(result)] == [
        (2, f'resources[0] "file://{other}" {REMOTE}'),
        (3, f'resources[1] "{other}/ns.yaml" is an absolute path'),
        (4, 'resources[2] "../../other" leads outside the repository'),
        (5, 'resources[3] "../escape" leads outside the repository'),
    ]


def test_nothing_in_git_is_read(tmp_path: Path) -> None:
    """``.git/config`` holds the checkout's token on a CI runner."""
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": """\
configMapGenerator:
  - name: token
    files: [config=../.git/config, linked]
patches:
  - path: ../.git/config
""",
        },
    )
    (repo / "app" / "linked").symlink_to(repo / ".git" / "config")
    result = scan(repo, "app")
    assert "c2VjcmV0LXRva2Vu" not in result.stdout + result.stderr
    assert [(line, message.removeprefix(REFUSED)) for _, _, line, message in notes(result)] == [
        (
            3,
            'configMapGenerator[0].files[0] "config=../.git/config" leads into the repository\'s .git',
        ),
        (3, 'configMapGenerator[0].files[1] "linked" leads into the repository\'s .git'),
        (5, 'patches[0].path "../.git/config" leads into the repository\'s .git'),
    ]


def test_premise_kubectl_reads_keys_in_any_case(tmp_path: Path) -> None:
    """Go's JSON decoding matches keys regardless of case, so a key that is not spelled
    ``resources`` can still be ``resources``."""
    write(
        tmp_path,
        {
            "app/kustomization.yaml": "Resources: [cm.yaml]\nre\u017fources: [cm2.yaml]\n",
            "app/cm.yaml": CONFIGMAP.format(name="upper"),
            "app/cm2.yaml": CONFIGMAP.format(name="long-s"),
        },
    )
    built = _kubectl_kustomize(tmp_path / "app")
    assert "name: long-s" in built.stdout, built.stderr


def test_keys_in_another_spelling_are_refused(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    with listening() as server:
        write(
            repo,
            {
                "app/kustomization.yaml": (
                    f"Resources:\n  - {upload_pack(marker)}\n"
                    f"patches:\n  - Path: {server.url}/patch.yaml\n"
                    "re\u017fources: [x]\n"
                ),
            },
        )
        result = scan(repo, "app")
    assert not marker.exists() and server.requests == []
    known = "(poolgate builds only the fields it checks)"
    assert [(line, message.removeprefix(REFUSED)) for _, _, line, message in notes(result)] == [
        (1, f'unknown field "Resources" {known}'),
        (4, 'patches[0]: unknown field "Path"'),
        (5, f'unknown field "re\\u017fources" {known}'),
    ]


def test_plugin_and_helm_fields_are_refused(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": """\
generators: [gen.yaml]
transformers: [tr.yaml]
validators: [val.yaml]
helmCharts:
  - name: x
    repo: https://charts.example.com
helmGlobals: {chartHome: charts}
helmChartInflationGenerator: []
""",
            "app/gen.yaml": "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: g}\n",
        },
    )
    result = scan(repo, "app")
    assert result.returncode == 3
    enable_helm = "(poolgate never passes --enable-helm)"
    assert [(line, message.removeprefix(REFUSED)) for _, _, line, message in notes(result)] == [
        (1, "generators would run plugins"),
        (2, "transformers would run plugins"),
        (3, "validators would run plugins"),
        (4, f"helmCharts would inflate Helm charts {enable_helm}"),
        (7, f"helmGlobals configures Helm charts {enable_helm}"),
        (8, f"helmChartInflationGenerator would inflate Helm charts {enable_helm}"),
    ]
    # Not rendered: the directory's files are scanned as plain manifests (gen.yaml).
    assert report(result)["summary"]["objects"] == 1


def test_a_hostile_base_is_refused_at_its_own_line(tmp_path: Path) -> None:
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    write(
        repo,
        {
            "app/kustomization.yaml": "resources:\n  - ../base\n",
            "base/kustomization.yaml": f"namePrefix: x-\nresources:\n  - {upload_pack(marker)}\n",
        },
    )
    result = scan(repo, "app")
    assert not marker.exists()
    assert notes(result) == [
        (
            "error",
            "base/kustomization.yaml",
            3,
            f'{REFUSED}resources[0] "{upload_pack(marker)}" {REMOTE}',
        )
    ]


def test_yaml_spellings_do_not_hide_an_entry(tmp_path: Path) -> None:
    """Merge keys, aliases, ``!!binary`` and duplicate keys are read as Kubernetes (and
    Kustomize) read them, so the entry they spell is checked."""
    repo = repository(tmp_path)
    marker = tmp_path / "PWNED"
    encoded = base64.b64encode(upload_pack(marker).encode()).decode()
    write(
        repo,
        {
            "merge/kustomization.yaml": f"<<: {{resources: [{upload_pack(marker)}]}}\n",
            "alias/kustomization.yaml": f"namePrefix: &u {upload_pack(marker)}\nresources: [*u]\n",
            "binary/kustomization.yaml": f"resources: [!!binary {encoded}]\n",
            "twice/kustomization.yaml": f"resources: [a.yaml]\nresources: [{upload_pack(marker)}]\n",
        },
    )
    result = scan(repo, "merge", "alias", "binary", "twice")
    assert not marker.exists()
    refused = sorted({uri for _, uri, _, _ in notes(result)})
    assert refused == [
        "alias/kustomization.yaml",
        "binary/kustomization.yaml",
        "merge/kustomization.yaml",
        "twice/kustomization.yaml",
    ]
    assert any("duplicate key 'resources'" in message for *_, message in notes(result))


def test_the_walk_is_bounded(tmp_path: Path) -> None:
    """A chain of bases longer than the limit, and a huge kustomization, are refused
    after reading a bounded amount (at most MAX_KUSTOMIZATIONS files of MAX_BYTES)."""
    repo = repository(tmp_path)
    limit = kustomization.MAX_KUSTOMIZATIONS
    files = {
        f"chain/k{index}/kustomization.yaml": f"resources: [../k{index + 1}]\n"
        for index in range(limit + 5)
    }
    files["big/kustomization.yaml"] = "resources: []\n" + "#" * kustomization.MAX_BYTES + "\n"
    write(repo, files)
    result = scan(repo, "chain/k0", "big")
    assert result.returncode == 3
    assert [(uri, message) for _, uri, _, message in notes(result)] == [
        (
            "chain/k0/kustomization.yaml",
            f"Kustomization chain/k0 not rendered: builds in more than {limit} kustomizations (limit)",
        ),
        (
            "big/kustomization.yaml",
            "Kustomization big not rendered: kustomization.yaml is larger than 1 MiB",
        ),
    ]


def test_named_pipes_do_not_block_the_build(tmp_path: Path) -> None:
    """kustomize would wait forever reading a pipe named as a resource or as a base's
    kustomization (the render timeout is minutes); both are refused before it starts."""
    repo = repository(tmp_path)
    write(repo, {"app/kustomization.yaml": "resources: [pipe.yaml, ../base]\n", "base/x.yaml": ""})
    os.mkfifo(repo / "app" / "pipe.yaml")
    os.mkfifo(repo / "base" / "kustomization.yaml")
    result = poolgate("scan", "app", "--format", "json", cwd=repo, env=render_env(), timeout=60)
    not_regular = "is not a regular file (a named pipe, socket or device would block the build)"
    errors = [
        (uri, line, message.removeprefix(REFUSED))
        for level, uri, line, message in notes(result)
        if level == "error"
    ]
    assert errors == [
        ("app/kustomization.yaml", 1, f'resources[0] "pipe.yaml" {not_regular}'),
        ("base/kustomization.yaml", None, f"kustomization.yaml {not_regular}"),
    ]


def test_every_local_loading_field_still_renders(tmp_path: Path) -> None:
    """No false refusal: a kustomization using each field that loads a file, locally,
    renders with the real kubectl and names every file it uses."""
    repo = repository(tmp_path)
    write(
        repo,
        {
            "app/kustomization.yaml": """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
metadata:
  name: app
namespace: team-a
namePrefix: p-
labels:
  - pairs: {team: a}
commonAnnotations: {owner: team-a}
resources: [deploy.yaml]
components: [../comp]
crds: [crd.json]
configurations: [config.yaml]
patches:
  - path: patch.yaml
patchesStrategicMerge:
  - smp.yaml
  - |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      annotations: {docs: "https://example.com/docs"}
patchesJson6902:
  - target: {group: apps, version: v1, kind: Deployment, name: web}
    path: json6902.yaml
replacements:
  - path: replacement.yaml
configMapGenerator:
  - name: settings
    files: [settings.conf, key=data.txt]
    envs: [vars.env]
    literals: [mode=train]
secretGenerator:
  - name: creds
    env: secret.env
generatorOptions: {disableNameSuffixHash: true}
images: [{name: busybox, digest: "sha256:%s"}]
replicas: [{name: web, count: 2}]
""".replace("%s", "a" * 64),
            "app/deploy.yaml": PRIVILEGED.replace("busybox@sha256:" + "a" * 64, "busybox").replace(
                "  namespace: team-a\n", ""
            ),
            "app/crd.json": "{}\n",
            "app/config.yaml": "namePrefix:\n  - path: metadata/name\n",
            "app/patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {patched: 'yes'}\n",
            "app/smp.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations: {smp: 'yes'}\n",
            "app/json6902.yaml": "- op: add\n  path: /metadata/annotations/json6902\n  value: 'yes'\n",
            "app/replacement.yaml": (
                "source: {kind: ConfigMap, name: settings, fieldPath: data.mode}\n"
                "targets:\n  - select: {kind: Deployment}\n    fieldPaths: [metadata.annotations.mode]\n"
                "    options: {create: true}\n"
            ),
            "app/settings.conf": "a=1\n",
            "app/data.txt": "data\n",
            "app/vars.env": "X=1\n",
            "app/secret.env": "PASSWORD=hunter2\n",
            "comp/kustomization.yaml": (
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n"
            ),
            "comp/cm.yaml": CONFIGMAP.format(name="from-component"),
        },
    )
    result = scan(repo, "app")
    assert notes(result) == []
    assert findings(result) == [("PG301", "app/deploy.yaml", "p-web")]
    assert report(result)["summary"]["objects"] == 4  # deployment, two ConfigMaps, Secret


@pytest.mark.parametrize(
    "entry",
    [
        "file:///x?ref=--upload-pack=touch%20/tmp/m%20%23",
        "FILE:///x",
        "git::file:///x",
        "GIT::https://example.com/x",
        "ssh://git@example.com/acme/x",
        "https://github.com/acme/x//base?ref=v1",
        "github.com/acme/x/base",
        "GitHub.com/acme/x",
        "github.com:acme/x",
        "gitlab.com/acme/x",
        "git@github.com:acme/x.git",
        "user@example.com/acme/x/base",
        "gh:acme/x",
        "acme/x?ref=v1",
        "a:b",
        "https:/example.com/x",
    ],
)
def test_every_remote_spelling_is_refused(tmp_path: Path, entry: str) -> None:
    """Kustomize's ``NewRepoSpecFromURL`` and ``IsRemoteFile`` accept these (or their
    close relatives); a local name that looks like one is written ``./name``."""
    repo = repository(tmp_path)
    write(repo, {"app/kustomization.yaml": f"resources:\n  - {entry!r}\n"})
    build = kustomization.check(repo / "app", repo)
    assert [refusal.message for refusal in build.refusals] == [f'resources[0] "{entry}" {REMOTE}']


@pytest.mark.parametrize(
    "entry",
    [
        "deploy.yaml",
        "./system:aggregate.yaml",
        "sub/a@b.yaml",
        "sub/x:y.yaml",
        "../app/deploy.yaml",
    ],
)
def test_local_spellings_are_not_refused(tmp_path: Path, entry: str) -> None:
    repo = repository(tmp_path)
    write(repo, {"app/kustomization.yaml": f"resources:\n  - {entry!r}\n"})
    assert kustomization.check(repo / "app", repo).refusals == []
