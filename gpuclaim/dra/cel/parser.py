"""Parse CEL text into :mod:`dra.cel.ast`, expanding macros as cel-go does.

The grammar is cel-python's (``cel.lark``, with optional selection added), parsed the way
``celpy.celparser.CELParser`` parses it: lark LALR, positions propagated, ``true``/``false``
re-tokenised as literals. Unlike cel-python we keep every token, because cel-go reports errors at
the operator / `.` / `[` / `(` token.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import lark
from celpy import evaluation as _celpy_eval

from gpuclaim.dra.cel import ast
from gpuclaim.dra.cel.errors import CelCompileError, error_at

_BINARY = {
    "relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
    "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in",
    "addition_add": "_+_", "addition_sub": "_-_",
    "multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_",
}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _literal_callback(t: lark.Token) -> lark.Token:
    if t.value in ("true", "false"):
        return lark.Token.new_borrow_pos("BOOL_LIT", t.value, t)  # keep its position for error messages
    return t


@cache
def _lark() -> lark.Lark:
    return lark.Lark(
        (Path(__file__).parent / "cel.lark").read_text(),
        parser="lalr",
        start="expr",
        g_regex_flags=re.M,
        lexer_callbacks={"IDENT": _literal_callback},
        propagate_positions=True,
        maybe_placeholders=False,
        priority="invert",
        keep_all_tokens=True,
    )


def parse(text: str) -> ast.Expr:
    try:
        tree = _lark().parse(text)
    except lark.exceptions.UnexpectedCharacters as ex:
        raise _syntax_error(text, ex.pos_in_stream or 0, _token_recognition(text, ex.pos_in_stream or 0)) from None
    except lark.exceptions.UnexpectedEOF:
        raise _syntax_error(text, len(text), "mismatched input '<EOF>'") from None
    except lark.exceptions.UnexpectedToken as ex:
        tok = ex.token
        pos = tok.start_pos if tok.start_pos is not None else len(text)
        shown = "<EOF>" if tok.type == "$END" else str(tok.value)
        raise _syntax_error(text, pos, f"mismatched input '{shown}' expecting one of {_expected(ex)}") from None
    except lark.exceptions.LarkError as ex:  # pragma: no cover - lark's other errors carry no position
        raise _syntax_error(text, 0, str(ex).splitlines()[0]) from None
    return _qualified_types(_Builder(text).expr(tree))


# cel-go's standard type variables with a qualified name: the checker resolves `google.protobuf.Duration` as one
# identifier (containers.ToQualifiedName) before any variable, so the select chain is that identifier here
_QUALIFIED_TYPES = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})


def _dotted(e: ast.Expr) -> str | None:
    if isinstance(e, ast.Ident):
        return e.name
    if isinstance(e, ast.Select) and not e.test_only:
        head = _dotted(e.operand)
        return None if head is None else f"{head}.{e.field}"
    return None


def _qualified_types(e: ast.Expr) -> ast.Expr:
    if isinstance(e, ast.Select) and not e.test_only and _dotted(e) in _QUALIFIED_TYPES:
        root = e.operand
        while isinstance(root, ast.Select):
            root = root.operand
        return ast.Ident(str(_dotted(e)), root.pos)
    match e:
        case ast.Select():
            e.operand = _qualified_types(e.operand)
        case ast.Call():
            e.target = None if e.target is None else _qualified_types(e.target)
            e.args = [_qualified_types(a) for a in e.args]
        case ast.ListExpr():
            e.elements = [_qualified_types(x) for x in e.elements]
        case ast.MapExpr():
            e.entries = [(_qualified_types(k), _qualified_types(v)) for k, v in e.entries]
        case ast.Comprehension():
            e.iter_range, e.accu_init = _qualified_types(e.iter_range), _qualified_types(e.accu_init)
            e.loop_cond, e.loop_step = _qualified_types(e.loop_cond), _qualified_types(e.loop_step)
            e.result = _qualified_types(e.result)
            e.filter = None if e.filter is None else _qualified_types(e.filter)
    return e


def _expected(ex: lark.exceptions.UnexpectedToken) -> str:
    return "{" + ", ".join(sorted(ex.expected)) + "}"


def _token_recognition(text: str, pos: int) -> str:
    # ANTLR (cel-go) reports the text its lexer consumed before failing: an unterminated string runs
    # to the end, a lone `=`/`&`/`|` includes the character after it.
    ch = text[pos]
    if ch in "'\"":
        shown = text[pos:].split("\n", 1)[0]
    elif ch in "=&|" and pos + 1 < len(text):
        shown = text[pos : pos + 2]
    else:
        shown = ch
    return f"token recognition error at: '{shown}'"


def _syntax_error(text: str, pos: int, detail: str) -> CelCompileError:
    return error_at(text, pos, f"Syntax error: {detail}")


_PASS_THROUGH = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
                           "unary", "member", "primary"})
# cel-go's parser limits (parser.go, default maxRecursionDepth 250): nested `expr` rules (parentheses, call
# arguments, list and map literals, indexes, conditional branches) and left-recursive chains (operators,
# selections, indexes, method calls). Both are checked before anything recurses deeper.
_NESTING = frozenset({"paren_expr", "list_lit", "map_lit", "ident_arg", "member_dot_arg", "member_index",
                      "member_index_opt"})
_CHAINS = frozenset({"relation", "addition", "multiplication", "member_dot", "member_dot_opt", "member_dot_arg",
                     "member_index", "member_index_opt"})
_MAX_DEPTH = 250


def _limit(message: str) -> CelCompileError:
    # cel-go reports these without a source location
    return CelCompileError(f"compilation failed: ERROR: <input>:-1:0: {message}")


def _balanced(fn: str, terms: list[ast.Expr], ops: list[int], lo: int, hi: int) -> ast.Expr:
    """cel-go's balancer.balancedTree: a logical chain as a balanced tree."""
    mid = (lo + hi + 1) // 2
    left = terms[mid] if mid == lo else _balanced(fn, terms, ops, lo, mid - 1)
    right = terms[mid + 1] if mid == hi else _balanced(fn, terms, ops, mid + 1, hi)
    return ast.Call(fn, [left, right], ops[mid])


class _Builder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.nest = 1  # the whole expression is one `expr`
        self.chain = 0

    def fail(self, pos: int, message: str) -> CelCompileError:
        return error_at(self.text, pos, message)

    # -- tree walking -------------------------------------------------------------------------------
    def expr(self, t: lark.Tree[Any]) -> ast.Expr:
        # Pass-through rules (one child) are skipped in a loop: a deep expression must not cost Python frames
        # per grammar level.
        while t.data in _PASS_THROUGH and len(t.children) == 1 and isinstance(t.children[0], lark.Tree):
            t = t.children[0]
        name = t.data
        nesting = name in _NESTING or (name == "expr" and len(t.children) > 1)  # a conditional's branches
        if nesting or (name in _CHAINS and len(t.children) > 1):
            limit, what = (self.nest, "nest") if nesting else (self.chain, "chain")
            if what == "nest":
                self.nest += 1
                if self.nest > _MAX_DEPTH:
                    raise _limit(f"expression recursion limit exceeded: {_MAX_DEPTH}")
            else:
                self.chain += 1
                if self.chain > _MAX_DEPTH:
                    raise _limit("max recursion depth exceeded")
            try:
                return self.node(t)
            finally:
                if what == "nest":
                    self.nest = limit
                else:
                    self.chain = limit
        return self.node(t)

    def node(self, t: lark.Tree[Any]) -> ast.Expr:
        kids = [c for c in t.children]
        name = t.data
        if name in ("expr",):
            if len(kids) == 1:
                return self.expr(kids[0])
            cond, q, yes, _colon, no = kids
            return ast.Call("_?_:_", [self.expr(cond), self.expr(yes), self.expr(no)], _tok_pos(q))
        if name in ("conditionalor", "conditionaland"):
            if len(kids) == 1:
                return self.expr(kids[0])
            # cel-go balances chains of one logical operator (parser/helper.go balancer): no depth limit
            terms: list[Any] = []
            ops: list[int] = []
            node = t
            while node.data == name and len(node.children) == 3:
                left, op, right = node.children
                terms.append(right)
                ops.append(_tok_pos(op))
                node = left
            terms.append(node)
            terms.reverse()
            ops.reverse()
            fn = "_||_" if name == "conditionalor" else "_&&_"
            built = [self.expr(x) for x in terms]
            return _balanced(fn, built, ops, 0, len(ops) - 1)
        if name in ("relation", "addition", "multiplication"):
            if len(kids) == 1:
                return self.expr(kids[0])
            op_tree, right = kids
            left, op = op_tree.children
            fn = _BINARY[op_tree.data]
            args = [self.expr(left), self.expr(right)]
            if fn == "@in":
                return ast.Call("@in", args, _tok_pos(op))
            return ast.Call(fn, args, _tok_pos(op))
        if name == "unary":
            if len(kids) == 1:
                return self.expr(kids[0])
            # a chain of `!` / `-` (cel-go has no depth limit on it): walked in a loop
            chain: list[tuple[str, int]] = []
            node = t
            while node.data == "unary" and len(node.children) == 2:
                op, node = node.children
                chain.append((op.data, _tok_pos(op.children[0])))
            kinds = [kind for kind, _ in chain]
            if len(set(kinds)) > 1:
                # cel-go's grammar: unary is `'!'+ member | '-'+ member`, never both
                switch = next(i for i, k in enumerate(kinds) if k != kinds[0])
                raise _syntax_error(self.text, chain[switch][1] + 1, "no viable alternative at input")
            inner = self.expr(node)
            signed = _signed_literal(node) if kinds[0] == "unary_neg" else None
            if signed is not None:
                # cel-go's lexer has no signed numbers: `---1` is three `-` ops on the literal 1 (the `+` loop is
                # greedy), so `--9223372036854775808` overflows and `---1` is a negation call
                inner = self.literal(lark.Token(signed.type, str(signed)[1:], start_pos=(signed.start_pos or 0) + 1))
                chain.append(("unary_neg", _tok_pos(signed)))
            if len(chain) % 2 == 0:
                return inner  # cel-go's parser drops an even run of `!` or `-` (visitLogicalNot / visitNegate)
            kind, pos = chain[0]
            if kind == "unary_not":
                return ast.Call("!_", [inner], pos)
            return ast.Call("-_", [inner], pos)  # never folded: `-(1)` is a call upstream (its cost counts)
        if name in ("member", "primary"):
            return self.expr(kids[0])
        if name == "member_dot":
            operand, dot, ident = kids
            return ast.Select(self.expr(operand), str(ident), _tok_pos(dot))
        if name == "member_dot_opt":
            operand, dot, _q, ident = kids
            pos = _tok_pos(dot)
            return ast.Call("_?._", [self.expr(operand), ast.Const(str(ident), "string", pos)], pos)
        if name == "member_dot_arg":
            operand, _dot, ident, paren, *rest = kids
            return self.call(str(ident), self.args(rest), _tok_pos(paren), target=self.expr(operand))
        if name == "member_index":
            operand, bracket, index, _close = kids
            return ast.Call("_[_]", [self.expr(operand), self.expr(index)], _tok_pos(bracket))
        if name == "member_index_opt":
            operand, bracket, _q, index, _close = kids
            return ast.Call("_[?_]", [self.expr(operand), self.expr(index)], _tok_pos(bracket))
        if name == "member_object":
            raise self.fail(_tok_pos(kids[1]), "message construction is not supported in this environment")
        if name == "ident":
            tok = kids[0]
            return ast.Ident(str(tok), _tok_pos(tok))
        if name == "ident_arg":
            ident, paren, *rest = kids
            return self.call(str(ident), self.args(rest), _tok_pos(paren))
        if name in ("dot_ident", "dot_ident_arg"):
            raise self.fail(_tok_pos(kids[0]), "leading '.' names are not supported in this environment")
        if name == "paren_expr":
            return self.expr(kids[1])
        if name == "list_lit":
            elements: list[ast.Expr] = []
            optional: set[int] = set()
            for k in kids[1:]:
                if isinstance(k, lark.Tree) and k.data == "listinits":
                    for n, el in enumerate(c for c in k.children if isinstance(c, lark.Tree)):
                        *mark, value = el.children
                        if mark:
                            optional.add(n)
                        elements.append(self.expr(value))
            return ast.ListExpr(elements, _tok_pos(kids[0]), frozenset(optional))
        if name == "map_lit":
            entries: list[tuple[ast.Expr, ast.Expr]] = []
            opt_entries: set[int] = set()
            for k in kids[1:]:
                if isinstance(k, lark.Tree) and k.data == "mapinits":
                    items = [c for c in k.children if isinstance(c, lark.Tree)]
                    for i in range(0, len(items), 2):
                        *mark, key = items[i].children
                        if mark:
                            opt_entries.add(i // 2)
                        entries.append((self.expr(key), self.expr(items[i + 1])))
            return ast.MapExpr(entries, _tok_pos(kids[0]), frozenset(opt_entries))
        if name == "literal":
            assert isinstance(kids[0], lark.Token)  # the grammar's literal rule holds one token
            return self.literal(kids[0])
        raise self.fail(_tree_pos(t), f"unsupported syntax {name}")  # pragma: no cover

    def args(self, rest: list[object]) -> list[ast.Expr]:
        for k in rest:
            if isinstance(k, lark.Tree) and k.data == "exprlist":
                return [self.expr(c) for c in k.children if isinstance(c, lark.Tree)]
        return []

    def number(self, value: object, kind: str, pos: int) -> ast.Const:
        if kind == "int" and not _INT64_MIN <= value <= _INT64_MAX:  # type: ignore[operator]
            raise self.fail(pos, "invalid int literal")
        return ast.Const(value, kind, pos)

    def literal(self, tok: lark.Token) -> ast.Const:
        pos, v, ty = _tok_pos(tok), str(tok), tok.type
        if ty == "INT_LIT":
            return self.number(int(v, 16) if "x" in v else int(v), "int", pos)  # int() takes "-0x1" with its sign
        if ty == "UINT_LIT":
            n = int(v[:-1], 16) if "x" in v else int(v[:-1])
            if not 0 <= n < 2**64:
                raise self.fail(pos, "invalid uint literal")
            return ast.Const(n, "uint", pos)
        if ty == "FLOAT_LIT":
            return ast.Const(float(v), "double", pos)
        if ty in ("STRING_LIT", "MLSTRING_LIT"):
            try:
                return ast.Const(str(_celpy_eval.celstr(tok)), "string", pos)
            except ValueError as exc:
                raise self.fail(pos, f"Syntax error: invalid string literal: {exc}") from None
        if ty == "BYTES_LIT":
            return ast.Const(bytes(_celpy_eval.celbytes(tok)), "bytes", pos)
        if ty == "BOOL_LIT":
            return ast.Const(v == "true", "bool", pos)
        return ast.Const(None, "null", pos)

    # -- macros -------------------------------------------------------------------------------------
    def call(self, fn: str, args: list[ast.Expr], pos: int, target: ast.Expr | None = None) -> ast.Expr:
        if target is None:
            if fn == "has":
                if len(args) != 1 or not isinstance(args[0], ast.Select):
                    raise self.fail(pos, "invalid argument to has() macro")
                sel = args[0]
                return ast.Select(sel.operand, sel.field, sel.pos, test_only=True)
            return ast.Call(fn, args, pos)
        if isinstance(target, ast.Ident) and target.name == "cel" and fn == "bind" and len(args) == 3:
            var = self.simple_name(args[0])
            return ast.Comprehension(
                "#unused", ast.ListExpr([], pos), var, args[1], ast.Const(False, "bool", pos),
                ast.Ident(var, pos), args[2], pos, macro="bind",
            )
        if (fn in ("all", "exists", "exists_one", "filter") and len(args) == 2) or (
            fn == "map" and len(args) in (2, 3)
        ):
            return self.comprehension(fn, target, args, pos)
        if fn == "sortBy" and len(args) == 2:
            var = self.simple_name(args[0])
            return ast.Comprehension(
                var, target, ast.ACCU, ast.ListExpr([], pos), ast.Const(True, "bool", pos), args[1],
                ast.Ident(ast.ACCU, pos), pos, macro="sortBy",
            )
        if (fn in ("all", "exists", "existsOne", "exists_one") and len(args) == 3) or (
            fn in ("transformList", "transformMap", "transformMapEntry") and len(args) in (3, 4)
        ):
            return self.two_variable(fn, target, args, pos)
        return ast.Call(fn, args, pos, target=target)

    def two_variable(self, fn: str, target: ast.Expr, args: list[ast.Expr], pos: int) -> ast.Comprehension:
        """cel-go's ext.TwoVarComprehensions (in the 1.34 environment since 1.32): index/key and value."""
        v1, v2 = self.simple_name(args[0]), self.simple_name(args[1])
        if v1 == v2:
            raise self.fail(args[1].pos, "duplicate variable name")
        if ast.ACCU in (v1, v2):
            raise self.fail(args[0].pos, "iteration variable overwrites accumulator variable")
        # ext.TwoVarComprehensions declares both spellings of existsOne (ext/comprehensions.go)
        macro = {"all": "all2", "exists": "exists2", "existsOne": "existsOne2", "exists_one": "existsOne2"}.get(fn, fn)
        filt = args[2] if len(args) == 4 else None
        init: ast.Expr
        if macro in ("all2", "exists2"):
            init = ast.Const(macro == "all2", "bool", pos)
        elif macro == "existsOne2":
            init = ast.Const(0, "int", pos)
        elif macro == "transformList":
            init = ast.ListExpr([], pos)
        else:
            init = ast.MapExpr([], pos)
        return ast.Comprehension(
            v1, target, ast.ACCU, init, ast.Const(True, "bool", pos), args[-1], ast.Ident(ast.ACCU, pos), pos,
            macro=macro, iter_var2=v2, filter=filt,
        )

    def simple_name(self, e: ast.Expr) -> str:
        if not isinstance(e, ast.Ident):
            raise self.fail(e.pos, "argument must be a simple name")
        return e.name

    def comprehension(self, fn: str, target: ast.Expr, args: list[ast.Expr], pos: int) -> ast.Comprehension:
        var = self.simple_name(args[0])
        acc = ast.ACCU

        def ident() -> ast.Ident:
            return ast.Ident(acc, pos)

        t, f = ast.Const(True, "bool", pos), ast.Const(False, "bool", pos)
        init: ast.Expr
        cond: ast.Expr
        if fn == "all":
            init, cond = t, ast.Call("@not_strictly_false", [ident()], pos)
            step: ast.Expr = ast.Call("_&&_", [ident(), args[1]], pos)
            result: ast.Expr = ident()
        elif fn == "exists":
            init = f
            cond = ast.Call("@not_strictly_false", [ast.Call("!_", [ident()], pos)], pos)
            step, result = ast.Call("_||_", [ident(), args[1]], pos), ident()
        elif fn in ("exists_one", "existsOne"):
            init, cond = ast.Const(0, "int", pos), ast.Const(True, "bool", pos)
            plus = ast.Call("_+_", [ident(), ast.Const(1, "int", pos)], pos)
            step = ast.Call("_?_:_", [args[1], plus, ident()], pos)
            result = ast.Call("_==_", [ident(), ast.Const(1, "int", pos)], pos)
            fn = "exists_one"
        else:
            init, cond = ast.ListExpr([], pos), ast.Const(True, "bool", pos)
            item = args[-1] if fn == "map" else ast.Ident(var, pos)
            append = ast.Call("_+_", [ident(), ast.ListExpr([item], pos)], pos)
            step = append if fn == "map" and len(args) == 2 else ast.Call("_?_:_", [args[1], append, ident()], pos)
            result = ident()
        return ast.Comprehension(var, target, acc, init, cond, step, result, pos, macro=fn)


def _signed_literal(node: lark.Tree[Any]) -> lark.Token | None:
    """The number token of a bare literal operand (not parenthesized) written with its `-` sign."""
    while isinstance(node, lark.Tree) and node.data in ("unary", "member", "primary") and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, lark.Tree) and node.data == "literal" and len(node.children) == 1:
        tok = node.children[0]
        if isinstance(tok, lark.Token) and tok.type in ("INT_LIT", "UINT_LIT", "FLOAT_LIT") and tok.startswith("-"):
            return tok
    return None


def _tok_pos(tok: object) -> int:
    if isinstance(tok, lark.Token):
        return tok.start_pos or 0
    if isinstance(tok, lark.Tree):
        return _tree_pos(tok)
    return 0  # pragma: no cover


def _tree_pos(t: lark.Tree[Any]) -> int:
    return getattr(t.meta, "start_pos", 0) or 0

