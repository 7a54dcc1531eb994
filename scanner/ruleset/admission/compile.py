"""Admission CEL compiled once, in the API server's admission environment.

Every expression of an admission policy is compiled at load by an engine that
declares what the API server gives a ValidatingAdmissionPolicy (``object``,
``oldObject``, ``request``, ``params``, ``namespaceObject``, ``authorizer``,
``variables``), with the same cost limits as any rule. What an expression reads that
offline evaluation cannot know is recorded (``Expression.unknowns``), through its
variables: the evaluation reports such a result as not verified. An expression that
calls ``authorizer`` is not compiled (poolgate has no authorizer to call); one that
calls a Kyverno function poolgate does not have is refused here with its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from scanner.cel import Engine, ResultKind, analysis, get_engine
from scanner.errors import CelError
from scanner.ruleset.admission.policy import (
    AUTHORIZER,
    NAMESPACE_NAME,
    NAMESPACE_OBJECT,
    USER_INFO,
    Expression,
)

VARIABLES: Final = (
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "authorizer",
    "variables",
)
"""What an admission policy's CEL may read (``k8s.io/apiserver`` ``validating`` plugin)."""

KYVERNO_LIBRARIES: Final = {
    "resource": "resource.Get/List (reads the live cluster)",
    "http": "http.Get/Post (calls out over the network)",
    "image": "image functions (read registries)",
    "imagedata": "imagedata.Get (reads registries)",
    "globalContext": "globalContext.Get (Kyverno's cached cluster data)",
    "generator": "generator.Apply (creates resources)",
    "gctx": "gctx.Get (Kyverno's cached cluster data)",
    "json": "json.Unmarshal",
    "yaml": "yaml.Parse",
    "x509": "x509.Decode",
}
"""Kyverno's CEL libraries poolgate does not have, by the name a call starts with."""


@dataclass(slots=True)
class Compiler:
    """Compiles one file's policies; problems are collected as ``file:line: message``."""

    engine_name: str
    problems: list[str]
    _engine: Engine | None = field(default=None)

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = get_engine(self.engine_name, VARIABLES)
        return self._engine

    def expression(
        self,
        where: str,
        source: object,
        result: ResultKind,
        variables: Mapping[str, Expression],
    ) -> Expression | None:
        """``source`` compiled; ``variables``: the policy's variables defined so far.
        None, with the problem recorded, when it cannot run here."""
        if not isinstance(source, str) or not source.strip():
            self.problems.append(f"{where}: an expression must be a non-empty string")
            return None
        try:
            read = analysis.analyze(source, keep=False)
        except CelError as error:
            self.problems.append(f"{where}: CEL {error.message}")
            return None
        missing = sorted(set(read.roots) & set(KYVERNO_LIBRARIES))
        if missing:
            needs = "; ".join(KYVERNO_LIBRARIES[name] for name in missing)
            self.problems.append(f"{where}: uses {needs}, which poolgate cannot run offline")
            return None
        used = _variables_read(read, variables)
        unknowns = set(_unknowns(read))
        for name in used:
            unknowns |= variables[name].unknowns
        if AUTHORIZER in read.roots:
            return Expression(source, None, frozenset(unknowns), used, read.iterates)
        try:
            program = self.engine.compile(source, result)
        except CelError as error:
            at = f" (expression line {error.line}, column {error.column})" if error.line else ""
            self.problems.append(f"{where}: CEL {error.message}{at}")
            return None
        return Expression(source, program, frozenset(unknowns), used, read.iterates)


def _variables_read(
    read: analysis.Analysis, variables: Mapping[str, Expression]
) -> tuple[str, ...]:
    """The variables ``read`` needs, with those they need, in definition order."""
    direct = read.rule_variables
    names: set[str] = set(variables) if direct is None else set(direct) & set(variables)
    for name in list(names):
        names.update(variables[name].variables)
    return tuple(name for name in variables if name in names)


_NAME: Final = ("metadata", "name")


def _unknowns(read: analysis.Analysis) -> Sequence[str]:
    """What ``read`` reads that offline evaluation may not know. Of ``namespaceObject``,
    a read of its name alone (or a test that it and its metadata exist) is
    ``NAMESPACE_NAME``: the object's namespace names it."""
    found = []
    if AUTHORIZER in read.roots:
        found.append(AUTHORIZER)
    parts = [(r.root, r.path) for r in read.reads] + [(o.root, o.path) for o in read.result]
    if NAMESPACE_OBJECT in read.roots:
        found.append(NAMESPACE_NAME)
        named = [(r.path, r.how) for r in read.reads if r.root == NAMESPACE_OBJECT]
        named += [(o.path, analysis.WHOLE) for o in read.result if o.root == NAMESPACE_OBJECT]
        if any(
            path != _NAME and not (how == analysis.REACHED and _NAME[: len(path)] == path)
            for path, how in named
        ):
            found.append(NAMESPACE_OBJECT)
    if any(
        root == "request" and (not path or path[0] in ("userInfo", None)) for root, path in parts
    ):
        found.append(USER_INFO)
    return found
