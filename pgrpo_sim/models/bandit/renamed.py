"""The bandit's former names of GRPO hyperparameters and TRL's that replaced them (issue 48, one vocabulary): the
one translator of the short aliases, read by `config` (which refuses them) and the command line's grid axes (which
take them, as its flags do)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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
