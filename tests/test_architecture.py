"""The architecture, checked by reading every import (function-level ones included).

- The four process packages (the MCP front, the admin CLI, the worker, the panel) never import
  each other; the admin CLI, a command dispatcher, may start another package's entry point
  (its `main` module) and nothing more. What they share comes from `shared/`.
- `shared/` imports no process package; the store imports nothing of `shared/` above it.
- The store's engines are siblings: shared/store/sqlite and shared/store/postgres never import
  each other; the model (shared/store/model) and the SQL both engines run
  (shared/store/portable) import no engine, neither its package nor its driver.
- No cycle between packages: each process package, each subpackage of `shared/` and each
  top-level module of `shared/` is one node.
- An import of the project's own modules inside a function is there for start-up time, and
  the module says so: it holds a comment starting "# Lazy imports:" that gives the reason.
- No module under tests/ imports a test module (one whose name starts with `test_`): what
  tests share lives in helper modules, so importing one test file never runs another's
  module code or drags its fixtures and constants along.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROCESS_PACKAGES = ("aokun_server", "aokun_admin", "aokun_worker", "aokun_panel")
DISPATCHER = "aokun_admin"
OWN = (*PROCESS_PACKAGES, "shared")
# What the store may import from shared/ besides itself: values and errors, nothing above it.
STORE_MAY_IMPORT = {"shared.config", "shared.errors", "shared.platform", "shared.units", "shared.sqlite_errors"}
LAZY_MARKER = "# Lazy imports:"
ENGINES = ("shared.store.sqlite", "shared.store.postgres")
ENGINE_DRIVERS = ("sqlite3", "psycopg", "psycopg_pool")
ENGINE_FREE = ("shared.store.model", "shared.store.portable")
TESTS = ROOT / "tests"


@dataclass(frozen=True)
class Import:
    source: str        # the importing module
    target: str        # the imported module (for `from a.b import c`: a.b.c if it is a module, else a.b)
    in_function: bool
    line: int


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imports(path: Path) -> list[Import]:
    source = _module_name(path)
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{alias.name}" if _is_module(f"{child.module}.{alias.name}")
                         else child.module for alias in child.names]
            for name in names:
                if name.split(".")[0] in OWN:
                    found.append(Import(source, name, in_function, child.lineno))
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _all_imports() -> list[Import]:
    return [found for package in OWN if (ROOT / package).is_dir()
            for path in sorted((ROOT / package).rglob("*.py")) for found in _imports(path)]


def package_of(module: str) -> str:
    """The node a module belongs to: a process package, a subpackage of shared/, or a
    top-level module of shared/."""
    parts = module.split(".")
    if parts[0] != "shared" or len(parts) == 1:
        return parts[0]
    return f"shared.{parts[1]}"


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def test_the_walker_sees_function_level_imports_and_cycles():
    # The checks below are only as good as the walk: a hand-made cycle and a nested import.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    admin = [i for i in _all_imports() if i.source == "aokun_admin.commands" and i.in_function]
    assert any(i.target.startswith("aokun_panel.main") for i in admin)


def test_process_packages_do_not_import_each_other():
    wrong = []
    for found in _all_imports():
        source, target = package_of(found.source), package_of(found.target)
        if source == target or target not in PROCESS_PACKAGES:
            continue
        dispatching = source == DISPATCHER and found.target == f"{target}.main"
        if source == "shared" or source.startswith("shared.") or not dispatching:
            wrong.append(f"{found.source}:{found.line} imports {found.target}")
    assert wrong == []


def test_the_store_imports_nothing_above_it():
    wrong = [f"{i.source}:{i.line} imports {i.target}" for i in _all_imports()
             if i.source.startswith("shared.store") and i.target.startswith("shared.")
             and not i.target.startswith("shared.store") and i.target not in STORE_MAY_IMPORT]
    assert wrong == []


def _drivers_imported(path: Path) -> list[str]:
    """The engine drivers a file imports, at any level."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        found += [name for name in names if name.split(".")[0] in ENGINE_DRIVERS]
    return found


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_engines_do_not_import_each_other():
    wrong = [f"{i.source}:{i.line} imports {i.target}" for i in _all_imports()
             for engine, other in (ENGINES, ENGINES[::-1])
             if _inside(i.source, engine) and _inside(i.target, other)]
    assert wrong == []


def test_the_model_and_the_portable_sql_import_no_engine():
    wrong = [f"{i.source}:{i.line} imports {i.target}" for i in _all_imports()
             if any(_inside(i.source, free) for free in ENGINE_FREE)
             and any(_inside(i.target, engine) for engine in ENGINES)]
    for free in ENGINE_FREE:
        for path in sorted(ROOT.joinpath(*free.split(".")).rglob("*.py")):
            wrong += [f"{_module_name(path)} imports {driver}" for driver in _drivers_imported(path)]
    assert wrong == []


def test_the_model_imports_nothing_else_of_the_store():
    wrong = [f"{i.source}:{i.line} imports {i.target}" for i in _all_imports()
             if _inside(i.source, "shared.store.model") and _inside(i.target, "shared.store")
             and not _inside(i.target, "shared.store.model")]
    assert wrong == []


def test_the_engine_rules_see_a_wrong_import(tmp_path):
    # The driver check reads what a file imports, at any level, and nothing else.
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import json\n\ndef f():\n    import psycopg.sql\n    from sqlite3 import Row\n")
    assert _drivers_imported(wrong) == ["psycopg.sql", "sqlite3"]
    assert _inside("shared.store.sqlite.db", "shared.store.sqlite")
    assert not _inside("shared.store.sqlite_errors", "shared.store.sqlite")


def test_no_cycle_between_packages():
    edges: dict[str, set[str]] = {}
    for found in _all_imports():
        source, target = package_of(found.source), package_of(found.target)
        if source != target:
            edges.setdefault(source, set()).add(target)
    assert cycles(edges) == []


def test_function_level_imports_say_why():
    unexplained = sorted({i.source for i in _all_imports() if i.in_function})
    unexplained = [module for module in unexplained if LAZY_MARKER not in _source_of(module)]
    assert unexplained == [], f"function-level imports without a '{LAZY_MARKER}' comment"


def _source_of(module: str) -> str:
    base = ROOT.joinpath(*module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    return path.read_text(encoding="utf-8")


def _names_a_test_module(name: str) -> bool:
    return any(part.startswith("test_") for part in name.split("."))


def _test_modules_imported(path: Path) -> list[str]:
    """The test modules (a name part starting with "test_") a file imports, at any level."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # The module, else what is taken from it (`from x import test_y` may name a module
            # as well as a function: either counts).
            base = "." * node.level + (node.module or "")
            names = [base] if _names_a_test_module(base) else \
                [f"{base}.{alias.name}" if node.module else base + alias.name for alias in node.names]
        else:
            continue
        found += [f"{name}:{node.lineno}" for name in names if _names_a_test_module(name)]
    return found


def test_no_test_module_imports_another():
    wrong = [f"{path.relative_to(ROOT)} imports {name}"
             for path in sorted(TESTS.rglob("*.py")) for name in _test_modules_imported(path)]
    assert wrong == [], "shared test code belongs in a helper module, not in a test file"


def test_the_test_import_rule_sees_a_wrong_import(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import helpers\nfrom helpers import wait_for\nimport test_access\n\n"
                     "def f():\n    from test_bad_input import RawStdio\n    from . import test_cli\n")
    assert _test_modules_imported(wrong) == ["test_access:3", "test_bad_input:6", ".test_cli:7"]
