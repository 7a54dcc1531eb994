"""Kubernetes label selectors (``matchLabels`` / ``matchExpressions``) over plain label maps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def label_selector_matches(selector: object, labels: Mapping[str, str]) -> bool:
    """Whether a ``metav1.LabelSelector`` selects an object with ``labels``.

    An absent or empty selector selects everything. Operators: ``In``, ``NotIn``,
    ``Exists``, ``DoesNotExist``; an expression with any other operator, or a
    selector that is not a mapping, selects nothing (the API server would reject it).
    """
    if selector is None:
        return True
    if not isinstance(selector, Mapping):
        return False
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        for key, value in match_labels.items():
            if labels.get(str(key)) != label_value(value):
                return False
    elif match_labels is not None:
        return False
    expressions = selector.get("matchExpressions")
    if expressions is None:
        return True
    if not isinstance(expressions, list):
        return False
    return all(_expression_matches(expression, labels) for expression in expressions)


def _expression_matches(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key = expression.get("key")
    operator = expression.get("operator")
    raw_values = expression.get("values")
    values = [label_value(v) for v in raw_values] if isinstance(raw_values, list) else []
    present = isinstance(key, str) and key in labels
    if operator == "In":
        return present and labels[str(key)] in values
    if operator == "NotIn":
        return not present or labels[str(key)] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    return False


def label_value(value: object) -> str:
    """A selector, toleration or label value as node labels and taints hold it: YAML
    ``true`` is the string ``"true"``, a number its digits, null empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
