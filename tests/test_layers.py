"""The house's layers, read from the source: no import cycle in bot/ or store/, store/ never
imports the Slack layer, and no module grows past what one reader can hold.

Every import counts: top-level, inside a function, and under `if TYPE_CHECKING:` (a cycle through
type hints still ties the modules into one knot a newcomer has to read at once).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "store")
MAX_LINES = 1000


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of bot/ and store/ by dotted name (a package by its __init__.py)."""
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The dotted names `name` imports, wherever in the file: `from . import x` names the
    submodule x when there is one, else the package itself."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            out.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {m for m in imports_of(name, path, known) if m in known and m != name}
            for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def one_loop(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One import loop inside a component, to show where to cut: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(graph[path[-1]] & members)
        back = [m for m in nxt if m in seen]
        if back:
            return path[path.index(back[0]):] + [back[0]]
        step = next(m for m in nxt if m not in seen)
        path.append(step)
        seen.add(step)


def test_the_cycle_finder_finds_a_loop_and_passes_a_chain():
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(loop) == [["a", "b", "c"]]
    assert one_loop(loop, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_every_kind_of_import_is_read(tmp_path):
    pkg = tmp_path / "bot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import bot.a\n")
    known = {module_name(p, tmp_path): p for p in sorted(pkg.rglob("*.py"))}
    graph = {n: {m for m in imports_of(n, p, known) if m in known and m != n} for n, p in known.items()}
    assert graph["bot.a"] == {"bot.b"} and graph["bot.b"] == {"bot.c"} and graph["bot.c"] == {"bot.a"}
    assert cycles(graph) == [["bot.a", "bot.b", "bot.c"]]


def test_no_import_cycle_in_bot_or_store():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles (every module of each, then one loop to cut):\n" + "\n".join(
        f"  {len(c)} modules: {', '.join(c)}\n    {' -> '.join(one_loop(graph, c))}" for c in found)


def test_store_never_imports_bot_or_slack():
    known = modules()
    wrong = {name: sorted(m for m in imports_of(name, path, known)
                          if m.split(".")[0] == "bot" or m.startswith("slack_"))
             for name, path in known.items() if name.split(".")[0] == "store"}
    assert not {n: m for n, m in wrong.items() if m}, {n: m for n, m in wrong.items() if m}


def test_no_module_in_bot_or_store_is_over_1000_lines():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    assert sizes  # the walk found the code
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
