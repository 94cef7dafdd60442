"""Every public function and class of the public namespaces (`ps.theory`, `ps.bandit`, …) documents what it takes
and gives, Google style (the API page is generated from these docstrings): a function an `Args:` section naming each
parameter and a `Returns:` section unless it returns None; a NamedTuple or dataclass an `Attributes:` section naming
each field. Whether the words are right is for review; that they are there is checked here."""

import inspect
import re

import pytest

import pgrpo_sim as ps

GROUPS = ("theory", "bandit", "lm", "analysis", "logs", "calibration", "viz")
SECTION = re.compile(r"^(Args|Returns|Yields|Raises|Attributes|Examples?|Notes?):\s*$")


def sections(doc: str) -> dict[str, list[str]]:
    """Section name → its lines, for a docstring as `inspect.getdoc` gives it (no common indent)."""
    out, current = {}, None
    for line in doc.splitlines():
        if match := SECTION.match(line):
            current = out.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    return out


def entries(lines: list[str]) -> set[str]:
    """The names a section documents: its lines `    name: …` or `    name (type): …` (`*args` as `args`)."""
    return {m.group(1) for line in lines if (m := re.match(r"^ {4}\**(\w+)\s*(?:\([^)]*\))?:", line))}


def problems(obj, where: str) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    found = sections(doc)
    function = inspect.unwrap(obj)
    if inspect.isclass(obj):
        fields = [f for f in getattr(obj, "_fields", ()) or getattr(obj, "__dataclass_fields__", {}) if f[0] != "_"]
        missing = [f for f in fields if f not in entries(found.get("Attributes", []))]
        return [f"{where}: Attributes lack {missing}"] if missing else []
    if not inspect.isfunction(function):
        return []
    signature = inspect.signature(function)
    params = [p.lstrip("*") for p in signature.parameters if p not in ("self", "cls")]
    out = []
    if missing := [p for p in params if p not in entries(found.get("Args", []))]:
        out.append(f"{where}: Args lack {missing}")
    if extra := entries(found.get("Args", [])) - set(params):
        out.append(f"{where}: Args name non-parameters {sorted(extra)}")
    returns = signature.return_annotation
    if returns not in (None, "None", inspect.Signature.empty) and not {"Returns", "Yields"} & set(found):
        out.append(f"{where}: no Returns")
    return out


@pytest.mark.parametrize("group", GROUPS)
def test_public_names_document_their_arguments_and_results(group):
    namespace = getattr(ps, group)
    bad = [p for name in namespace.__all__ for p in problems(getattr(namespace, name), f"ps.{group}.{name}")]
    assert not bad, "\n".join(bad)


def test_the_check_finds_a_missing_argument():
    def documented(a, b):
        """One line.

        Args:
            a: the first.

        Returns:
            Nothing much.
        """

    def returns_undocumented(a) -> int:
        """One line.

        Args:
            a: the first.
        """

    assert problems(documented, "f") == ["f: Args lack ['b']"]
    assert problems(returns_undocumented, "g") == ["g: no Returns"]
