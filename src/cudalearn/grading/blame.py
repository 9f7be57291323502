"""Which other exercise a failing test may fail on account of: a helper it uses from a broken cell (grading).

A later exercise's answer often calls a helper an earlier answer cell defines
(a kernel, an index function). When that earlier exercise is broken (its
cell raised, or one of its own tests failed), a test of the later exercise
can fail for that reason alone, and the feedback should say so. The judge
reads the answer cells as syntax trees only (`ast.parse`, never run here).
"""

from __future__ import annotations

import ast


def _tree(code: str) -> ast.AST | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def defines(code: str) -> set[str]:
    """The names an answer cell binds at top level (functions, classes, assignments)."""
    tree = _tree(code)
    names: set[str] = set()
    for stmt in getattr(tree, "body", []):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def uses(code: str) -> set[str]:
    """The names an answer cell reads anywhere (a helper called inside a function counts) and binds nowhere
    (its own variables, parameters and functions are its own)."""
    tree = _tree(code)
    if tree is None:
        return set()
    loads, bound = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    return loads - bound


class Blame:
    """The answer cells of a job, and what is known broken so far: `hint` names the likely cause."""

    def __init__(self, answers: dict[int, str | None]) -> None:
        self.defines = {ex: defines(code) for ex, code in answers.items() if isinstance(code, str)}
        self.uses = {ex: uses(code) for ex, code in answers.items() if isinstance(code, str)}
        self.broken: dict[int, str] = {}  # exercise -> what went wrong, in feedback words

    def failed(self, ex: int, what: str) -> None:
        """Record that exercise `ex` is broken (its cell raised, or `what` test of it failed); first wins."""
        self.broken.setdefault(ex, what)

    def owner(self, name: str, besides: int | None = None) -> int | None:
        """The exercise whose answer cell defines `name` (not `besides`), or None."""
        found = (ex for ex, names in sorted(self.defines.items()) if name in names and ex != besides)
        return next(found, None)

    def hint(self, ex: int) -> str:
        """' This test may fail because of ...' for the broken exercises whose helpers `ex` uses, else ''."""
        seen, frontier, via = {ex}, [ex], {}
        while frontier:  # helpers of helpers: follow the names each cell reads to the cell defining them
            here = frontier.pop()
            for name in sorted(self.uses.get(here, ())):
                other = self.owner(name, besides=here)
                if other is not None and other not in seen:
                    seen.add(other)
                    via[other] = (here, name)
                    frontier.append(other)
        causes = [
            f"your exercise {via[other][0]} code uses `{via[other][1]}`, which your exercise {other} cell "
            f"defines, and exercise {other} {self.broken[other]}"
            for other in sorted(via)
            if other in self.broken
        ]
        if not causes:
            return ""
        return " This test may fail because of another exercise: " + "; ".join(causes) + ". Fix that first."
