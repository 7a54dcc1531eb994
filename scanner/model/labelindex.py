"""Entries (GPU pools, other node groups) indexed by the node labels their members carry.

Joining workloads to pools one pair at a time costs workloads x pools: a thousand
Deployments each pinned to one of a thousand NodePools made a million selector
checks. ``LabelIndex.candidates`` answers, from the labels a pod's required node
selection names, which entries can hold a member that ``targeting.selects`` admits;
only those are then checked, exactly as before. It over-approximates (every entry
``selects`` admits is among the candidates), never under: the index chooses where to
look, ``selects`` still decides.

A requirement narrows the search when every node it admits must carry a label the
index knows: a ``nodeSelector`` pair or an ``In`` expression (the entries carrying
one of its values), ``Exists``, ``Gt`` or ``Lt`` (the entries carrying the key).
``NotIn`` and ``DoesNotExist`` admit nodes by what they lack, so they do not narrow.
A pool declaration is undecided on a runtime label it does not list
(``targeting.runtime_label``: that label matches whatever it asks), so a requirement
on such a key also admits the declarations that lack it. The nodeSelector's and each
affinity term's most selective requirement is used; the terms are ORed, so a term
that nothing narrows leaves every entry a candidate. A caller that bounds its work
gives a ``limit``: past it the candidates are not listed (as if nothing narrowed),
and finding that out costs at most the limit for each value the selection names,
however many entries carry them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from scanner.model.selectors import label_value
from scanner.model.targeting import required_terms, runtime_label

Member = Mapping[str, Any]
"""A node or declaration's facts: ``labels`` (key -> values) and ``source``."""

_K = TypeVar("_K")

_NARROWING_BY_KEY = ("Exists", "Gt", "Lt")
"""Operators that admit only nodes carrying the key (``selects``)."""


class LabelIndex:
    """Positions of entries by the label values and keys their members carry."""

    def __init__(self, entries: Sequence[Sequence[Member]]) -> None:
        self.size = len(entries)
        self.by_value: dict[tuple[str, str], list[int]] = {}
        self.by_key: dict[str, list[int]] = {}
        self.declared: list[int] = []
        """Entries with a declaration member: the ones runtime labels can leave undecided."""
        self.common: list[frozenset[str]] = []
        """Per entry of ``declared``: the keys every declaration member carries."""
        self.covered: dict[str, int] = {}
        """Key -> how many ``declared`` entries have it in ``common`` (none undecided on it)."""
        for position, members in enumerate(entries):
            declared: frozenset[str] | None = None
            for member in members:
                labels: Mapping[str, Sequence[str]] = member["labels"]
                for key, values in labels.items():
                    _add(self.by_key, key, position)
                    for value in values:
                        _add(self.by_value, (key, value), position)
                if member["source"] == "declaration":
                    keys = frozenset(labels)
                    declared = keys if declared is None else declared & keys
            if declared is not None:
                self.declared.append(position)
                self.common.append(declared)
                for key in declared:
                    self.covered[key] = self.covered.get(key, 0) + 1

    def candidates(
        self, pod_spec: Mapping[str, Any], limit: int | None = None
    ) -> Sequence[int] | None:
        """Ascending positions of the entries that may hold a member the pod's required
        node selection admits (module docstring); None when it narrows nothing, and
        every entry may, or when it narrows to more than ``limit`` entries (so a caller
        that bounds its work learns so without their list being built)."""
        best = self._node_selector(pod_spec.get("nodeSelector"), limit)
        terms = required_terms(pod_spec)
        if terms is not None:
            by_terms = self._terms(terms, limit)
            if by_terms is not None and (best is None or len(by_terms) < len(best)):
                best = by_terms
        return best

    def _node_selector(self, node_selector: object, limit: int | None) -> Sequence[int] | None:
        if not isinstance(node_selector, Mapping):
            return None
        return self._narrowest(
            [(str(key), [label_value(value)]) for key, value in node_selector.items()], limit
        )

    def _terms(self, terms: Sequence[Mapping[str, Any]], limit: int | None) -> list[int] | None:
        """The union over the ORed terms; None when one of them narrows nothing."""
        found: set[int] = set()
        for term in terms:
            raw = term.get("matchExpressions")
            expressions = [e for e in raw or [] if isinstance(e, Mapping)]
            if not expressions:
                if term.get("matchFields"):
                    return None  # matchFields alone: every node class (targeting.py)
                continue  # an empty term matches nothing
            wanted: list[tuple[str, list[str] | None]] = []
            for expression in expressions:
                operator = expression.get("operator")
                key = str(expression.get("key", ""))
                values = expression.get("values")
                if operator == "In":
                    listed = values if isinstance(values, list) else []
                    wanted.append((key, [label_value(v) for v in listed]))
                elif operator in _NARROWING_BY_KEY:
                    wanted.append((key, None))
            narrowest = self._narrowest(wanted, limit)
            if narrowest is None:
                return None
            found.update(narrowest)
            if limit is not None and len(found) > limit:
                return None
        return sorted(found)

    def _narrowest(
        self, wanted: Sequence[tuple[str, list[str] | None]], limit: int | None
    ) -> Sequence[int] | None:
        """The fewest entries among the requirements ``wanted``, each a key and the
        values one of which a node must carry (None: any value); all of them must
        hold. None when ``wanted`` is empty, or the fewest are more than ``limit``."""
        best: tuple[int, str, list[str] | None] | None = None
        for key, values in wanted:
            if values is None:
                bound = len(self.by_key.get(key, ()))
            else:
                bound = sum(len(self.by_value.get((key, v), ())) for v in values)
            if runtime_label(key):
                bound += len(self.declared) - self.covered.get(key, 0)
            if best is None or bound < best[0]:
                best = (bound, key, values)
        if best is None:
            return None
        _, key, values = best
        if values is None:
            lists = [self.by_key.get(key, [])]
        else:
            lists = [self.by_value.get((key, v), []) for v in values]
        undecided = len(self.declared) - self.covered.get(key, 0) if runtime_label(key) else 0
        if limit is not None and max([undecided, *map(len, lists)]) > limit:
            return None  # more than ``limit`` whatever the others hold
        if undecided:
            lists.append(
                [p for p, keys in zip(self.declared, self.common, strict=True) if key not in keys]
            )
        if len(lists) == 1:
            return lists[0]
        found: set[int] = set()
        for positions in lists:
            found.update(positions)
            if limit is not None and len(found) > limit:
                return None
        return sorted(found)


def _add(index: dict[_K, list[int]], key: _K, position: int) -> None:
    """Append ``position`` to ``index[key]`` once (positions arrive in ascending order)."""
    found = index.get(key)
    if found is None:
        index[key] = [position]
    elif found[-1] != position:
        found.append(position)
