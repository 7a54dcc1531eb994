"""cel-go's strings extension at version 2, as Kubernetes declares it
(``ext.Strings(ext.StringsVersion(2))``).

Only the declarations live here, for the checker: cel-cpp's own strings extension runs
them. Declaring them here rather than loading cel-cpp's extension into the checker
keeps the set exactly Kubernetes' (``reverse`` and later additions stay undeclared)
and lets ``indexOf``/``lastIndexOf`` carry the list overloads of Kubernetes' list
library as well.
"""

from __future__ import annotations

from scanner.cel.k8s.library import function, glob, member

FUNCTIONS = (
    function("charAt", member("string_char_at_int", ["string", "int"], "string")),
    function(
        "indexOf",
        member("string_index_of_string", ["string", "string"], "int"),
        member("string_index_of_string_int", ["string", "string", "int"], "int"),
    ),
    function(
        "lastIndexOf",
        member("string_last_index_of_string", ["string", "string"], "int"),
        member("string_last_index_of_string_int", ["string", "string", "int"], "int"),
    ),
    function("lowerAscii", member("string_lower_ascii", ["string"], "string")),
    function("upperAscii", member("string_upper_ascii", ["string"], "string")),
    function(
        "replace",
        member("string_replace_string_string", ["string", "string", "string"], "string"),
        member("string_replace_string_string_int", ["string", "string", "string", "int"], "string"),
    ),
    function(
        "split",
        member("string_split_string", ["string", "string"], "list(string)"),
        member("string_split_string_int", ["string", "string", "int"], "list(string)"),
    ),
    function(
        "substring",
        member("string_substring_int", ["string", "int"], "string"),
        member("string_substring_int_int", ["string", "int", "int"], "string"),
    ),
    function("trim", member("string_trim", ["string"], "string")),
    function("format", member("string_format", ["string", "list(dyn)"], "string")),
    function("strings.quote", glob("strings_quote", ["string"], "string")),
    function(
        "join",
        member("list_join", ["list(string)"], "string"),
        member("list_join_string", ["list(string)", "string"], "string"),
    ),
)
