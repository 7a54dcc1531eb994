"""Kustomizations: render with ``kustomize build`` (or ``kubectl kustomize``).

Before anything runs, the kustomization and every one it builds in are checked
(``kustomization.py``): a remote base, a URL, an absolute path, a path out of the
repository or into its ``.git``, a plugin or Helm field, or a key poolgate does not
know refuses the build, one error notification per problem at its line. Then one
build per kustomization directory, with no ``--enable-exec``,
``--enable-alpha-plugins`` or ``--enable-helm``, ``KUSTOMIZE_PLUGIN_HOME`` an empty
directory, and the tool in a sandbox (``sandbox.py``: no git on its PATH, a short
list of environment variables, no network where the platform allows). ``kustomize``
is preferred; ``kubectl kustomize`` (the same engine, built into kubectl) is used when
only kubectl is on PATH.

Nothing hides. ``kubectl apply -R -f DIR`` would apply every manifest file of the
directory, and ``kustomize build`` only those a field names: a file of the directory
(or of a base below it) that the build does not name is scanned as a plain manifest,
with a warning naming it. A kustomization that is not rendered (refused, failed, no
tool) has its files scanned as plain manifests too, except those it names as data
(patches, generator sources): the run is then incomplete. Charts and kustomizations
below the directory that the build does not reach are rendered on their own.

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
  kustomization that configures them, as do objects that cannot be found in their
  file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from scanner.inventory import Inventory, KubeObject, ReadError, SourceWarning
from scanner.sources import kustomization, sandbox
from scanner.sources.rendered import (
    KUSTOMIZATION_FILES,
    KUSTOMIZE,
    RenderFailed,
    RenderOptions,
    SourceSpot,
    directory_kind,
    link_escapes,
    not_installed,
    remap,
    repo_uri,
    run_tool,
    scratch_dir,
    which,
)
from scanner.sources.yaml.document import parse_stream

if TYPE_CHECKING:
    from scanner.sources.files import Excluded

INSTALL_URL: Final = "https://kubectl.docs.kubernetes.io/installation/kustomize/"
SOURCE_TYPE: Final = "kustomize"
ORIGIN_ANNOTATION: Final = "config.kubernetes.io/origin"
WRAPPER_DIR: Final = "wrapper"
MAX_REFUSALS: Final = 20
"""Refusals reported for one kustomization; more are counted in one last line."""
SCANNED_PLAIN: Final = "its files were scanned as plain manifests"


@dataclass(slots=True)
class Session:
    """What the kustomization renders of one scan share."""

    max_file_size: int
    excluded: Excluded
    """What the scan never reads as a manifest (``files.Excluded``: config files)."""
    parsed: dict[Path, kustomization.Parsed] = field(default_factory=dict)
    """Kustomization files read so far (overlays share their bases)."""
    plain: set[Path] = field(default_factory=set)
    """Files already scanned as plain manifests (real paths): each once."""
    nested: list[Path] = field(default_factory=list)
    """Charts and kustomizations found inside a rendered directory, to render on their own."""


def render(directory: Path, repo_root: Path, options: RenderOptions, session: Session) -> Inventory:
    """Check and build one kustomization directory, then scan the files it leaves out.

    Problems become error notifications (``ReadError``) on the kustomization; see the
    module docstring for what is scanned when it is not rendered.
    """
    uri = repo_uri(directory, repo_root)
    build = kustomization.check(directory, repo_root, session.parsed)
    problems = refusal_errors(build, uri, repo_root)
    escaped = link_escapes(directory, repo_root)
    if escaped is not None:
        where = repo_uri(escaped, repo_root)
        message = f"Kustomization not rendered: symbolic link {where} points outside the repository"
        problems.append(ReadError(uri, message))
    if problems:
        inventory, rendered = Inventory(read_errors=problems), False
    else:
        inventory, rendered = _render_checked(directory, repo_root, options)
    inventory.extend(plain_files(directory, repo_root, build, session, rendered=rendered))
    return inventory


def _render_checked(
    directory: Path, repo_root: Path, options: RenderOptions
) -> tuple[Inventory, bool]:
    """Build a kustomization the checks passed: its objects, or why not; whether it built."""
    uri = repo_uri(directory, repo_root)
    tool = which("kustomize", "kubectl")
    if tool is None:
        tools = "`kustomize` (or `kubectl`)"
        error = not_installed(uri, "Kustomization", tools, INSTALL_URL, SCANNED_PLAIN)
        return Inventory(read_errors=[error]), False
    try:
        return _build(tool, directory, repo_root, options), True
    except RenderFailed as error:
        message = f"Kustomization not rendered: kustomize build failed: {error}"
        return Inventory(read_errors=[ReadError(uri, message)]), False


def refusal_errors(build: kustomization.Build, uri: str, repo_root: Path) -> list[ReadError]:
    """One error notification per refusal, at the kustomization file and line; capped."""
    errors = [
        ReadError(
            repo_uri(refusal.file, repo_root),
            kustomization.describe(refusal, uri),
            refusal.line,
        )
        for refusal in build.refusals[:MAX_REFUSALS]
    ]
    more = len(build.refusals) - MAX_REFUSALS
    if more > 0:
        errors.append(ReadError(uri, f"Kustomization {uri} not rendered: {more} more problems"))
    return errors


def _build(tool: str, directory: Path, repo_root: Path, options: RenderOptions) -> Inventory:
    """Run the build through the wrapper in a sandbox; ``RenderFailed`` if it fails."""
    with scratch_dir() as scratch:
        real_scratch = Path(os.path.realpath(scratch))
        wrapper = real_scratch / WRAPPER_DIR
        plugins = real_scratch / "plugins"
        wrapper.mkdir()
        plugins.mkdir()
        (wrapper / "kustomization.yaml").write_text(wrapper_kustomization(directory, wrapper))
        verb = "kustomize" if Path(tool).name.startswith("kubectl") else "build"
        argv, env = sandbox.prepare(
            tool, [verb, str(wrapper)], real_scratch, {"KUSTOMIZE_PLUGIN_HOME": str(plugins)}
        )
        text = run_tool(argv, env, directory, options.timeout)
    return map_output(text, wrapper, directory, repo_root)


def plain_files(
    directory: Path,
    repo_root: Path,
    build: kustomization.Build,
    session: Session,
    *,
    rendered: bool,
) -> Inventory:
    """The manifest files under ``directory`` that its build does not show, as plain
    manifests (``kubectl apply -R -f`` would apply them).

    Rendered: the files no field of the build names, each with a warning; the
    kustomizations below that the build reaches are walked the same way, other
    charts and kustomizations below go to ``session.nested``. Not rendered: every
    file except the data the kustomization names (patches, generator sources), and
    everything rendered below goes to ``session.nested``.
    """
    from scanner.sources.files import load_files, rendered_directory_files

    inventory = Inventory()
    left_out = build.inputs | (build.objects if rendered else set())
    kustomization_uri = repo_uri(_kustomization_file(directory), repo_root)
    pending = [directory]
    while pending:
        nested: list[Path] = []
        listed = rendered_directory_files(
            pending.pop(), repo_root, inventory, nested, session.excluded, session.max_file_size
        )
        for file in listed:
            real = Path(os.path.realpath(file))
            if file.name in KUSTOMIZATION_FILES or real in left_out or real in session.plain:
                continue
            session.plain.add(real)
            uri = repo_uri(file, repo_root)
            loaded = load_files([(file, uri)], session.max_file_size)
            if rendered and (loaded.objects or loaded.invalid):
                loaded.warnings.append(SourceWarning(uri, not_built(kustomization_uri)))
            inventory.extend(loaded)
        for below in nested:
            reached = Path(os.path.realpath(below)) in build.directories
            if rendered and reached and directory_kind(below) == KUSTOMIZE:
                pending.append(below)
            else:
                session.nested.append(below)
    return inventory


def not_built(kustomization_uri: str) -> str:
    """The warning on a manifest file that a rendered kustomization leaves out."""
    return (
        f"not named by {kustomization_uri} or the kustomizations it builds in: scanned as "
        "a plain manifest (`kubectl apply -R -f` would apply it)"
    )


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
