"""The "trl" format: Hugging Face TRL's `trainer_state.json`, a JSON object whose `log_history` lists the
GRPOTrainer's logged dicts (older key names, Unsloth era: `reward`, `reward_std`, `kl`, `rewards/<fn>`; TRL
0.26's: `entropy`, `frac_reward_zero_std`, `clip_ratio/region_mean`, `completions/*`, `eval_*`)."""

from __future__ import annotations

import json

from ...base.errors import PgrpoSimError
from . import jsonl
from .source import LogFile, Parsed, flat, log_name


def detect(log: LogFile) -> bool:
    """A JSON object with `log_history`."""
    whole = jsonl.json_object(log)
    return isinstance(whole, dict) and "log_history" in whole


def read(log: LogFile) -> Parsed:
    """One record per entry of `log_history`; no settings."""
    text, path = log.text, log.path
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PgrpoSimError(f"{log_name(path)} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise PgrpoSimError(f"{log_name(path)} is not a TRL trainer_state.json (no log_history list)")
    return [flat(entry) for entry in history if isinstance(entry, dict)], {}
