"""cel-cpp's iteration limit and short-circuits, taught to cel-python's evaluator.

cel-cpp stops an evaluation at its 10,000th comprehension iteration
(``scanner.cel.budget``). For both engines to stop on the same input, cel-python must
count the same iterations, which means doing the same work cel-cpp does:

* ``&&`` and ``||`` skip their right operand once the left one decides the result
  (cel-python evaluates both; values are the same either way, the work is not);
* ``all`` stops at the first ``false``, ``exists`` at the first ``true``; an error
  does not stop them (``false`` or ``true`` later still decides, as in cel-cpp). Like
  cel-cpp, a loop that stops early counts one more iteration: the one whose loop
  condition check stopped it;
* a map is iterated by its keys in sorted order, after reading them, which counts one
  iteration per key (cel-cpp reads them with a comprehension: ``scanner.cel.k8s.rewrite``);
* ``map``, ``filter`` and ``exists_one`` visit every element even after an error,
  and keep the first error as their result; ``map(x, p, t)`` (celpy fails on it)
  transforms the elements its predicate keeps, one iteration each.

Values follow the ``&&`` and ``||`` the python engine uses
(``scanner.cel.celpy_functions``), so only the amount of work changes;
``tests/e2e/hostile/test_rule_cost.py`` checks that both engines stop at the same list
length for each kind of comprehension.
"""

from __future__ import annotations

from typing import Any, TypeAlias, cast

import lark
from celpy import InterpretedRunner, celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator

from scanner.cel.budget import MAX_ITERATIONS
from scanner.cel.celpy_functions import logical_and, logical_or

_Tree: TypeAlias = "lark.Tree[Any]"


class IterationLimit(Exception):
    """The evaluation reached ``MAX_ITERATIONS``; it is abandoned, not turned into a value."""


_and = logical_and
_or = logical_or


class CountingEvaluator(Evaluator):
    """celpy's tree-walking evaluator with cel-cpp's iteration count and short-circuits."""

    def __init__(self, ast: _Tree, activation: Activation, left: list[int] | None = None):
        super().__init__(ast, activation)
        # Iterations left, shared by every nested evaluator of one evaluation.
        self.left = left if left is not None else [MAX_ITERATIONS]

    def sub_evaluator(self, ast: _Tree) -> Evaluator:
        return CountingEvaluator(ast, self.activation, self.left)

    def conditionalor(self, tree: _Tree) -> Any:
        if len(tree.children) != 2:
            return super().conditionalor(tree)
        left = self.visit(cast(_Tree, tree.children[0]))
        if isinstance(left, celtypes.BoolType) and left:
            return left
        return self._logical("_||_", tree, left)

    def conditionaland(self, tree: _Tree) -> Any:
        if len(tree.children) != 2:
            return super().conditionaland(tree)
        left = self.visit(cast(_Tree, tree.children[0]))
        if isinstance(left, celtypes.BoolType) and not left:
            return left
        return self._logical("_&&_", tree, left)

    def _logical(self, name: str, tree: _Tree, left: Any) -> Any:
        right = self.visit(cast(_Tree, tree.children[1]))
        try:
            return self.activation.resolve_function(name)(left, right)
        except TypeError as error:
            message = f"found no matching overload for {name} applied to '({left!r}, {right!r})'"
            return CELEvalError(message, error.__class__, error.args, tree=tree)

    def macro_has_eval(self, exprlist: _Tree) -> Any:
        """``has(e.f)`` as the CEL spec and cel-cpp have it: ``e`` must evaluate (an error
        in ``e`` is the result), then ``f`` is looked up as a map key. cel-python answers
        false for any error, so ``has(object.metadata.namespace)`` on an object without
        metadata was false on one engine and an error on the other."""
        selection = _field_selection(exprlist)
        if selection is None:
            return super().macro_has_eval(exprlist)
        operand, field = selection
        value = self.visit(operand)
        if isinstance(value, CELEvalError):
            return value
        if isinstance(value, celtypes.MapType | dict):
            return celtypes.BoolType(celtypes.StringType(field) in value)
        return CELEvalError(f"no matching overload for has() on {type(value).__name__}")

    def member_dot_arg(self, tree: _Tree) -> Any:
        member, method = cast(tuple[_Tree, lark.Token], tree.children[:2])
        arguments = tree.children[2] if len(tree.children) > 2 else None
        arity = len(arguments.children) if isinstance(arguments, lark.Tree) else 0
        arities = (2, 3) if method.value == "map" else (2,)
        if method.value not in _MACRO_LOOPS or arity not in arities:
            return super().member_dot_arg(tree)  # methods, and macro forms celpy rejects
        items = self.visit(member)
        if isinstance(items, CELEvalError):
            return items
        # celpy's list concatenation returns a plain Python list, not a ListType.
        if not isinstance(items, celtypes.ListType | celtypes.MapType | list):
            return CELEvalError(
                f"no matching overload for {method.value}() over {type(items).__name__}"
            )
        if isinstance(items, celtypes.MapType | dict):
            # Sorted keys, read first, as the default engine does (scanner.cel.k8s.rewrite):
            # one iteration per key, then the loop over them.
            self.left[0] -= len(items)
            if self.left[0] <= 0:
                raise IterationLimit
            items = sorted(items, key=key_order)
        variable_tree, *body_trees = cast(list[_Tree], cast(_Tree, arguments).children)
        identifier = next(variable_tree.find_data("ident")).children[0]
        *predicate, body = [self.sub_evaluator(body_tree) for body_tree in body_trees]
        name = cast(lark.Token, identifier).value

        def step(item: Any, run: bool = True) -> Any:
            self.left[0] -= 1
            if self.left[0] <= 0:
                raise IterationLimit
            if not run:
                return None
            try:
                if predicate:  # map(x, p, t): t of the items p keeps, in one iteration
                    keep = _decision(predicate[0].evaluate({name: item}))
                    if isinstance(keep, CELEvalError):
                        return keep
                    if not keep:
                        return _SKIPPED
                return body.evaluate({name: item})
            except CELEvalError as error:
                return error

        return _MACRO_LOOPS[method.value](list(items), step)


def _field_selection(exprlist: _Tree) -> tuple[_Tree, str] | None:
    """(``e``, ``f``) of the ``e.f`` inside ``has(...)``, or None for any other form."""
    node: Any = exprlist.children[0] if len(exprlist.children) == 1 else None
    while isinstance(node, lark.Tree) and node.data != "member_dot" and len(node.children) == 1:
        node = node.children[0]
    if not isinstance(node, lark.Tree) or node.data != "member_dot":
        return None
    operand, field = node.children
    return cast(_Tree, operand), str(field)


def key_order(key: Any) -> tuple[int, Any]:
    """The order maps are iterated in: bools, then numbers, then strings
    (``scanner.cel.k8s.key_order``, for celpy's types: its bool is an int)."""
    if isinstance(key, celtypes.BoolType | bool):
        return 0, bool(key)
    if isinstance(key, int | float):
        return 1, key
    return 2, str(key)


def _all(items: list[Any], step: Any) -> Any:
    result: Any = celtypes.BoolType(True)
    for index, item in enumerate(items):
        result = _and(result, step(item))
        if isinstance(result, celtypes.BoolType) and not result:
            _stop_early(items, index, step)
            break
    return result


def _exists(items: list[Any], step: Any) -> Any:
    result: Any = celtypes.BoolType(False)
    for index, item in enumerate(items):
        result = _or(result, step(item))
        if isinstance(result, celtypes.BoolType) and result:
            _stop_early(items, index, step)
            break
    return result


def _stop_early(items: list[Any], index: int, step: Any) -> None:
    """cel-cpp counts an iteration before it checks the loop condition, so a loop that
    stops early still counts the iteration it did not run."""
    if index + 1 < len(items):
        step(None, run=False)


def _exists_one(items: list[Any], step: Any) -> Any:
    count, error = 0, None
    for item in items:
        value = _decision(step(item))
        if isinstance(value, CELEvalError):
            error = value if error is None else error
        elif value:
            count += 1
    return error if error is not None else celtypes.BoolType(count == 1)


def _map(items: list[Any], step: Any) -> Any:
    results, error = [], None
    for item in items:
        value = step(item)
        if value is _SKIPPED:
            continue
        if isinstance(value, CELEvalError):
            error = value if error is None else error
        else:
            results.append(value)
    return error if error is not None else celtypes.ListType(results)


def _filter(items: list[Any], step: Any) -> Any:
    kept, error = [], None
    for item in items:
        value = _decision(step(item))
        if isinstance(value, CELEvalError):
            error = value if error is None else error
        elif value:
            kept.append(item)
    return error if error is not None else celtypes.ListType(kept)


_SKIPPED = object()
"""What ``step`` gives for an item the predicate of ``map(x, p, t)`` leaves out."""


def _decision(value: Any) -> Any:
    """A predicate's value as cel-cpp's ``?:`` sees it: a bool, or an error."""
    if isinstance(value, celtypes.BoolType | CELEvalError):
        return value
    return CELEvalError(f"no matching overload for _?_:_ applied to {type(value).__name__}")


_MACRO_LOOPS = {
    "all": _all,
    "exists": _exists,
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
}


class CountingRunner(InterpretedRunner):
    """``InterpretedRunner`` with a fresh iteration count for every evaluation."""

    def evaluate(self, context: Any) -> Any:
        evaluator = CountingEvaluator(self.ast, activation=self.new_activation())
        return evaluator.evaluate(context)
