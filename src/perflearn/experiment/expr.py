"""Safe arithmetic expressions over named values: knob constraints and derived metrics.

Only numbers, names, arithmetic, comparisons, boolean operators and a few
functions are allowed; anything else is refused when the spec is read.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

def _power(base, exponent):
    """``**`` whose integer result stays printable: ``(x + 1) ** 10 ** 10`` would take
    gigabytes and minutes as a Python int; past 10,000 bits it is refused as too large."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * abs(base).bit_length() > 10_000:
            raise ValueError(f"{base} ** {exponent} is too large")
    return operator.pow(base, exponent)


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _power,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_FUNCTIONS = {
    "min": min, "max": max, "abs": abs, "log": math.log, "log2": math.log2, "log10": math.log10,
    "sqrt": math.sqrt, "exp": math.exp, "int": int, "float": float, "str": str,
}


class Expression:
    """A parsed expression; ``names`` are the values it reads."""

    def __init__(self, source: str):
        self.source = source
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"not a valid expression ({exc.msg}): {source!r}") from None
        self.names: set[str] = set()
        self._check(tree.body)
        self._code = tree.body

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            if node.id not in _FUNCTIONS:
                self.names.add(node.id)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, str, bool)):
                raise ValueError(f"constant {node.value!r} is not allowed in {self.source!r}")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            self._check(node.operand)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self._check(value)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            self._check(node.left)
            for comparator in node.comparators:
                self._check(comparator)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self._check(element)
        elif isinstance(node, ast.IfExp):
            for part in (node.test, node.body, node.orelse):
                self._check(part)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
        ):
            for arg in node.args:
                self._check(arg)
        else:
            raise ValueError(f"{ast.unparse(node)!r} is not allowed in an expression ({self.source!r})")

    def __call__(self, values: Mapping[str, object]):
        return self._eval(self._code, values)

    def _eval(self, node: ast.AST, values: Mapping[str, object]):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, values), self._eval(node.right, values))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, values))
        if isinstance(node, ast.BoolOp):
            results = (self._eval(v, values) for v in node.values)
            return all(results) if isinstance(node.op, ast.And) else any(results)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, values)
            for op, comparator in zip(node.ops, node.comparators):
                right = self._eval(comparator, values)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._eval(e, values) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, values) else node.orelse, values)
        if isinstance(node, ast.Call):
            return _FUNCTIONS[node.func.id](*(self._eval(a, values) for a in node.args))
        raise AssertionError(f"unchecked node {node!r}")  # _check refuses everything else
