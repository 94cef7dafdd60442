"""The bandit's former names of GRPO hyperparameters and TRL's that replaced them (issue 48, one vocabulary): the
one translator of the short aliases, read by `config` (which refuses them), the command line's grid axes (which
take them, as its flags do) and the records of folders written before (`current_names`: a sweep written with the
former names resumes)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ...base.errors import PgrpoSimError

RENAMED: Mapping[str, str] = MappingProxyType(
    {
        "eta": "learning_rate",
        "group_size": "num_generations",
        "clip": "epsilon",
        "clip_low": "epsilon",
        "clip_high": "epsilon_high",
        "grad_clip": "max_grad_norm",
        "lr_schedule": "lr_scheduler_type",
    }
)
"""The bandit's own names of GRPO hyperparameters before it took TRL's (0.1.0, unreleased) → TRL's: `config` refuses
them naming the new one, and the command line's grid axes take them as short aliases (as its flags do)."""


def check_renamed(settings: Mapping[str, object]) -> None:
    """Raise `PgrpoSimError` for keywords `config` does not take, naming TRL's name where one is a former name.

    Args:
        settings: the keywords beyond `config`'s parameters (none is allowed).

    Raises:
        PgrpoSimError: one line for the first such keyword.
    """
    for name in settings:
        if name in RENAMED:
            raise PgrpoSimError(f"ps.bandit.config takes {RENAMED[name]} (TRL's name), not {name}")
        raise PgrpoSimError(f"ps.bandit.config got an unknown setting {name!r}")


def current_name(name: str) -> str:
    """TRL's name for a former one (`RENAMED`, e.g. "eta" → "learning_rate"); any other name unchanged."""
    return RENAMED.get(name, name)


def current_names(record: Any) -> Any:
    """`record` (JSON data: an output folder's recorded settings, a sweep's spec) with every former name in TRL's:
    dict keys, and the name of each "NAME=VALUES" string (a grid axis, as typed; its name with dashes read as
    underscores, as the grid reads it: "group-size" is "num_generations"). Other values are unchanged, so a record
    already in TRL's names comes back equal.

    Args:
        record: JSON-like data (dicts, lists, strings, numbers, None).

    Returns:
        The same structure, renamed (new dicts and lists; `record` is not changed).
    """
    if isinstance(record, Mapping):
        return {current_name(key): current_names(value) for key, value in record.items()}
    if isinstance(record, list):
        return [current_names(item) for item in record]
    if isinstance(record, str) and "=" in record:
        name, values = record.split("=", 1)
        key = name.strip().replace("-", "_")
        return f"{current_name(key)}={values}" if (key.isidentifier() and key != name) or key in RENAMED else record
    return record
