"""Which rules can run on a controlled workload before the rest of its facts exist.

A controlled workload (``scanner.model.workloads``) waits with its instance facts
(``INSTANCE_FACTS``) until a rule needs the rest. A rule *reads instance facts only*
when none of its expressions can tell a missing fact from a present one without
failing:

* every ``workload`` it names is followed by a field (``workload.gpu``), never used
  whole (``size(workload)``, ``"targets" in workload``, ``workload.all(...)``,
  ``workload[key]``);
* ``has()`` tests only instance facts when it tests a field of ``workload`` itself.

Such a rule is evaluated on the instance facts first. Reading any other fact is then
a missing-key error, and no CEL operator turns that error into a different answer:
``&&``, ``||``, ``?:`` and the comprehension macros drop an error only where the
other operands decide the result on their own, which they decide the same way on the
complete facts. So the rule's answer is either the one the complete facts give, or
an error; on an error the engine completes the workload and evaluates the rule again.

Every other rule completes the workload first, and so does a rule this reading
cannot follow: raw, bytes or triple-quoted strings, or ``//`` comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from scanner.guards import strip_strings
from scanner.model.workloads import INSTANCE_FACTS

_WORKLOAD: Final = re.compile(r"(?<![\w.])workload\b")
_FIELD: Final = re.compile(r"\s*\.\s*([A-Za-z_]\w*)(\s*\()?")
_HAS: Final = re.compile(r"(?<![\w.])has\s*\(\s*$")
_UNREADABLE: Final = re.compile(r"\"\"\"|'''|(?<![\w.])[rRbB]{1,2}[\"']")


def reads_instance_facts_only(sources: Iterable[str]) -> bool:
    """Whether the expressions ``sources`` (all of one rule's) read ``workload``
    only as the module docstring allows."""
    for source in sources:
        if _UNREADABLE.search(source):
            return False
        text = strip_strings(source)
        if "//" in text:
            return False
        for match in _WORKLOAD.finditer(text):
            field = _FIELD.match(text, match.end())
            if field is None or field.group(2) is not None:
                return False  # whole, indexed, or a macro over its keys
            if field.group(1) not in INSTANCE_FACTS and _HAS.search(text, 0, match.start()):
                return False  # has() would answer false instead of failing
    return True
