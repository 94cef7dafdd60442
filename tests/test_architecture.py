"""The package's import graph, read from the source with `ast` (function-level imports included): no import
cycles among its modules, no module importing another module's private (`_name`) objects, and dependencies
pointing one way through the layers of docs/development.md's "Layout". Tests, benchmarks and tools use the package's
public names only (they get public hooks where they need one, e.g. `analysis.sweep.run_chunk`)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pgrpo_sim"
RANK = {
    "base": 0,
    "models": 1,
    "prediction": 2,
    "analysis": 3,
    "logs": 3,
    "calibration": 4,
    "viz": 5,
    "runtime": 6,
    "reports": 7,
    "cli": 8,
    "theory": 9,
    "bandit": 9,
    "lm": 9,
    "integrations": 9,
}
"""Layer ranks, lower first: a module may import from its own layer and lower ones only (analysis and logs are
peers: logs may use prediction, analysis never reads logs). `theory`, `bandit` and `lm` are public namespaces over
the layers (`ps.theory`…): nothing in the package imports them. `integrations` (trainer callbacks) is a front end
over the layers like them, imported by the user's training script only."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or '', line) for every import in `module`'s source."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, "", node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, path.name == "__init__.py")
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub, "", node.lineno) if sub in MODULES else (target, alias.name, node.lineno))
    return [(m, n, line) for m, n, line in out if m == "pgrpo_sim" or m.startswith("pgrpo_sim.")]


def _graph() -> dict[str, set[str]]:
    return {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_checks_see_the_package():
    assert len(MODULES) > 20 and "pgrpo_sim.models.bandit" in MODULES and "pgrpo_sim.prediction" in MODULES
    assert any(_imports("pgrpo_sim.cli")), "function-level imports must be seen"


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a path that returns to its start, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep, [*path, dep])):
                return found
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def test_no_import_cycles():
    graph = {m: deps - {"pgrpo_sim"} for m, deps in _graph().items() if m != "pgrpo_sim"}  # the root re-exports
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle)


def test_a_planted_cycle_is_found():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_private_names_across_modules():
    bad = []
    for module in MODULES:
        for target, name, line in _imports(module):
            private_name = name.startswith("_") and not name.startswith("__")
            private_module = any(p.startswith("_") and not p.startswith("__") for p in target.split(".")[1:])
            if target != module and (private_name or private_module):
                bad.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target} {name}".strip())
        tree = ast.parse(MODULES[module].read_text())
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names
        }
        for node in ast.walk(tree):  # module._private attribute access on an imported sibling module
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in imported
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr not in NAMEDTUPLE_API
            ):
                bad.append(
                    f"{MODULES[module].relative_to(PACKAGE.parent)}:{node.lineno} uses {node.value.id}.{node.attr}"
                )
    assert not bad, "\n".join(bad)


NAMEDTUPLE_API = ("_fields", "_field_defaults", "_replace", "_asdict", "_make")
"""`typing.NamedTuple`'s documented methods: public despite their underscore."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def _private_uses(path: Path) -> list[str]:
    """Where a file outside the package uses a private name of it: imports one, reads `module._name` on a name it
    imported from the package, or patches one (`monkeypatch.setattr(module, "_name", …)`)."""
    tree = ast.parse(path.read_text())
    bound, bad = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pgrpo_sim":
            bound |= {a.asname or a.name for a in node.names}
            bad += [f"{path.name}:{node.lineno} imports {node.module}.{a.name}" for a in node.names if _private(a.name)]
            bad += [f"{path.name}:{node.lineno} imports {node.module}" for p in node.module.split(".") if _private(p)]
        elif isinstance(node, ast.Import):
            bound |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "pgrpo_sim"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                bad.append(f"{path.name}:{node.lineno} uses {ast.unparse(node)}")
        patched = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) >= 2
        if patched and node.func.attr in ("setattr", "delattr") and isinstance(node.args[0], ast.Name):
            name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
            if node.args[0].id in bound and isinstance(name, str) and _private(name):
                bad.append(f"{path.name}:{node.lineno} patches {node.args[0].id}.{name}")
    return bad


def test_tests_benchmarks_and_tools_use_public_names_only():
    root = PACKAGE.parent
    files = sorted(p for folder in ("tests", "benchmarks", "tools") for p in (root / folder).rglob("*.py"))
    assert len(files) > 50
    bad = [use for path in files for use in _private_uses(path)]
    assert not bad, "\n".join(bad)


def test_a_planted_private_use_is_found(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from pgrpo_sim.analysis import sweep\nfrom pgrpo_sim.models.oscillator.sde import _x\ndef test(monkeypatch):\n"
        "    sweep._plan\n    monkeypatch.setattr(sweep, '_plan', None)\n    sweep.Axis._fields\n"
    )
    assert [use.split(" ", 1)[1] for use in _private_uses(planted)] == [
        "imports pgrpo_sim.models.oscillator.sde._x", "uses sweep._plan", "patches sweep._plan"
    ]  # fmt: skip


def test_dependencies_point_down_the_layers():
    bad = []
    for module, deps in _graph().items():
        if module == "pgrpo_sim":
            continue
        for dep in deps:
            if dep == "pgrpo_sim":
                bad.append(f"{module} imports the package root")
            elif RANK[_layer(dep)] > RANK[_layer(module)] or {_layer(module), _layer(dep)} == {"analysis", "logs"}:
                bad.append(f"{module} ({_layer(module)}) imports {dep} ({_layer(dep)})")
    assert not bad, "\n".join(bad)


ROOMS = ("oscillator", "bandit", "lm")
"""The model rooms of `pgrpo_sim.models`, one per level; what they share sits beside them in `models`."""


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "models" and parts[2] in ROOMS else None


def test_the_model_rooms_do_not_import_each_other():
    """A level's room imports the shared pieces of `models` (and lower layers), never another level's room: the
    oscillator's ranges and the GRPO pieces the levels share live beside the rooms, not in one of them."""
    bad = [
        f"{module} imports {dep}"
        for module, deps in _graph().items()
        for dep in deps
        if _room(module) and _room(dep) and _room(dep) != _room(module)
    ]
    assert not bad, "\n".join(bad)


def test_public_api_is_the_stub_and_loads_lazily():
    """Every `X as X` of the root's and the lazy groups' `__init__.pyi` resolves to that object of the module it
    names, and importing them alone loads none of them (JAX stays unloaded until a name is used)."""
    import importlib
    import subprocess
    import sys

    probe = (
        "import sys, pgrpo_sim, pgrpo_sim.analysis, pgrpo_sim.logs, pgrpo_sim.calibration; "
        "print(sorted(m for m in ('jax', 'pgrpo_sim.models') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"
    for package in ("", ".analysis", ".logs", ".calibration", ".viz"):  # each stub's names, lazily re-exported
        namespace = importlib.import_module(f"pgrpo_sim{package}")
        names = []
        for node in ast.parse((PACKAGE / package[1:] / "__init__.pyi").read_text()).body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    assert alias.asname == alias.name, alias.name  # X as X: a re-export, not a rename
                    where = f"pgrpo_sim{package}" + (f".{node.module}" if node.module else f".{alias.name}")
                    module = importlib.import_module(where if node.module else f"pgrpo_sim{package}")
                    assert getattr(namespace, alias.name) is getattr(module, alias.name), alias.name
                    names.append(alias.name)
        assert sorted(names) == sorted(namespace.__all__) and len(set(names)) == len(names), package


GROUPS = ("theory", "bandit", "lm", "analysis", "logs", "calibration", "viz")
"""The public namespaces `ps.<group>` (docs/api.md)."""
ROOT_ONLY = {"PgrpoSimError", "MAX_SEED", "MAX_STEPS", "analyse_log", "LogAnalysis", "validate"}
"""Root names no group holds: the error type and limits every layer shares, and the reports run from Python."""


def test_the_root_names_are_the_groups_front_door():
    """One public surface: every name at the root is one of its group's (the same object), and a group's `__all__`
    lists exactly its public names."""
    import pgrpo_sim as ps

    groups = {g: getattr(ps, g) for g in GROUPS}
    for g, namespace in groups.items():
        public = sorted(n for n in dir(namespace) if not n.startswith("_"))
        assert sorted(namespace.__all__) == public and len(set(namespace.__all__)) == len(public), g
    for name in ps.__all__:
        if name in GROUPS or name in ROOT_ONLY:
            continue
        owners = [g for g, namespace in groups.items() if getattr(namespace, name, None) is getattr(ps, name)]
        assert owners, f"ps.{name} is in no group"  # the levels share verbs: ps.simulate is ps.bandit.simulate


MAX_MODULE_LINES = 600
"""Longest module of the package (issue #40): one that grows past it holds more than one job; split it by job."""


def test_no_module_is_over_600_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
