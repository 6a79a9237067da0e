"""Dependencies point one way: every import of our own packages is checked against the layers.

The rule (docs/architecture.md, "Layers"): ``core`` imports nothing of ours;
``validation`` and ``sync_queue`` only ``core``; the boundaries ``plex`` and ``stash``
only ``core`` and ``validation``; ``hooks`` only those three; ``worker`` all of those;
``tasks`` those and ``worker``; ``app`` (the wiring and the processes) everything.
Imports inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"app", "core", "hooks", "plex", "stash", "sync_queue", "tasks", "validation", "worker"}
_BASE = {"core"}
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "validation": _BASE,
    "sync_queue": _BASE,
    "plex": _BASE | {"validation"},
    "stash": _BASE | {"validation"},
    "hooks": _BASE | {"sync_queue", "validation"},
    "worker": _BASE | {"validation", "sync_queue", "plex", "stash", "hooks"},
    "tasks": _BASE | {"validation", "sync_queue", "plex", "stash", "hooks", "worker"},
    "app": OURS,
}


def imported_packages(source: str) -> set[str]:
    """The top-level names of every absolute import in ``source``.

    >>> sorted(imported_packages("import os\\nfrom plex.client import X\\ndef f():\\n    import core.log"))
    ['core', 'os', 'plex']
    """
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def violations(root: Path) -> list[str]:
    found = []
    for package in sorted(ALLOWED):
        for path in sorted((root / package).rglob("*.py")):
            for name in sorted(imported_packages(path.read_text(encoding="utf-8")) & OURS):
                if name != package and name not in ALLOWED[package]:
                    found.append(f"{path.relative_to(root)} imports {name}")
    return found


def test_every_import_follows_the_layers():
    assert violations(ROOT) == []


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("core", "sync_queue"),
        ("plex", "sync_queue"),
        ("validation", "plex"),
        ("hooks", "worker"),
        ("tasks", "app"),
        ("worker", "tasks"),
        ("stash", "plex"),
    ],
)
def test_a_planted_forbidden_import_is_caught(tmp_path, package, forbidden):
    for name in ALLOWED:
        (tmp_path / name).mkdir()
    (tmp_path / package / "planted.py").write_text(f"def f():\n    from {forbidden}.x import y\n")
    assert violations(tmp_path) == [f"{Path(package, 'planted.py')} imports {forbidden}"]


def test_only_the_entry_script_and_app_import_app_or_tasks():
    for package in ALLOWED:
        if package in ("app", "tasks"):
            continue
        for path in (ROOT / package).rglob("*.py"):
            assert not imported_packages(path.read_text(encoding="utf-8")) & {"app"}, path
    entry = imported_packages((ROOT / "Stash2Plex.py").read_text(encoding="utf-8"))
    assert "app" in entry


def module_imports(root: Path) -> dict[str, set[str]]:
    """Each of our modules (``pkg.mod``) and the modules of ours it imports, anywhere in it."""
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts): path
        for package in ALLOWED
        for path in (root / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a circle (sorted).

    >>> import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
    """
    reach = {m: set(graph[m]) for m in graph}
    changed = True
    while changed:  # the transitive closure: a few hundred modules, a few passes
        changed = False
        for seen in reach.values():
            more = set().union(*(reach[n] for n in seen)) - seen if seen else set()
            if more:
                seen |= more
                changed = True
    groups = {tuple(sorted({m} | {n for n in reach[m] if m in reach[n]})) for m in graph if m in reach[m]}
    return sorted(list(g) for g in groups)


def test_no_two_of_our_modules_import_each_other():
    assert import_cycles(module_imports(ROOT)) == []


def test_a_planted_import_circle_is_caught(tmp_path):
    for name in ALLOWED:
        (tmp_path / name).mkdir()
    (tmp_path / "tasks" / "one.py").write_text("from tasks.two import x\n")
    (tmp_path / "tasks" / "two.py").write_text("def f():\n    from tasks import one\n")
    assert import_cycles(module_imports(tmp_path)) == [["tasks.one", "tasks.two"]]


def task_imports(root: Path) -> list[str]:
    """Task modules that import another task's module. Steps two tasks share live below
    ``tasks/`` (worker/, sync_queue/, validation/); what a task is given, in tasks/context.py."""
    graph = module_imports(root)
    return sorted(
        f"{module} imports {other}"
        for module, imported in graph.items()
        if module.startswith("tasks.")
        for other in imported
        if other.startswith("tasks.") and other != "tasks.context"
    )


def test_no_task_imports_another():
    assert task_imports(ROOT) == []


def test_a_planted_task_import_is_caught(tmp_path):
    for name in ALLOWED:
        (tmp_path / name).mkdir()
    (tmp_path / "tasks" / "context.py").write_text("class Context: ...\n")
    (tmp_path / "tasks" / "one.py").write_text("from tasks.context import Context\n")
    (tmp_path / "tasks" / "two.py").write_text("def f():\n    from tasks.one import x\n")
    assert task_imports(tmp_path) == ["tasks.two imports tasks.one"]
