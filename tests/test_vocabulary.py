"""Each choice list is defined once (issue 48, "one vocabulary"): a test that greps the package for twins.

Two kinds of twin: the fact's name assigned again in another module, and a literal collection of strings anywhere in
the package (a tuple, list, set or dict's keys, at module level or inline, e.g. `choices=(...)`) that repeats at
least three of the fact's members (all of them for a shorter fact) instead of importing it. The few literals that are
the implementation itself — a table with one entry per choice — are listed in `IMPLEMENTATIONS` with their reason.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pgrpo_sim"

FACTS = {
    "models.grpo": ("ADVANTAGES", "SCALE_REWARDS", "TOKEN_AGGREGATIONS", "LOSS_TYPES", "KL_ESTIMATORS"),
    "models.schedules": ("LR_SCHEDULES",),
    "models.bandit.configuration": ("OPTIMIZERS", "KL_KINDS", "LAG_MODELS"),
    "analysis.summaries": ("VERDICTS",),
    "logs.diagnostics": ("FAILURE_MODES",),
    "calibration.run_config": ("RUN_OPTIMIZERS", "RUN_LOSS_TYPES", "CS336_LOSS_TYPES"),
}
"""Defining module → the choice lists it owns."""

IMPLEMENTATIONS = {
    ("LOSS_TYPES", "models/lm/loss.py"): "the loss's normaliser for each loss type",
    ("TOKEN_AGGREGATIONS", "models/lm/loss.py"): "the same table",
    ("RUN_LOSS_TYPES", "models/lm/loss.py"): "the same table",
    ("LAG_MODELS", "prediction/lags.py"): "each lag model's continuous lag",
    ("FAILURE_MODES", "viz/log_figures.py"): "each failure mode's axis label",
    ("ADVANTAGES", "reports/validate/num_generations.py"): "the claim's own choice of three advantage kinds",
}
"""(fact, file) → why a literal there names the fact's members: tables with one entry per choice."""


def _module(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")


@functools.cache
def _sources() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))}


def _assigned(tree: ast.Module) -> set[str]:
    """Names assigned at module level."""
    names = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _strings(node: ast.AST) -> set[str]:
    """The string constants a collection literal holds (a dict's keys)."""
    if isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = node.elts
    else:
        return set()
    return {e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)}


FACT_NAMES = [(module, name) for module, names in FACTS.items() for name in names]


@pytest.mark.parametrize("module, name", FACT_NAMES, ids=[name for _, name in FACT_NAMES])
def test_a_choice_list_is_defined_once(module, name):
    members = set(getattr(importlib.import_module(f"pgrpo_sim.{module}"), name))
    need = min(3, len(members))
    sources = _sources()
    definitions = set()  # the facts' own definitions (a derived fact spells the one it extends)
    for path, tree in sources.items():
        if _module(path) in FACTS:
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    definitions |= {id(n) for n in ast.walk(node.value)}
    renamed = [str(p.relative_to(PACKAGE)) for p, t in sources.items() if _module(p) != module and name in _assigned(t)]
    assert not renamed, f"{name} is defined in pgrpo_sim.{module}; assigned again in {renamed}"
    copies = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {sorted(_strings(node) & members)}"
        for path, tree in sources.items()
        if _module(path) != module and (name, path.relative_to(PACKAGE).as_posix()) not in IMPLEMENTATIONS
        for node in ast.walk(tree)
        if id(node) not in definitions and len(_strings(node) & members) >= need
    ]
    assert not copies, f"literal copies of {name} (import pgrpo_sim.{module}.{name} instead): {copies}"


def test_the_allowed_tables_still_exist():
    """An entry of `IMPLEMENTATIONS` that no longer matches a literal is stale: the test would hide a new copy."""
    sources = {path.relative_to(PACKAGE).as_posix(): tree for path, tree in _sources().items()}
    owner = {name: module for module, names in FACTS.items() for name in names}
    for name, file in IMPLEMENTATIONS:
        members = set(getattr(importlib.import_module(f"pgrpo_sim.{owner[name]}"), name))
        assert any(len(_strings(n) & members) >= min(3, len(members)) for n in ast.walk(sources[file])), (name, file)
