"""Helm charts: render with ``helm template``, map each object back to its template.

Before Helm starts, the chart is checked (``helmcheck.py``): a dependency that is not
vendored in ``charts/``, a ``values.schema.json`` reference that leaves the schema, or
a symbolic link out of the chart refuses the render, one error notification each.
Then one ``helm template <release> <copy> --namespace <ns> [--values F]... [--set
K=V]...`` per chart, on a private copy of the chart (its regular files, no ``.git``),
never with ``--post-renderer``, ``--dependency-update`` or ``--enable-dns``, in a
sandbox (``sandbox.py``: no git or plugin binaries on PATH, a short list of
environment variables, no network where the platform allows) with ``HELM_PLUGINS``
(and Helm's cache, config and data homes) empty directories and ``HELM_NO_PLUGINS``
set, so no plugin or repository setting takes part. The release name is the chart
directory's name, made a valid release name. Without ``helm`` on PATH the chart is
reported as not rendered (the run is incomplete) and the scan goes on.

Helm writes ``# Source: <chart>/templates/x.yaml`` before every document, so each
object's URI is ``<chart dir>/templates/x.yaml`` relative to the repository root
(subcharts: ``<chart dir>/charts/<sub>/templates/x.yaml``). The template is Go
template text, not YAML, so no field line in it can be known for sure; every
finding on an object points at the object's ``kind:`` line in its template when
that line can be found unambiguously:

* the only ``kind: <Kind>`` line of the template; else
* among several, the one whose document has a literal ``name: <name>`` under
  ``metadata:``; else
* by order, when the template has as many ``kind: <Kind>`` lines as the render
  produced objects of that kind from it (Helm keeps a template's documents in
  order within a kind);
* otherwise line 1 of the template.

A template that no longer exists on disk (a subchart packaged as ``.tgz``) maps
to the chart's ``Chart.yaml``, line 1.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Final

from scanner.inventory import Inventory, KubeObject, ReadError
from scanner.kinds.resources import RESOURCES
from scanner.sources import helmcheck, sandbox
from scanner.sources.rendered import (
    CHART_FILE,
    RenderFailed,
    RenderOptions,
    SourceSpot,
    not_installed,
    remap,
    repo_uri,
    run_tool,
    scratch_dir,
    which,
)
from scanner.sources.yaml.document import parse_stream

INSTALL_URL: Final = "https://helm.sh/docs/intro/install/"
SOURCE_TYPE: Final = "helm"
_SOURCE = re.compile(r"^# Source: (\S.*?)\s*$")
_SEPARATOR = re.compile(r"^---(?:\s|$)")
_KIND = re.compile(r"""^kind:[ \t]*["']?([A-Za-z0-9]+)["']?[ \t]*(?:#.*)?$""")
_METADATA = re.compile(r"^metadata:[ \t]*(?:#.*)?$")
_NAME = re.compile(r"""^[ \t]+name:[ \t]*["']?([^"'#\s]+)["']?[ \t]*(?:#.*)?$""")
_RELEASE_CHARS = re.compile(r"[^a-z0-9-]+")


def render(chart: Path, repo_root: Path, options: RenderOptions) -> Inventory:
    """Check and render one chart directory; problems become a ``ReadError`` on the chart."""
    uri = repo_uri(chart, repo_root)
    refused = [
        ReadError(
            repo_uri(problem.path, repo_root),
            f"Helm chart {uri} not rendered: {problem.message}",
            problem.line,
        )
        for problem in helmcheck.problems(chart)
    ]
    if refused:
        return Inventory(read_errors=refused)
    helm = which("helm")
    if helm is None:
        return Inventory(read_errors=[not_installed(uri, "Helm chart", "`helm`", INSTALL_URL)])
    with scratch_dir() as scratch:
        real_scratch = Path(os.path.realpath(scratch))
        copy = real_scratch / "chart" / Path(os.path.abspath(chart)).name
        copy.parent.mkdir()
        homes = {
            name: str(real_scratch / name.lower())
            for name in ("HELM_PLUGINS", "HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")
        }
        for path in homes.values():
            os.mkdir(path)
        try:
            helmcheck.private_copy(chart, copy)
            argv, env = sandbox.prepare(
                helm,
                command(helm, copy, options, release_name(chart))[1:],
                real_scratch,
                {**homes, "HELM_NO_PLUGINS": "1"},
            )
            text = run_tool(argv, env, copy, options.timeout)
        except helmcheck.Refused as error:
            return Inventory(read_errors=[ReadError(uri, f"Helm chart not rendered: {error}")])
        except RenderFailed as error:
            message = f"Helm chart not rendered: helm template failed: {error}"
            return Inventory(read_errors=[ReadError(uri, message)])
    return placed(map_output(text, chart, repo_root), options.helm_namespace)


NAMESPACED_KINDS: Final = frozenset(
    {resource.kind for resource in RESOURCES if resource.namespaced}
    | {"Service", "Secret", "PersistentVolumeClaim", "Ingress", "HorizontalPodAutoscaler"}
    | {"PodDisruptionBudget", "Endpoints", "LimitRange", "ResourceQuota", "Lease"}
)
"""Kinds that live in a namespace: those poolgate lists, and the common core ones."""


def placed(inventory: Inventory, namespace: str) -> Inventory:
    """Objects of namespaced kinds that the chart leaves without ``metadata.namespace``
    in ``namespace``, where ``helm install --namespace`` puts them: ``helm template``
    writes the namespace only where a template spells ``.Release.Namespace``, and a
    chart's privileged DaemonSet must be judged in gpu-operator, not in default.
    Kinds poolgate does not know the scope of are left as written."""
    for position, obj in enumerate(inventory.objects):
        metadata = obj.body.get("metadata")
        if obj.kind in NAMESPACED_KINDS and isinstance(metadata, dict) and not obj.namespace:
            body = {**obj.body, "metadata": {**metadata, "namespace": namespace}}
            inventory.objects[position] = replace(obj, body=body)
    return inventory


def command(
    helm: str, chart: Path, options: RenderOptions, release: str | None = None
) -> list[str]:
    """The ``helm template`` command line (values files made absolute: cwd is the chart).

    ``release`` defaults to ``release_name(chart)``; a private copy keeps the name of
    the chart it copies.
    """
    argv = [
        helm,
        "template",
        release or release_name(chart),
        os.path.abspath(chart),
        "--namespace",
        options.helm_namespace,
    ]
    for values in options.helm_values:
        argv += ["--values", os.path.abspath(values)]
    for assignment in options.helm_set:
        argv += ["--set", assignment]
    return argv


def release_name(chart: Path) -> str:
    """The chart directory's name as a Helm release name (lower-case DNS label, ≤ 53)."""
    name = _RELEASE_CHARS.sub("-", Path(os.path.abspath(chart)).name.lower()).strip("-")
    return name[:53].rstrip("-") or "release"


def map_output(text: str, chart: Path, repo_root: Path) -> Inventory:
    """Parse ``helm template`` output and re-home each object to its template file."""
    chart_uri = repo_uri(chart, repo_root)
    rendered = parse_stream(text, f"{chart_uri} (rendered)")
    sources = _SourceIndex(text)
    templates = _Templates(chart)

    # Order within (template, kind), and how many objects each pair produced.
    ordinals: dict[tuple[int, int], int] = {}
    counts: dict[tuple[str, str], int] = {}
    for obj in rendered.objects:
        key = (sources.at(obj.origin.line), obj.kind)
        ordinals[(obj.origin.document_index, obj.origin.line)] = counts.get(key, 0)
        counts[key] = counts.get(key, 0) + 1

    def spot_for(obj: KubeObject | None, line: int) -> SourceSpot:
        source = sources.at(line)
        template = templates.file(source)
        if template is None:
            return SourceSpot(repo_uri(chart / CHART_FILE, repo_root))
        uri = repo_uri(template, repo_root)
        if obj is None:
            return SourceSpot(uri)
        ordinal = ordinals[(obj.origin.document_index, obj.origin.line)]
        found = locate(
            templates.text(template), obj.kind, obj.name, ordinal, counts[(source, obj.kind)]
        )
        return SourceSpot(uri, found)

    return remap(rendered, spot_for, SOURCE_TYPE)


class _SourceIndex:
    """Which ``# Source:`` comment a rendered line belongs to ("" for none)."""

    def __init__(self, text: str) -> None:
        self._lines: list[int] = []
        self._sources: list[str] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if _SEPARATOR.match(line):
                self._lines.append(number)
                self._sources.append("")
            else:
                match = _SOURCE.match(line)
                if match:
                    self._lines.append(number)
                    self._sources.append(match.group(1))

    def at(self, line: int) -> str:
        index = bisect.bisect_left(self._lines, line) - 1
        return self._sources[index] if index >= 0 else ""


class _Templates:
    """Template files of one chart, resolved from ``# Source:`` paths and read once."""

    def __init__(self, chart: Path) -> None:
        self._chart = Path(os.path.realpath(chart))
        self._texts: dict[Path, str] = {}

    def file(self, source: str) -> Path | None:
        """``<chart>/templates/x.yaml`` -> the file under the chart directory, if it exists."""
        parts = source.split("/")
        if len(parts) < 2 or ".." in parts:
            return None
        path = self._chart.joinpath(*parts[1:])
        if self._chart not in path.parents or not path.is_file():
            return None
        return path

    def text(self, path: Path) -> str:
        if path not in self._texts:
            try:
                self._texts[path] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self._texts[path] = ""
        return self._texts[path]


def locate(template: str, kind: str, name: str, ordinal: int, count: int) -> int:
    """The 1-based line of an object's ``kind:`` line in its template, or 1 (module doc)."""
    candidates: list[tuple[int, int]] = []  # (line, document)
    names: dict[int, str] = {}  # document -> literal metadata.name
    document = 0
    in_metadata = False
    for number, line in enumerate(template.splitlines(), start=1):
        if _SEPARATOR.match(line):
            document += 1
            in_metadata = False
            continue
        kind_match = _KIND.match(line)
        if kind_match and kind_match.group(1) == kind:
            candidates.append((number, document))
        if _METADATA.match(line):
            in_metadata = True
        elif in_metadata and line[:1] not in (" ", "\t", "", "#"):
            in_metadata = False
        elif in_metadata and document not in names:
            name_match = _NAME.match(line)
            if name_match:
                names[document] = name_match.group(1)
    if len(candidates) == 1:
        return candidates[0][0]
    if not candidates:
        return 1
    named = [line for line, doc in candidates if names.get(doc) == name]
    if len(named) == 1:
        return named[0]
    if count == len(candidates) and 0 <= ordinal < count:
        return candidates[ordinal][0]
    return 1
