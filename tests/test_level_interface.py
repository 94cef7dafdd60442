"""The two levels answer the same calls the same way (issue 48, "one model interface"; what is aligned so far)."""

import inspect

import pgrpo_sim as ps


def _parameters(function) -> dict[str, object]:
    return {name: p.kind for name, p in inspect.signature(function).parameters.items()}


def test_both_levels_simulate_with_the_same_shared_parameters():
    """`simulate(config, steps, *, seeds, key)` on both levels: the configuration and the step count positional,
    seeds and key by keyword (a level's own extras, the bandit's `mode`, the language model's `start`, beside)."""
    shared = {
        "config": inspect.Parameter.POSITIONAL_OR_KEYWORD,
        "steps": inspect.Parameter.POSITIONAL_OR_KEYWORD,
        "seeds": inspect.Parameter.KEYWORD_ONLY,
        "key": inspect.Parameter.KEYWORD_ONLY,
    }
    for simulate in (ps.bandit.simulate, ps.lm.simulate):
        parameters = _parameters(simulate)
        assert {name: parameters.get(name) for name in shared} == shared, simulate.__qualname__
        assert list(parameters)[:2] == ["config", "steps"], simulate.__qualname__
