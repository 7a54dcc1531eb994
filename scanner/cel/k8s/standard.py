"""Standard functions the Kubernetes environment declares again, for the checker only
(cel-cpp's runtime has them all):

* ``string()``, to add Kubernetes' overloads for IP and CIDR next to the standard ones
  (cel-cpp's checker refuses a second declaration of a function);
* ``<``, ``<=``, ``>``, ``>=`` with Kubernetes' ``CrossTypeNumericComparisons``:
  between any two of int, uint and double as well (``1 < 1.5``, ``size(x) < 2.5``).
  cel-cpp's checker has no such option; its runtime compares across types already.
"""

from __future__ import annotations

from typing import Final

from scanner.cel.k8s.library import Function, function, glob

_ORDERED: Final = (
    ("bool", "bool"),
    ("int64", "int"),
    ("uint64", "uint"),
    ("double", "double"),
    ("string", "string"),
    ("bytes", "bytes"),
    ("timestamp", "timestamp"),
    ("duration", "duration"),
)
_NUMBERS: Final = (("int64", "int"), ("uint64", "uint"), ("double", "double"))
_COMPARISONS: Final = (
    ("_<_", "less"),
    ("_<=_", "less_equals"),
    ("_>_", "greater"),
    ("_>=_", "greater_equals"),
)


def _comparison(op: str, stem: str) -> Function:
    same = [glob(f"{stem}_{name}", [kind, kind], "bool") for name, kind in _ORDERED]
    cross = [
        glob(f"{stem}_{left}_{right}", [left_kind, right_kind], "bool")
        for left, left_kind in _NUMBERS
        for right, right_kind in _NUMBERS
        if left != right
    ]
    return function(op, *same, *cross)


FUNCTIONS = (
    function(
        "string",
        *(glob(f"{name}_to_string", [kind], "string") for name, kind in _ORDERED),
    ),
    *(_comparison(op, stem) for op, stem in _COMPARISONS),
)

REPLACED: Final = frozenset(fn.name for fn in FUNCTIONS)
"""The standard functions the checker leaves out, for these declarations to replace."""
