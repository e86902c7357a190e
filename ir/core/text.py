"""The canonical text form of GraphIR (`.gir` files): printer and parser that round-trip.

    graph main(%x0: f32[2,3,8,8], %w1: param f32[4,3,3,3]) {
      %v2 = conv2d[stride=[1,1], padding=[1,1], dilation=[1,1]](%x0, %w1) : f32[2,4,8,8]
      %v3, %v4 = split[axis=1, sizes=[2,2]](%v2) : f32[2,2,8,8], f32[2,2,8,8]
      return %v3, %v4
    }

Control-flow instructions carry their bodies in braces after the result types, one nested
`graph` per block. `#` starts a comment. `parse(print_graph(g)) == g` for every concrete graph; the
printed text is also the dedup key and the reducer's canonical form (see `canonical_text`).
Parsing builds plain data only: a seed file can never run code.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ir.core.dtypes import DType
from ir.core.graph import Graph, Inst, Value
from ir.core.op import OpError, lookup_op
from ir.core.types import TensorType

_T = TypeVar("_T")


class ParseError(ValueError):
    """A malformed `.gir` text; the message is one line: `source:line:col: what is wrong`."""


# ---------------------------------------------------------------------------------------------
# printer

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"true", "false", "param", "graph", "return"}


def format_attr(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, DType):
        return v.short
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return v if _IDENT.match(v) and v not in _RESERVED else json.dumps(v)
    if isinstance(v, tuple):
        return "[" + ",".join(format_attr(x) for x in v) + "]"
    return str(v)  # symbolic (z3) values: printable for debugging, not parseable


def format_inst_head(inst: Inst) -> str:
    """One line for an instruction, without its blocks (also used in error messages)."""
    res = ", ".join(f"%{r.name}" for r in inst.results)
    attrs = inst.op.attrs()
    attr_s = "[" + ", ".join(f"{k}={format_attr(v)}" for k, v in attrs.items()) + "]" if attrs else ""
    args = ", ".join(f"%{a}" for a in inst.args)
    types = ", ".join(str(r.type) for r in inst.results)
    if not inst.results:  # an op called for its effect alone (a custom op that only mutates)
        return f"{inst.op.name}{attr_s}({args}) : ()"
    return f"{res} = {inst.op.name}{attr_s}({args}) : {types}"


def _print(g: Graph, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    decls = [f"%{v.name}: {v.type}" for v in g.inputs] + [f"%{v.name}: param {v.type}" for v in g.params]
    out.append(f"{pad}graph {g.name}({', '.join(decls)}) {{")
    for inst in g.insts:
        head = format_inst_head(inst)
        if not inst.blocks:
            out.append(f"{pad}  {head}")
            continue
        out.append(f"{pad}  {head} {{")
        for block in inst.blocks:
            _print(block, indent + 2, out)
        out.append(f"{pad}  }}")
    out.append(f"{pad}  return {', '.join('%' + o for o in g.outputs)}")
    out.append(f"{pad}}}")


def print_graph(g: Graph) -> str:
    out: list[str] = []
    _print(g, 0, out)
    return "\n".join(out) + "\n"


def canonical_text(g: Graph) -> str:
    """The text of `g` with values renamed in definition order: equal for graphs that differ only
    in value names. Used as the dedup key and the reducer's canonical form."""
    from ir.core.rewrite import rename_canonically

    return print_graph(rename_canonically(g))


def graph_hash(g: Graph) -> str:
    return hashlib.sha1(canonical_text(g).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# parser

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|\#[^\n]*)
      |(?P<value>%[A-Za-z0-9_]+)
      |(?P<float>-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|inf|nan))
      |(?P<int>-?\d+)
      |(?P<string>"(?:[^"\\]|\\.)*")
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<punct>[()\[\]{}:,=])
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    text: str
    line: int
    col: int


def _tokenize(text: str, source: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ParseError(f"{source}:{line}:{pos - line_start + 1}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), line, pos - line_start + 1))
        nl = m.group().count("\n")
        if nl:
            line += nl
            line_start = m.start() + m.group().rindex("\n") + 1
        pos = m.end()
    toks.append(_Tok("eof", "end of input", line, pos - line_start + 1))
    return toks


class _Parser:
    def __init__(self, text: str, source: str):
        self.toks = _tokenize(text, source)
        self.i = 0
        self.source = source

    def error(self, msg: str, tok: _Tok | None = None) -> ParseError:
        t = tok or self.toks[self.i]
        return ParseError(f"{self.source}:{t.line}:{t.col}: {msg}")

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def next(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str) -> _Tok:
        t = self.next()
        if t.text != text:
            raise self.error(f"expected {text!r} but found {t.text!r}", t)
        return t

    def accept(self, text: str) -> bool:
        if self.peek().text == text and self.peek().kind != "string":
            self.i += 1
            return True
        return False

    def expect_kind(self, kind: str, what: str) -> _Tok:
        t = self.next()
        if t.kind != kind:
            raise self.error(f"expected {what} but found {t.text!r}", t)
        return t

    def value_name(self) -> str:
        return self.expect_kind("value", "a value name like %x0").text[1:]

    def sep_list(self, close: str, item: Callable[[], _T]) -> list[_T]:
        items: list[_T] = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            self.expect(",")

    def tensor_type(self) -> TensorType:
        t = self.expect_kind("ident", "a dtype like f32")
        try:
            dtype = DType.from_name(t.text)
        except ValueError as e:
            raise self.error(str(e), t) from None
        self.expect("[")
        dims = self.sep_list("]", lambda: int(self.expect_kind("int", "a dimension").text))
        return TensorType(tuple(dims), dtype)

    def literal(self) -> Any:
        t = self.next()
        if t.kind == "int":
            return int(t.text)
        if t.kind == "float":
            return float(t.text)
        if t.kind == "string":
            return json.loads(t.text)
        if t.kind == "ident":
            return {"true": True, "false": False}.get(t.text, t.text)
        if t.text == "[":
            return tuple(self.sep_list("]", self.literal))
        raise self.error(f"expected an attribute value but found {t.text!r}", t)

    def attr(self) -> tuple[str, Any]:
        key = self.expect_kind("ident", "an attribute name").text
        self.expect("=")
        return key, self.literal()

    def graph(self) -> Graph:
        kw = self.next()
        if kw.text != "graph" or kw.kind != "ident":
            raise self.error(f"expected 'graph' but found {kw.text!r}", kw)
        name = self.expect_kind("ident", "a graph name").text
        self.expect("(")
        inputs: list[Value] = []
        params: list[Value] = []

        def decl() -> None:
            vname = self.value_name()
            self.expect(":")
            is_param = self.accept("param")
            (params if is_param else inputs).append(Value(vname, self.tensor_type()))

        self.sep_list(")", decl)
        self.expect("{")
        insts: list[Inst] = []
        while not (self.peek().kind == "ident" and self.peek().text == "return"):
            insts.append(self.inst())
        self.next()
        outputs = [self.value_name()]
        while self.accept(","):
            outputs.append(self.value_name())
        self.expect("}")
        return Graph(name, tuple(inputs), tuple(insts), tuple(outputs), tuple(params))

    def inst(self) -> Inst:
        results: list[str] = []
        call = self.peek().kind == "ident" and self.toks[self.i + 1].text in ("[", "(")
        if not call:  # else no results: an op called for its effect alone
            results.append(self.value_name())
            while self.accept(","):
                results.append(self.value_name())
            self.expect("=")
        op_tok = self.expect_kind("ident", "an op name")
        attrs: dict[str, Any] = {}
        if self.accept("["):
            for k, v in self.sep_list("]", self.attr):
                if k in attrs:
                    raise self.error(f"attribute {k!r} given twice", op_tok)
                attrs[k] = v
        try:
            op = lookup_op(op_tok.text).from_attrs(attrs)
        except OpError as e:
            raise self.error(str(e), op_tok) from None
        self.expect("(")
        args = self.sep_list(")", self.value_name)
        self.expect(":")
        types: list[TensorType] = []
        if not results and self.accept("("):
            self.expect(")")
        else:
            types.append(self.tensor_type())
            while self.accept(","):
                types.append(self.tensor_type())
        if len(types) != len(results):
            raise self.error(f"{len(results)} results but {len(types)} types", op_tok)
        blocks: list[Graph] = []
        if self.accept("{"):
            while not self.accept("}"):
                blocks.append(self.graph())
        return Inst(op, tuple(args), tuple(Value(n, t) for n, t in zip(results, types, strict=True)), tuple(blocks))


def parse(text: str, source: str = "<text>") -> Graph:
    """Parse one graph; raises ParseError with `source:line:col` on malformed input."""
    p = _Parser(text, source)
    g = p.graph()
    if p.peek().kind != "eof":
        raise p.error(f"expected end of input but found {p.peek().text!r}")
    return g


def load(path: str | os.PathLike[str]) -> Graph:
    from pathlib import Path

    p = Path(path)
    return parse(p.read_text(), str(p))
