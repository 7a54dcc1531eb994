"""A CEL parser in pure Python: source text to a small syntax tree with positions.

poolgate reads its rules' CEL for more than running it: which facts a rule reads
(the audit's read plan, projection, deferral), the top-level conjuncts of a condition
(guards), how deep comprehensions nest (the cost limit), and what the CEL of admission
policies and DeviceClasses in scanned input compares. All of it comes from this one
parse (``scanner.cel.analysis``), the same on every platform: it needs neither
cel-expr-python nor cel-python.

The syntax is the CEL specification's (``doc/langdef.md`` of google/cel-spec), as
cel-cpp's parser accepts it:

* ``? :``, ``||``, ``&&``, relations (``== != < <= > >= in``), ``+ -``, ``* / %``, from
  loosest to tightest, all binary operators left-associative; unary ``!`` or ``-``
  (repeated, not mixed: an even run cancels out, as cel-cpp folds it); field selection,
  calls, indexing, message construction ``a.B{f: v}``;
* literals: ints (decimal, ``0x``), uints (``u``), doubles (``1.5``, ``.5``, ``1e3``),
  strings and bytes (``b``), quoted with ``'`` or ``"``, tripled for several lines,
  raw (``r``) or with the escapes ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\? \\" \\' \\```,
  ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH`` and octal ``\\ooo``; ``true``, ``false``, ``null``;
* lists and maps with an optional trailing comma; field names in backquotes
  (``a.`b-c```); ``//`` comments to the end of the line;
* reserved words are refused as names, but may follow a dot (``object.namespace``);
* optional syntax: ``a.?f``, ``a[?i]``, ``[?e]``, ``{?k: v}``, ``M{?f: v}``.

Macros (``all``, ``exists``, ``map``, ``has``, ...) are not expanded: they stay calls,
which the analysis recognises. Type checking is left to the engines: this parser
accepts some expressions they refuse (``1.e3``, an int literal out of range).

Input may be hostile (the CEL of a scanned admission policy): an expression longer
than ``MAX_LENGTH`` characters or nesting deeper than ``MAX_DEPTH`` is refused, and
every problem is a ``ParseError`` naming line and column, never a ``RecursionError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NoReturn

from scanner.cel.syntax import (
    Binary,
    Call,
    Conditional,
    CreateList,
    CreateMap,
    CreateMessage,
    Entry,
    Ident,
    Index,
    Literal,
    Logical,
    Node,
    ParseError,
    Select,
    Unary,
)

MAX_LENGTH: Final = 100_000
"""Characters in one expression (cel-cpp's own limit, in code points)."""
MAX_DEPTH: Final = 100
"""Levels of nesting of the syntax tree. cel-cpp refuses more than 32; this bound keeps
the parser and every walk over its tree far from the interpreter's recursion limit."""

RESERVED: Final = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return", "var", "void", "while",
})  # fmt: skip
"""Identifiers CEL reserves: not a variable or function name, but a field may be one."""


# --- the lexer -----------------------------------------------------------------------

_TOKEN: Final = re.compile(
    r"""
    (?P<space>[\t\n\f\r ]+|//[^\n]*)
    |(?P<string>[bB]?(?:
        [rR](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n\r]*"|'[^'\n\r]*')
        |\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''
        |"(?:\\[^\n\r]|[^\\"\n\r])*"|'(?:\\[^\n\r]|[^\\'\n\r])*'))
    |(?P<double>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)
    |(?P<uint>(?:0x[0-9a-fA-F]+|\d+)[uU])
    |(?P<int>0x[0-9a-fA-F]+|\d+)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<quoted>`[A-Za-z0-9_./\- ]+`)
    |(?P<op>==|!=|<=|>=|&&|\|\||[-<>!+*/%?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
_KEYWORDS: Final = {"true": "bool", "false": "bool", "null": "null", "in": "op"}
_STRING_START: Final = re.compile(r"[bB]?[rR]?(?:\"\"\"|'''|\"|')")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # space, string, double, uint, int, ident, quoted, op, bool, null, end
    text: str
    start: int
    end: int


def _tokens(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    index, length = 0, len(source)
    match = _TOKEN.match
    while index < length:
        found = match(source, index)
        if found is None:
            if _STRING_START.match(source, index):
                raise ParseError("unterminated string literal", source, index)
            raise ParseError(f"unexpected character {source[index]!r}", source, index)
        kind = found.lastgroup or ""
        end = found.end()
        if kind != "space":
            text = found.group()
            if kind == "ident":
                kind = _KEYWORDS.get(text, kind)
            tokens.append(_Token(kind, text, index, end))
        index = end
    tokens.append(_Token("end", "", length, length))
    return tokens


# --- literals ------------------------------------------------------------------------

_ESCAPE: Final = re.compile(
    r"\\(?:([abfnrtv\\?\"'`])|[xX]([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})"
    r"|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|([\s\S]?))"
)
_SIMPLE: Final = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`",
}  # fmt: skip


def _string(token: _Token, source: str) -> Literal:
    """The value of a string or bytes literal token."""
    text = token.text
    is_bytes = text[0] in "bB"
    prefix = 1 if is_bytes else 0
    raw = text[prefix] in "rR"
    prefix += raw
    quote = 3 if text.startswith(('"""', "'''"), prefix) else 1
    body = text[prefix + quote : len(text) - quote]
    if quote == 3:  # line breaks in the text read as line feeds, as in cel-cpp
        body = body.replace("\r\n", "\n").replace("\r", "\n")
    if raw:
        if (len(body) - len(body.rstrip("\\"))) % 2:  # cel-cpp: the quote looks escaped
            raise ParseError("a raw string cannot end in a backslash", source, token.start)
        value: str | bytes = _utf8(body) if is_bytes else body
    else:
        offset = token.start + prefix + quote
        value = _unescape(body, is_bytes, source, offset)
    return Literal(value, "bytes" if is_bytes else "string", token.start, token.end)


def _unescape(body: str, is_bytes: bool, source: str, offset: int) -> str | bytes:
    if "\\" not in body:
        return _utf8(body) if is_bytes else body
    parts: list[bytes] = []
    index = 0
    for escape in _ESCAPE.finditer(body):
        parts.append(_utf8(body[index : escape.start()]))
        simple, hex2, hex4, hex8, octal, bad = escape.groups()
        if simple is not None:
            parts.append(_SIMPLE[simple].encode())
        elif hex2 is not None or octal is not None:
            code = int(hex2, 16) if hex2 is not None else int(octal, 8)
            parts.append(bytes([code]) if is_bytes else chr(code).encode())
        elif (hex4 or hex8) and not is_bytes:
            code = int(hex4 or hex8, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise ParseError("invalid code point in escape", source, offset + escape.start())
            parts.append(chr(code).encode())
        else:
            what = "escape" if bad is None else f"escape \\{bad}"
            raise ParseError(f"invalid {what}", source, offset + escape.start())
        index = escape.end()
    parts.append(_utf8(body[index:]))
    joined = b"".join(parts)
    return joined if is_bytes else joined.decode("utf-8", "replace")


def _utf8(text: str) -> bytes:
    """UTF-8, lone surrogates (which a YAML or JSON string may hold) included."""
    return text.encode("utf-8", "surrogatepass")


def _number(token: _Token) -> Literal:
    text = token.text
    if token.kind == "double":
        return Literal(float(text), "double", token.start, token.end)
    digits = text[:-1] if token.kind == "uint" else text
    value = int(digits, 16) if digits.startswith("0x") else int(digits)
    return Literal(value, token.kind, token.start, token.end)


# --- the parser ----------------------------------------------------------------------

_PRECEDENCE: Final = {
    "||": 1,
    "&&": 2,
    **dict.fromkeys(("==", "!=", "<", "<=", ">", ">=", "in"), 3),
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
}


def parse(source: str) -> Node:
    """The syntax tree of ``source``; ``ParseError`` when it is not CEL (or too large)."""
    if len(source) > MAX_LENGTH:
        raise ParseError(f"expression longer than {MAX_LENGTH:,} characters", source, MAX_LENGTH)
    return _Parser(source).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = _tokens(source)
        self.index = 0
        self.nesting = 0

    def parse(self) -> Node:
        node = self.expr()
        if self.peek().kind != "end":
            self.fail(self.peek())
        return node

    # tokens

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def accept(self, text: str) -> _Token | None:
        token = self.tokens[self.index]
        if token.kind == "op" and token.text == text:
            self.index += 1
            return token
        return None

    def expect(self, text: str) -> _Token:
        token = self.accept(text)
        if token is None:
            self.fail(self.peek(), f"expected '{text}'")
        return token

    def fail(self, token: _Token, expected: str = "") -> NoReturn:
        found = "end of expression" if token.kind == "end" else repr(token.text[:24])
        message = f"unexpected {found}" + (f", {expected}" if expected else "")
        raise ParseError(message, self.source, token.start)

    def deeper(self, depth: int, start: int) -> int:
        if depth > MAX_DEPTH:
            raise ParseError(f"expression nests deeper than {MAX_DEPTH} levels", self.source, start)
        return depth

    # grammar

    def expr(self) -> Node:
        """Expr = ConditionalOr ["?" ConditionalOr ":" Expr]"""
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            self.deeper(self.nesting, self.peek().start)
        condition = self.binary()
        if self.accept("?") is None:
            self.nesting -= 1
            return condition
        then = self.binary()
        self.expect(":")
        otherwise = self.expr()
        self.nesting -= 1
        depth = self.deeper(1 + max(condition.depth, then.depth, otherwise.depth), condition.start)
        return Conditional(condition, then, otherwise, condition.start, otherwise.end, depth)

    def binary(self) -> Node:
        """ConditionalOr down to Multiplication, by precedence, without recursion."""
        operands = [self.unary()]
        operators: list[str] = []
        runs: set[int] = set()  # Logical nodes built here (not from parentheses)
        while True:
            token = self.peek()
            precedence = _PRECEDENCE.get(token.text) if token.kind == "op" else None
            if precedence is None:
                break
            self.advance()
            while operators and _PRECEDENCE[operators[-1]] >= precedence:
                self.reduce(operands, operators, runs)
            operators.append(token.text)
            operands.append(self.unary())
        while operators:
            self.reduce(operands, operators, runs)
        return operands[0]

    def reduce(self, operands: list[Node], operators: list[str], runs: set[int]) -> None:
        operator = operators.pop()
        right = operands.pop()
        left = operands.pop()
        node: Node
        if operator in ("&&", "||"):
            if isinstance(left, Logical) and left.operator == operator and id(left) in runs:
                items = (*left.operands, right)
                depth = max(left.depth, 1 + right.depth)
            else:
                items = (left, right)
                depth = 1 + max(left.depth, right.depth)
            node = Logical(operator, items, left.start, right.end, self.deeper(depth, left.start))
            runs.add(id(node))
        else:
            depth = self.deeper(1 + max(left.depth, right.depth), left.start)
            node = Binary(operator, left, right, left.start, right.end, depth)
        operands.append(node)

    def unary(self) -> Node:
        """Unary = Member | "!" {"!"} Member | "-" {"-"} Member"""
        token = self.peek()
        if token.kind != "op" or token.text not in ("!", "-"):
            return self.member()
        count = 0
        while self.accept(token.text) is not None:
            count += 1
        operand = self.member()
        if count % 2 == 0:
            return operand
        if (
            token.text == "-"
            and isinstance(operand, Literal)
            and operand.kind in ("int", "double")
            and self.tokens[self.index - 1].end == operand.end
        ):
            value = operand.value
            assert isinstance(value, int | float)
            return Literal(-value, operand.kind, token.start, operand.end)
        depth = self.deeper(1 + operand.depth, token.start)
        return Unary(token.text, operand, token.start, operand.end, depth)

    def member(self) -> Node:
        """Member = Primary | Member "." ["?"] Name ["(" [ExprList] ")"]
        | Member "[" ["?"] Expr "]" | Member "{" [FieldInits] "}" """
        node = self.primary()
        while True:
            token = self.peek()
            if token.kind != "op":
                return node
            if token.text == ".":
                self.advance()
                optional = self.accept("?") is not None
                name = self.advance()
                if name.kind == "quoted":
                    field = name.text[1:-1]
                elif name.kind == "ident":
                    field = name.text
                else:
                    self.fail(name, "expected a field name")
                if not optional and name.kind == "ident" and self.accept("(") is not None:
                    args = self.arguments()
                    end = self.tokens[self.index - 1].end
                    depth = 1 + max((arg.depth for arg in (node, *args)), default=0)
                    self.deeper(depth, node.start)
                    node = Call(node, field, args, False, name.start, node.start, end, depth)
                    continue
                depth = self.deeper(1 + node.depth, node.start)
                node = Select(node, field, optional, node.start, name.end, depth)
            elif token.text == "[":
                self.advance()
                optional = self.accept("?") is not None
                index = self.expr()
                end = self.expect("]").end
                depth = self.deeper(1 + max(node.depth, index.depth), node.start)
                node = Index(node, index, optional, node.start, end, depth)
            elif token.text == "{" and _qualified_name(node) is not None:
                self.advance()
                entries = self.entries("}", message=True)
                end = self.tokens[self.index - 1].end
                type_name = _qualified_name(node) or ""
                depth = self.deeper(_entries_depth(entries), node.start)
                node = CreateMessage(type_name, entries, node.start, end, depth)
            else:
                return node

    def primary(self) -> Node:
        """Primary = ["."] IDENT ["(" [ExprList] ")"] | "(" Expr ")" | "[" [ExprList] "]"
        | "{" [MapInits] "}" | LITERAL"""
        token = self.advance()
        kind = token.kind
        if kind == "op":
            if token.text == ".":
                name = self.advance()
                if name.kind != "ident":
                    self.fail(name, "expected a name")
                return self.name(name, token.start, leading_dot=True)
            if token.text == "(":
                node = self.expr()
                self.expect(")")
                return node
            if token.text == "[":
                return self.list(token)
            if token.text == "{":
                entries = self.entries("}", message=False)
                end = self.tokens[self.index - 1].end
                depth = self.deeper(_entries_depth(entries), token.start)
                return CreateMap(entries, token.start, end, depth)
        elif kind == "ident":
            return self.name(token, token.start, leading_dot=False)
        elif kind == "string":
            return _string(token, self.source)
        elif kind in ("int", "uint", "double"):
            return _number(token)
        elif kind == "bool":
            return Literal(token.text == "true", "bool", token.start, token.end)
        elif kind == "null":
            return Literal(None, "null", token.start, token.end)
        self.fail(token)

    def name(self, token: _Token, start: int, *, leading_dot: bool) -> Node:
        if token.text in RESERVED:
            raise ParseError(f"reserved identifier: {token.text}", self.source, token.start)
        if self.accept("(") is None:
            return Ident(token.text, leading_dot, start, token.end)
        args = self.arguments()
        end = self.tokens[self.index - 1].end
        depth = self.deeper(1 + max((arg.depth for arg in args), default=0), start)
        return Call(None, token.text, args, leading_dot, token.start, start, end, depth)

    def arguments(self) -> tuple[Node, ...]:
        """ExprList up to the closing ``)`` (the ``(`` is read)."""
        if self.accept(")") is not None:
            return ()
        args = [self.expr()]
        while self.accept(",") is not None:
            args.append(self.expr())
        self.expect(")")
        return tuple(args)

    def list(self, opening: _Token) -> Node:
        elements: list[Node] = []
        optional: list[bool] = []
        if self.peek().text == "," and self.peek(1).text == "]":
            self.advance()  # "[,]": cel-cpp reads the lone comma as a trailing one
        while self.peek().kind != "op" or self.peek().text != "]":
            optional.append(self.accept("?") is not None)
            elements.append(self.expr())
            if self.accept(",") is None:
                break
        end = self.expect("]").end
        depth = self.deeper(1 + max((e.depth for e in elements), default=0), opening.start)
        return CreateList(tuple(elements), tuple(optional), opening.start, end, depth)

    def entries(self, closing: str, *, message: bool) -> tuple[Entry, ...]:
        """Map or message entries up to ``closing`` (the ``{`` is read)."""
        entries: list[Entry] = []
        if self.peek().text == "," and self.peek(1).text == closing:
            self.advance()
        while self.peek().kind != "op" or self.peek().text != closing:
            optional = self.accept("?") is not None
            if message:
                name = self.advance()
                if name.kind not in ("ident", "quoted"):
                    self.fail(name, "expected a field name")
                text = name.text[1:-1] if name.kind == "quoted" else name.text
                key: Node = Literal(text, "string", name.start, name.end)
            else:
                key = self.expr()
            self.expect(":")
            entries.append(Entry(key, self.expr(), optional))
            if self.accept(",") is None:
                break
        self.expect(closing)
        return tuple(entries)


def _qualified_name(node: Node) -> str | None:
    """``a.b.C`` for a node that is only names and plain selections, else None."""
    parts: list[str] = []
    while isinstance(node, Select) and not node.optional:
        parts.append(node.field)
        node = node.operand
    if not isinstance(node, Ident):
        return None
    parts.append(("." if node.leading_dot else "") + node.name)
    return ".".join(reversed(parts))


def _entries_depth(entries: tuple[Entry, ...]) -> int:
    return 1 + max((max(e.key.depth, e.value.depth) for e in entries), default=0)
