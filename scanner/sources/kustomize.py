"""Kustomizations: render with ``kustomize build`` (or ``kubectl kustomize``).

One build per kustomization directory, with no ``--enable-exec``,
``--enable-alpha-plugins`` or ``--enable-helm`` and ``KUSTOMIZE_PLUGIN_HOME``
pointed at an empty directory, so nothing from the scanned tree is executed.
``kustomize`` is preferred; ``kubectl kustomize`` (the same engine, built into
kubectl) is used when only kubectl is on PATH. Without either, the directory is
reported as not rendered (the run is incomplete) and the scan goes on.

Mapping back to files. The build runs on a temporary wrapper kustomization whose
only resource is the scanned directory and which asks for Kustomize's
``originAnnotations`` build metadata: every rendered object then names the file it
came from (``config.kubernetes.io/origin``). poolgate removes that annotation
again, so rules see the object exactly as ``kustomize build`` of the directory
would print it, and points each object at its resource file:

* the object is found in that file by kind and name (the rendered name contains
  the original one: ``namePrefix``/``nameSuffix``); findings then point at the
  field's own line in the file, or at the nearest enclosing field the file has
  (a field an overlay patched in points at its parent in the base);
* objects made by a generator (``configMapGenerator``) point at line 1 of the
  kustomization that configures them, as do objects from remote bases and
  objects that cannot be found in their file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import yaml

from scanner.inventory import Inventory, KubeObject, ReadError
from scanner.sources.rendered import (
    KUSTOMIZATION_FILES,
    RenderFailed,
    RenderOptions,
    SourceSpot,
    isolated_env,
    link_escapes,
    not_installed,
    remap,
    repo_uri,
    repository_of,
    run_tool,
    scratch_dir,
    which,
)
from scanner.sources.yamldoc import parse_plain, parse_stream

INSTALL_URL: Final = "https://kubectl.docs.kubernetes.io/installation/kustomize/"
SOURCE_TYPE: Final = "kustomize"
ORIGIN_ANNOTATION: Final = "config.kubernetes.io/origin"
WRAPPER_DIR: Final = "wrapper"


def render(directory: Path, repo_root: Path, options: RenderOptions) -> Inventory:
    """Build one kustomization directory; problems become a ``ReadError`` on it."""
    uri = repo_uri(directory, repo_root)
    tool = which("kustomize", "kubectl")
    if tool is None:
        return Inventory(
            read_errors=[
                not_installed(uri, "Kustomization", "`kustomize` (or `kubectl`)", INSTALL_URL)
            ]
        )
    escaped = link_escapes(directory, repo_root)
    if escaped is not None:
        where = repo_uri(escaped, repo_root)
        message = f"Kustomization not rendered: symbolic link {where} points outside the repository"
        return Inventory(read_errors=[ReadError(uri, message)])
    outside = reference_outside(directory, repo_root)
    if outside is not None:
        kustomization, entry = outside
        message = (
            f"Kustomization not rendered: {repo_uri(kustomization, repo_root)} refers to "
            f"{json.dumps(entry)}, outside the repository"
        )
        return Inventory(read_errors=[ReadError(uri, message)])
    with scratch_dir() as scratch:
        real_scratch = os.path.realpath(scratch)
        wrapper = Path(real_scratch, WRAPPER_DIR)
        plugins = Path(real_scratch, "plugins")
        wrapper.mkdir()
        plugins.mkdir()
        (wrapper / "kustomization.yaml").write_text(wrapper_kustomization(directory, wrapper))
        argv = (
            [tool, "kustomize", str(wrapper)]
            if Path(tool).name.startswith("kubectl")
            else [tool, "build", str(wrapper)]
        )
        env = isolated_env({"KUSTOMIZE_PLUGIN_HOME": str(plugins)})
        try:
            text = run_tool(argv, env, directory, options.timeout)
        except RenderFailed as error:
            message = f"Kustomization not rendered: kustomize build failed: {error}"
            return Inventory(read_errors=[ReadError(uri, message)])
    return map_output(text, wrapper, directory, repo_root)


REFERENCE_KEYS: Final = (
    "resources",
    "bases",
    "components",
    "generators",
    "transformers",
    "validators",
)
"""Kustomization fields naming other kustomizations (or files) that are built in."""

_REMOTE: Final = ("github.com/", "gitlab.com/", "bitbucket.org/", "git@", "gh:")
_KUSTOMIZATION_LIMIT: Final = 1024 * 1024


def reference_outside(directory: Path, repo_root: Path) -> tuple[Path, str] | None:
    """A local resource, base or component of the kustomization in ``directory``, or of
    one it builds in (recursively), that lies outside the repository: the file naming
    it and the entry as written. Kustomize keeps files a kustomization loads under its
    own directory, but follows ``../`` to other kustomizations anywhere, and a pull
    request must not build files of the machine into the scan. Remote bases (URLs with
    no such path on disk) are left to kustomize; an unreadable kustomization to its
    error."""
    root = Path(os.path.realpath(repository_of(directory, repo_root)))
    pending = [Path(os.path.realpath(directory))]
    seen: set[Path] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        file = _kustomization_file(current)
        entries = _references(file) if file != current else []
        for entry in entries:
            local = current / entry
            # Kustomize loads what exists on disk, whatever it looks like
            # ("github.com/../../x" beside a github.com/ directory); only the rest
            # may be fetched.
            if not os.path.lexists(local) and ("://" in entry or entry.startswith(_REMOTE)):
                continue
            target = Path(os.path.realpath(local))
            if target != root and root not in target.parents:
                return file, entry
            if target.is_dir():
                pending.append(target)
    return None


def _references(file: Path) -> list[str]:
    try:
        with open(file, "rb") as handle:
            data = handle.read(_KUSTOMIZATION_LIMIT + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if len(data) > _KUSTOMIZATION_LIMIT:
        return []
    documents, _ = parse_plain(text)  # as manifests are read: no tag honoured, bounded
    document = documents[0][0] if documents else None
    if not isinstance(document, Mapping):
        return []
    return [
        entry
        for key in REFERENCE_KEYS
        if isinstance(document.get(key), list)
        for entry in document[key]
        if isinstance(entry, str) and entry
    ]


def wrapper_kustomization(directory: Path, wrapper: Path) -> str:
    """A kustomization that builds ``directory`` unchanged and records each object's origin.

    Kustomize refuses absolute resource paths, so the path is relative to the wrapper.
    """
    relative = os.path.relpath(os.path.realpath(directory), wrapper)
    # JSON strings are YAML strings: no quoting surprises from odd directory names.
    return (
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {json.dumps(relative)}\n"
        "buildMetadata: [originAnnotations]\n"
    )


def map_output(text: str, wrapper: Path, directory: Path, repo_root: Path) -> Inventory:
    """Parse build output made through ``wrapper``; re-home objects to their files."""
    rendered = parse_stream(text, f"{repo_uri(directory, repo_root)} (rendered)")
    fallback = SourceSpot(repo_uri(_kustomization_file(directory), repo_root))
    resources = _Resources(repo_root)
    spots: dict[tuple[int, int], SourceSpot] = {}
    objects: list[KubeObject] = []
    for obj in rendered.objects:
        origin = _origin_of(obj.body)
        spot = fallback
        if origin is not None:
            spot = resources.spot(obj, origin, wrapper) or fallback
        spots[(obj.origin.document_index, obj.origin.line)] = spot
        objects.append(replace(obj, body=_without_origin(obj.body)))
    rendered.objects = objects

    def spot_for(obj: KubeObject | None, line: int) -> SourceSpot:
        if obj is None:
            return fallback
        return spots.get((obj.origin.document_index, obj.origin.line), fallback)

    return remap(rendered, spot_for, SOURCE_TYPE)


def _kustomization_file(directory: Path) -> Path:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    return directory


def _origin_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    metadata = body.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    value = annotations.get(ORIGIN_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(value, str):
        return None
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _without_origin(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` without the origin annotation the wrapper asked for (a new dict)."""
    result = dict(body)
    metadata = result.get("metadata")
    if not isinstance(metadata, Mapping):
        return result
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping) or ORIGIN_ANNOTATION not in annotations:
        return result
    kept = {key: value for key, value in annotations.items() if key != ORIGIN_ANNOTATION}
    new_metadata = {key: value for key, value in metadata.items() if key != "annotations"}
    if kept:
        new_metadata["annotations"] = kept
    result["metadata"] = new_metadata
    return result


class _Resources:
    """Resource files named by origin annotations, parsed once each."""

    def __init__(self, repo_root: Path) -> None:
        self._root = Path(os.path.realpath(repo_root))
        self._repo_root = repo_root
        self._parsed: dict[Path, list[KubeObject]] = {}

    def spot(self, obj: KubeObject, origin: Mapping[str, Any], wrapper: Path) -> SourceSpot | None:
        if "repo" in origin:
            return None  # a remote base: nothing in the checkout to point at
        path_value = origin.get("path", origin.get("configuredIn"))
        if not isinstance(path_value, str) or not path_value:
            return None
        path = Path(os.path.normpath(os.path.join(wrapper, path_value)))
        if self._root not in path.parents or not path.is_file():
            return None
        uri = repo_uri(path, self._repo_root)
        if "path" not in origin:
            return SourceSpot(uri)  # generated: the kustomization that configures it
        match = _find(self._objects(path, uri), obj)
        if match is None:
            return SourceSpot(uri)
        return SourceSpot(uri, match.origin.line, match.lines)

    def _objects(self, path: Path, uri: str) -> list[KubeObject]:
        if path not in self._parsed:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = ""
            self._parsed[path] = parse_stream(text, uri).objects
        return self._parsed[path]


def _find(candidates: list[KubeObject], rendered: KubeObject) -> KubeObject | None:
    """The object in a resource file that ``rendered`` was built from, if unambiguous."""
    same_kind = [obj for obj in candidates if obj.kind == rendered.kind and obj.name]
    exact = [obj for obj in same_kind if obj.name == rendered.name]
    if len(exact) == 1:
        return exact[0]
    contained = [obj for obj in same_kind if obj.name in rendered.name]
    return contained[0] if len(contained) == 1 else None
