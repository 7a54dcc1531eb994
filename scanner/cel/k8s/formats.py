"""Kubernetes' named formats (``library/format.go``): ``format.<name>()``,
``format.named(name)`` and ``<Format>.validate(text)``, with apimachinery's validation
messages.

``validate`` and ``format.named`` return optionals, which no Python function can hand
to cel-cpp: they return the list of problems (empty when valid) and the format (an
empty map when unknown), and the program wraps each call in
``optional.ofNonZeroValue`` when it compiles (``scanner.cel.k8s.rewrite``).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
from collections.abc import Callable
from typing import Final

from scanner.cel.k8s.library import Function, function, glob, member, opaque, payload
from scanner.cel.k8s.urls import request_uri_error

_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN: Final = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE: Final = "(" + _QUALIFIED + ")?"
_UUID: Final = re.compile(
    "[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE
)
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIME: Final = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's ``RegexError``."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    listed = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {listed}regex used for validation is '{pattern}')"


def _max_length(length: int) -> str:
    return f"must be no more than {length} bytes"


def _matches(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text) is not None


def dns1123_label(text: str) -> list[str]:
    errors = []
    if len(text.encode()) > 63:
        errors.append(_max_length(63))
    if not _matches(_LABEL, text):
        if _matches(_SUBDOMAIN, text):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _LABEL,
                    "my-name",
                    "123-abc",
                )
            )
    return errors


def dns1123_subdomain(text: str) -> list[str]:
    errors = []
    if len(text.encode()) > 253:
        errors.append(_max_length(253))
    if not _matches(_SUBDOMAIN, text):
        errors.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _SUBDOMAIN,
                "example.com",
            )
        )
    return errors


def dns1035_label(text: str) -> list[str]:
    errors = []
    if len(text.encode()) > 63:
        errors.append(_max_length(63))
    if not _matches(_DNS1035, text):
        errors.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035,
                "my-name",
                "abc-123",
            )
        )
    return errors


_QUALIFIED_MESSAGE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)


def qualified_name(text: str) -> list[str]:
    """apimachinery's ``IsQualifiedName``."""
    errors: list[str] = []
    parts = text.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_MESSAGE, _QUALIFIED, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {message}" for message in dns1123_subdomain(prefix)]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append(f"name part {_max_length(63)}")
    if not _matches(_QUALIFIED, name):
        errors.append(
            "name part "
            + _regex_error(_QUALIFIED_MESSAGE, _QUALIFIED, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(text: str) -> list[str]:
    errors = []
    if len(text.encode()) > 63:
        errors.append(_max_length(63))
    if not _matches(_LABEL_VALUE, text):
        errors.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errors


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """apimachinery's ``maskTrailingDash``: a generated-name prefix may end in '-'."""

    def validate(text: str) -> list[str]:
        if len(text) > 1 and text.endswith("-"):
            text = text[:-2] + "a"
        return check(text)

    return validate


def _uri(text: str) -> list[str]:
    error = request_uri_error(text)
    return [] if error is None else [error]


def _uuid(text: str) -> list[str]:
    return [] if _UUID.fullmatch(text) else ["does not match the UUID format"]


def _byte(text: str) -> list[str]:
    try:
        base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _is_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _date(text: str) -> list[str]:
    return [] if _is_date(text) else ["invalid date"]


def _datetime(text: str) -> list[str]:
    """kube-openapi's ``strfmt.IsDateTime``."""
    parts = text.lower().split("t")
    valid = len(text) >= 4 and len(parts) >= 2 and _is_date(parts[0])
    match = _TIME.fullmatch(parts[1]) if valid else None
    if match is None or not (match[1] <= "23" and match[2] <= "59" and match[3] <= "59"):
        return ["invalid datetime"]
    return []


FORMATS: Final[dict[str, Callable[[str], list[str]]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": _prefix(dns1123_label),
    "dns1123SubdomainPrefix": _prefix(dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(dns1035_label),
    "labelValue": label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def _named(name: str) -> object:
    return opaque("Format", name) if name in FORMATS else {}


def _validate(value: object, text: str) -> list[str]:
    return FORMATS[str(payload(value, "Format"))](text)


def _constant(name: str) -> Function:
    return function(
        f"format.{name}", glob(f"format.{name}", [], "Format", lambda: opaque("Format", name))
    )


FUNCTIONS = (
    *(_constant(name) for name in FORMATS),
    function("format.named", glob("format-named", ["string"], "optional_type(Format)", _named)),
    function(
        "validate",
        member("format-validate", ["Format", "string"], "optional_type(list(string))", _validate),
    ),
)

OPTIONAL_RESULTS: Final = frozenset({"format-named", "format-validate"})
"""Overloads whose Python result the program wraps in ``optional.ofNonZeroValue``."""
