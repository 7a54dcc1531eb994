"""The CEL parser (scanner/cel/parser.py): the spec's syntax, positions, and errors.

Shapes are compared through ``show``, a fully parenthesized rendering of the tree;
cel-python's own (Lark) parser is the second opinion on random expressions, and
cel-cpp's evaluation the one on literal values.
"""

from __future__ import annotations

from typing import Any

import celpy
import lark
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scanner.cel import ResultKind, cpp_available, get_engine
from scanner.cel.parser import MAX_DEPTH, MAX_LENGTH, parse
from scanner.cel.syntax import (
    Binary,
    Call,
    Conditional,
    CreateList,
    CreateMap,
    CreateMessage,
    Ident,
    Index,
    Literal,
    Logical,
    Node,
    ParseError,
    Select,
    Unary,
)


def show(node: Node) -> str:
    """``node`` with every operation in parentheses (``&&`` and ``||`` runs as nested
    pairs, as CEL's grammar has them)."""
    if isinstance(node, Literal):
        return "null" if node.kind == "null" else f"{node.kind}({node.value!r})"
    if isinstance(node, Ident):
        return ("." if node.leading_dot else "") + node.name
    if isinstance(node, Select):
        return f"{show(node.operand)}.{'?' if node.optional else ''}{node.field}"
    if isinstance(node, Index):
        return f"{show(node.operand)}[{'?' if node.optional else ''}{show(node.index)}]"
    if isinstance(node, Call):
        args = ", ".join(show(arg) for arg in node.args)
        target = "." if node.leading_dot else "" if node.target is None else show(node.target) + "."
        return f"{target}{node.function}({args})"
    if isinstance(node, Unary):
        return f"{node.operator}({show(node.operand)})"
    if isinstance(node, Binary):
        return f"({show(node.left)} {node.operator} {show(node.right)})"
    if isinstance(node, Logical):
        text = show(node.operands[0])
        for operand in node.operands[1:]:
            text = f"({text} {node.operator} {show(operand)})"
        return text
    if isinstance(node, Conditional):
        return f"({show(node.condition)} ? {show(node.then)} : {show(node.otherwise)})"
    if isinstance(node, CreateList):
        items = (
            ("?" if opt else "") + show(e)
            for e, opt in zip(node.elements, node.optional, strict=True)
        )
        return f"[{', '.join(items)}]"
    entries = ", ".join(
        f"{'?' if e.optional else ''}{show(e.key)}: {show(e.value)}" for e in node.entries
    )
    if isinstance(node, CreateMessage):
        return f"{node.type_name}{{{entries}}}"
    assert isinstance(node, CreateMap)
    return f"{{{entries}}}"


def shape(source: str) -> str:
    return show(parse(source))


# --- operators and precedence --------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "tree"),
    [
        ("a || b && c", "(a || (b && c))"),
        ("a && b || c && d", "((a && b) || (c && d))"),
        ("a == b && c != d", "((a == b) && (c != d))"),
        ("a < b == c", "((a < b) == c)"),  # relations: one level, left to right
        ("1 in [1] in [true]", "((int(1) in [int(1)]) in [bool(True)])"),
        ("a + b * c - d / e % f", "((a + (b * c)) - ((d / e) % f))"),
        ("a - b - c", "((a - b) - c)"),
        ("-a.b", "-(a.b)"),
        ("!a || b", "(!(a) || b)"),
        ("!!a", "a"),  # an even run cancels out, as cel-cpp folds it
        ("!!!a", "!(a)"),
        ("--a", "a"),
        ("-1", "int(-1)"),
        ("- 1.5", "double(-1.5)"),
        ("-(1)", "-(int(1))"),
        ("1 - -1", "(int(1) - int(-1))"),
        ("a ? b : c ? d : e", "(a ? b : (c ? d : e))"),
        ("a || b ? c && d : e", "((a || b) ? (c && d) : e)"),
        ("a.b.c", "a.b.c"),
        (".a.b", ".a.b"),
        ("a.b(c).d[e][0]", "a.b(c).d[e][int(0)]"),
        ("f()", "f()"),
        (".f(x)", ".f(x)"),
        ("(a + b).c", "(a + b).c"),
        ("a.B{f: 1, g: x}", "a.B{string('f'): int(1), string('g'): x}"),
        ("[]", "[]"),
        ("{}", "{}"),
        ("[1, 2,]", "[int(1), int(2)]"),  # a trailing comma
        ("{'a': 1,}", "{string('a'): int(1)}"),
        ("[,]", "[]"),  # cel-cpp reads the lone comma as a trailing one
        ("a.all(x, x > 0)", "a.all(x, (x > int(0)))"),  # macros stay calls
        ("a.map(x, x < 2, x * 2)", "a.map(x, (x < int(2)), (x * int(2)))"),
        ("has(a.b)", "has(a.b)"),
        ("a.`b-c`.`d.e f/g`", "a.b-c.d.e f/g"),  # quoted field names
        ("a.if.namespace", "a.if.namespace"),  # reserved words may follow a dot
    ],
)
def test_operators_and_precedence(source: str, tree: str) -> None:
    assert shape(source) == tree


def test_and_or_runs_keep_their_parentheses() -> None:
    """``(a && b) && c``: two operands, the first a run of its own."""
    node = parse("(a && b) && c && d")
    assert isinstance(node, Logical) and len(node.operands) == 3
    first = node.operands[0]
    assert isinstance(first, Logical) and len(first.operands) == 2


# --- optional syntax -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "tree"),
    [
        ("a.?b", "a.?b"),
        ("a.?b.c", "a.?b.c"),
        ("a[?'k']", "a[?string('k')]"),
        ("a[?0].?b.orValue(1)", "a[?int(0)].?b.orValue(int(1))"),
        ("[?a, b, ?c]", "[?a, b, ?c]"),
        ("{?'k': v, 'j': w}", "{?string('k'): v, string('j'): w}"),
        ("M{?f: v}", "M{?string('f'): v}"),
        ("optional.of(x).value()", "optional.of(x).value()"),
        ("optional.none().hasValue()", "optional.none().hasValue()"),
        ("x.?y ? 1 : 2", "(x.?y ? int(1) : int(2))"),  # ?. is not a conditional
    ],
)
def test_optional_syntax(source: str, tree: str) -> None:
    assert shape(source) == tree


# --- literals ------------------------------------------------------------------------


LITERALS: list[tuple[str, str, Any]] = [
    ("0", "int", 0),
    ("007", "int", 7),
    ("0x1F", "int", 31),
    ("9223372036854775807", "int", 2**63 - 1),
    ("1u", "uint", 1),
    ("0x1fU", "uint", 31),
    ("1.5", "double", 1.5),
    (".5", "double", 0.5),
    ("1e3", "double", 1000.0),
    ("1.5e-3", "double", 0.0015),
    ("2E+2", "double", 200.0),
    ("true", "bool", True),
    ("false", "bool", False),
    ("null", "null", None),
    ("''", "string", ""),
    ('"a\'b"', "string", "a'b"),
    ("'a\"b'", "string", 'a"b'),
    ("'\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\\"\\'\\`'", "string", "\a\b\f\n\r\t\v\\?\"'`"),
    ("'\\x41\\X42\\101\\u00e9\\U0001F600'", "string", "ABAé😀"),
    ("'\\303\\277'", "string", "Ã¿"),
    ("'\\377'", "string", "ÿ"),
    ("'''x''x'''", "string", "x''x"),
    ('"""a\nb\\n"""', "string", "a\nb\n"),
    ("'''a\rb\r\nc'''", "string", "a\nb\nc"),  # line breaks read as line feeds
    ("r'\\d+\\''", "string", None),  # raw ends at its first quote: see the next case
    ("r'\\d+'", "string", "\\d+"),
    ('R"\\n"', "string", "\\n"),
    ("r'a\\\\'", "string", "a\\\\"),
    ("r'''a\\'''", "string", None),  # cel-cpp takes the quote for an escaped one
    ("b'abc'", "bytes", b"abc"),
    ("b'\\xff\\377\\x00'", "bytes", b"\xff\xff\x00"),
    ("B'ÿ'", "bytes", "ÿ".encode()),
    ("br'\\x'", "bytes", b"\\x"),
    ("bR'''a\nb'''", "bytes", b"a\nb"),
    ("'é日本'", "string", "é日本"),
]


@pytest.mark.parametrize(("source", "kind", "value"), LITERALS)
def test_literals(source: str, kind: str, value: Any) -> None:
    if value is None and kind != "null":
        with pytest.raises(ParseError):
            parse(source)
        return
    node = parse(source)
    assert isinstance(node, Literal)
    assert (node.kind, node.value) == (kind, value)
    assert (node.start, node.end) == (0, len(source))


@pytest.mark.skipif(not cpp_available(), reason="cel-expr-python not installed")
@pytest.mark.parametrize(("source", "kind", "value"), LITERALS)
def test_literal_values_are_cel_cpps(source: str, kind: str, value: Any) -> None:
    """The value of each literal, as cel-cpp evaluates it (and refuses what it refuses)."""
    engine = get_engine("cpp")
    if value is None and kind != "null":
        with pytest.raises(Exception):  # noqa: B017 - cel-cpp refuses it too
            engine.compile(source, ResultKind.ANY)
        return
    found = engine.compile(source, ResultKind.ANY).evaluate(engine.activation({}))
    if isinstance(found, bytearray):  # how the engine hands back bytes
        found = bytes(found)
    assert found == value and type(found) is type(value)


@pytest.mark.parametrize(
    "source",
    [
        "'\\q'",  # no such escape
        "'\\400'",  # octal past 377
        "'\\x4'",
        "'\\u004'",
        "'\\ud800'",  # a lone surrogate
        "'\\U00110000'",  # past U+10FFFF
        "b'\\u0041'",  # bytes take no \\u
        "'a\nb'",  # a newline needs triple quotes
        "'a\rb'",
        "'abc",
        '"""abc""',
        "'''a''''",
        "rb'x'",  # the b comes first
        "1.",
        "1e",
        "0x",
        "1uu",
        "1.0u",
        "1_000",
    ],
)
def test_bad_literals_are_refused(source: str) -> None:
    with pytest.raises(ParseError):
        parse(source)


# --- names, comments, whitespace -----------------------------------------------------


@pytest.mark.parametrize("word", ["as", "break", "if", "let", "namespace", "package", "while"])
def test_reserved_words_are_no_names(word: str) -> None:
    for source in (word, f"{word}.x", f"{word}(1)", f".{word}"):
        with pytest.raises(ParseError, match=f"reserved identifier: {word}"):
            parse(source)
    assert shape(f"x.{word}") == f"x.{word}"


@pytest.mark.parametrize("source", ["in", "x.in", "x.true", "x.null", "true.x", "in(1)"])
def test_literal_words_are_not_fields(source: str) -> None:
    if source == "true.x":
        assert shape(source) == "bool(True).x"  # a literal, then a selection
        return
    with pytest.raises(ParseError):
        parse(source)


@pytest.mark.parametrize(
    ("source", "tree"),
    [
        ("a // a comment && b\n&& c", "(a && c)"),
        ("// only\na", "a"),
        ("a //", "a"),
        ("a // x\r&& b", "a"),  # a comment ends at a line feed only
        ("'//' + a", "(string('//') + a)"),
        ("a.\n  b(\tc\f)", "a.b(c)"),
    ],
)
def test_comments_and_whitespace(source: str, tree: str) -> None:
    assert shape(source) == tree


@pytest.mark.parametrize("source", ["a\vb", "a /* c */", "a # c", "a;", "@", "`a`", "a.`b`(1)"])
def test_what_is_not_cel_is_refused(source: str) -> None:
    with pytest.raises(ParseError):
        parse(source)


# --- positions -----------------------------------------------------------------------


def test_nodes_span_their_text() -> None:
    source = "workload.gpu &&\n  (x.all(c, c.image != '') || y[?'k'])"
    node = parse(source)
    assert isinstance(node, Logical)
    gpu, group = node.operands
    assert source[gpu.start : gpu.end] == "workload.gpu"
    assert source[group.start : group.end] == "x.all(c, c.image != '') || y[?'k']"
    assert isinstance(group, Logical)
    call = group.operands[0]
    assert isinstance(call, Call) and source[call.name_start :].startswith("all(")


@pytest.mark.parametrize(
    ("source", "line", "column", "message"),
    [
        ("a +", 1, 4, "unexpected end of expression"),
        ("a &&\n  b c", 2, 5, "unexpected 'c'"),
        ("x.all(c,\n  'é' + \\n)", 2, 9, "unexpected character '\\\\'"),
        ("[1 2]", 1, 4, "unexpected '2', expected ']'"),
        ("a ? b", 1, 6, "unexpected end of expression, expected ':'"),
        ("'abc", 1, 1, "unterminated string literal"),
        ("'ok' + 'a\\qb'", 1, 10, "invalid escape \\q"),
    ],
)
def test_errors_name_line_and_column(source: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse(source)
    assert (raised.value.line, raised.value.column, raised.value.message) == (
        line,
        column,
        message,
    )


# --- hostile input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "(" * 10_000 + "1" + ")" * 10_000,
        "[" * 10_000 + "]" * 10_000,
        "f(" * 10_000 + ")" * 10_000,
        "{1:" * 10_000 + "1" + "}" * 10_000,
        "a" + ".b" * 10_000,
        "a" + "[0]" * 10_000,
        " + ".join(["1"] * 10_000),
        "a" + " ? a : a" * 10_000,
        "[1].all(x, " * 5_000 + "true" + ")" * 5_000,
        "!" * 10_000 + "-a",
    ],
)
def test_deep_nesting_is_an_error_not_a_crash(source: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse(source)
    assert "nests deeper" in raised.value.message or "unexpected" in raised.value.message


def test_long_and_wide_expressions_within_the_limits_parse() -> None:
    assert isinstance(parse(" && ".join(["a"] * 10_000)), Logical)  # a run: one level
    assert isinstance(parse("!" * 10_000 + "a"), Ident)  # folded
    assert isinstance(parse("(" * (MAX_DEPTH - 1) + "1" + ")" * (MAX_DEPTH - 1)), Literal)
    assert isinstance(parse("'" + "x" * (MAX_LENGTH - 2) + "'"), Literal)


def test_an_expression_over_the_length_limit_is_refused() -> None:
    with pytest.raises(ParseError, match="longer than"):
        parse("a" * (MAX_LENGTH + 1))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("ab1.?:!-+()[]{},'\"`\\/\n &|=<>ru")), max_size=60))
def test_any_text_parses_or_is_a_parse_error(source: str) -> None:
    try:
        parse(source)
    except ParseError as error:
        assert error.line >= 1 and error.column >= 1


# --- against cel-python's parser ------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "xs", "workload", "object"])
_FIELDS = st.sampled_from(["x", "gpu", "name", "spec", "if"])
_LEAVES = st.one_of(
    _NAMES,
    st.integers(0, 99).map(str),
    st.sampled_from(["1.5", "2u", "true", "false", "null", "'s'", '"t"', "[]", "{}"]),
)


def _compound(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(children, children)
    binary = st.sampled_from(
        ["||", "&&", "==", "!=", "<", "<=", ">", ">=", "in", "+", "*", "/", "%"]
    )
    return st.one_of(
        st.tuples(children, binary, children).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(children, children, children).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
        children.map(lambda c: f"({c})"),
        children.map(lambda c: f"!{c}" if c[:1] not in "-!" else f"!({c})"),
        st.tuples(children, _FIELDS).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(_NAMES, _FIELDS).map(lambda t: f"{t[0]}.{t[1]}"),
        pair.map(lambda p: f"({p[0]})[{p[1]}]"),
        pair.map(lambda p: f"[{p[0]}, {p[1]}]"),
        pair.map(lambda p: f"{{{p[0]}: {p[1]}}}"),
        st.tuples(_NAMES, children).map(lambda t: f"{t[0]}.all(v, {t[1]})"),
        st.tuples(_NAMES, children).map(lambda t: f"size({t[0]}, {t[1]})"),
    )


_EXPRESSIONS = st.recursive(_LEAVES, _compound, max_leaves=12)


def _celpy_show(tree: lark.Tree[Any] | lark.Token) -> str:
    """cel-python's parse tree in ``show``'s notation."""
    if isinstance(tree, lark.Token):
        return str(tree)
    kids = [child for child in tree.children if child is not None]
    rule = tree.data
    if rule in ("expr", "conditionalor", "conditionaland", "relation", "addition"):
        if len(kids) == 1:
            return _celpy_show(kids[0])
        if rule == "expr":
            return f"({_celpy_show(kids[0])} ? {_celpy_show(kids[1])} : {_celpy_show(kids[2])})"
        operator = {"conditionalor": "||", "conditionaland": "&&"}.get(rule)
        if operator is None:  # relation_lt(relation) etc. carry the operator
            head = kids[0]
            assert isinstance(head, lark.Tree)
            operator = _OPERATORS[head.data]
            left = _celpy_show(head.children[0])
        else:
            left = _celpy_show(kids[0])
        return f"({left} {operator} {_celpy_show(kids[-1])})"
    if rule == "multiplication":
        if len(kids) == 1:
            return _celpy_show(kids[0])
        head = kids[0]
        assert isinstance(head, lark.Tree)
        return f"({_celpy_show(head.children[0])} {_OPERATORS[head.data]} {_celpy_show(kids[1])})"
    if rule == "unary":
        if len(kids) == 1:
            return _celpy_show(kids[0])
        operator = kids[0].data  # type: ignore[union-attr]
        count, operand = 1, kids[1]
        while isinstance(operand, lark.Tree) and len(operand.children) == 2:
            if operand.children[0].data != operator:  # type: ignore[union-attr]
                break
            count, operand = count + 1, operand.children[1]
        inner = _celpy_show(operand)
        return inner if count % 2 == 0 else f"{'!' if operator == 'unary_not' else '-'}({inner})"
    if rule in ("member", "primary", "paren_expr"):
        return _celpy_show(kids[0])
    if rule == "member_dot":
        return f"{_celpy_show(kids[0])}.{kids[1]}"
    if rule == "member_dot_arg":
        args = ", ".join(_celpy_show(arg) for arg in kids[2].children) if len(kids) > 2 else ""
        return f"{_celpy_show(kids[0])}.{kids[1]}({args})"
    if rule == "member_index":
        return f"{_celpy_show(kids[0])}[{_celpy_show(kids[1])}]"
    if rule == "ident_arg":
        args = ", ".join(_celpy_show(arg) for arg in kids[1].children) if len(kids) > 1 else ""
        return f"{kids[0]}({args})"
    if rule == "ident":
        return str(kids[0])
    if rule == "list_lit":
        return "[" + (", ".join(_celpy_show(e) for e in kids[0].children) if kids else "") + "]"
    if rule == "map_lit":
        items = kids[0].children if kids else []
        pairs = zip(items[::2], items[1::2], strict=True)
        return "{" + ", ".join(f"{_celpy_show(k)}: {_celpy_show(v)}" for k, v in pairs) + "}"
    if rule == "literal":
        return _celpy_literal(kids[0])
    raise AssertionError(rule)


_OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}


def _celpy_literal(token: lark.Tree[Any] | lark.Token) -> str:
    assert isinstance(token, lark.Token)
    text = str(token)
    kind = token.type
    if kind == "INT_LIT":
        return f"int({int(text, 0)!r})"
    if kind == "UINT_LIT":
        return f"uint({int(text[:-1], 0)!r})"
    if kind == "FLOAT_LIT":
        return f"double({float(text)!r})"
    if kind == "BOOL_LIT":
        return f"bool({text == 'true'!r})"
    if kind == "NULL_LIT":
        return "null"
    assert kind == "STRING_LIT" and "\\" not in text
    return f"string({text[1:-1]!r})"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_EXPRESSIONS)
def test_the_tree_is_cel_pythons(source: str) -> None:
    """Where cel-python's parser accepts an expression, both read the same tree."""
    try:
        theirs = celpy.Environment().compile(source)
    except celpy.CELParseError:
        return
    assert shape(source) == _celpy_show(theirs), source


def to_cel(node: Node) -> str:
    """``node`` as CEL text again, every operation in parentheses."""
    if isinstance(node, Literal):
        value = node.value
        if node.kind == "string":
            return '"' + "".join(_ESCAPES.get(c, c) for c in str(value)) + '"'
        if node.kind == "bytes":
            assert isinstance(value, bytes)
            return 'b"' + "".join(f"\\x{byte:02x}" for byte in value) + '"'
        if node.kind == "uint":
            return f"{value}u"
        if node.kind in ("bool", "null"):
            return {True: "true", False: "false", None: "null"}[value]  # type: ignore[index]
        return repr(value)
    if isinstance(node, Ident):
        return ("." if node.leading_dot else "") + node.name
    if isinstance(node, Select):
        return f"({to_cel(node.operand)}).{'?' if node.optional else ''}`{node.field}`"
    if isinstance(node, Index):
        return f"({to_cel(node.operand)})[{'?' if node.optional else ''}{to_cel(node.index)}]"
    if isinstance(node, Call):
        args = ", ".join(to_cel(arg) for arg in node.args)
        target = (
            "." if node.leading_dot else "" if node.target is None else f"({to_cel(node.target)})."
        )
        return f"{target}{node.function}({args})"
    if isinstance(node, Unary):
        return f"{node.operator}({to_cel(node.operand)})"
    if isinstance(node, Binary):
        return f"({to_cel(node.left)}) {node.operator} ({to_cel(node.right)})"
    if isinstance(node, Logical):
        return f" {node.operator} ".join(f"({to_cel(operand)})" for operand in node.operands)
    if isinstance(node, Conditional):
        return f"({to_cel(node.condition)}) ? ({to_cel(node.then)}) : ({to_cel(node.otherwise)})"
    if isinstance(node, CreateList):
        items = (
            ("?" if opt else "") + to_cel(e)
            for e, opt in zip(node.elements, node.optional, strict=True)
        )
        return f"[{', '.join(items)}]"
    assert isinstance(node, CreateMap)
    entries = (
        f"{'?' if e.optional else ''}{to_cel(e.key)}: {to_cel(e.value)}" for e in node.entries
    )
    return f"{{{', '.join(entries)}}}"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_EXPRESSIONS)
def test_the_tree_printed_as_cel_parses_back_to_itself(source: str) -> None:
    try:
        tree = parse(source)
    except ParseError:  # "a ? b ? c : d : e": the grammar wants parentheses there
        assume(False)
        return
    assert show(parse(to_cel(tree))) == show(tree), to_cel(tree)
