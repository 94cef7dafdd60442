"""The "trl_console" format: TRL's console output, the logged dicts printed as Python literals (`{'loss': '0',
'reward': '0.125', ...}`, string or float values) among other output and tqdm progress bars (a dict may follow a
carriage return). The console does not print the step: the n-th dict with training metrics is step n (with
`logging_steps` k > 1 the trainer's step is k·n); `eval_*` dicts belong to the latest step and the closing
`{'train_runtime': ...}` summary is no step (merged into the last one, as in `trainer_state.json`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from ...base.errors import PgrpoSimError
from . import jsonl
from .source import LogFile, Parsed, log_name, numeric
from .table import CANONICAL

_TRL_CONSOLE_KEYS = frozenset(
    c.lower() for name, names in CANONICAL.items() if name not in ("step", "eval_reward") for c in names
) | {"loss"}
"""A console dict holding one of these keys is a training step (others: eval dicts, the summary, stray text)."""

_PY_SPECIAL = re.compile(r"(:\s*)(-?)(nan|inf)\b")
_NUMPY_SCALAR = re.compile(r"np\.(?:float|int)\d*\(([^()]*)\)")


def _console_dicts(text: str):
    """Every dict that Python printed in `text` (its repr: `{'key': ...`; one per line or carriage-return segment,
    possibly after other output on it), in order."""
    for segment in re.split(r"[\r\n]", text):
        start, end = segment.find("{'"), segment.rfind("}")
        if start < 0 or end < start:
            continue
        literal = _NUMPY_SCALAR.sub(r"\1", segment[start : end + 1])
        literal = _PY_SPECIAL.sub(lambda m: m[1] + ("None" if m[3] == "nan" else m[2] + "1e999"), literal)
        try:
            value = ast.literal_eval(literal)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
        if isinstance(value, dict):
            yield value


def _console_kind(record: Mapping[str, float]) -> str | None:
    keys = [k.lower() for k in record]
    if "train_runtime" in keys:
        return "summary"
    if any(k.startswith("eval_") for k in keys) and all(k.startswith("eval_") or k in ("epoch", "step") for k in keys):
        return "eval"
    if any(k in _TRL_CONSOLE_KEYS for k in keys):
        return "train"
    return None


def _has_trl_console_dicts(text: str) -> bool:
    if "{'" not in text:
        return False
    for raw in _console_dicts(text):
        record = {str(k): v for k, v in raw.items() if numeric(v) is not None}
        if _console_kind(record) == "train":
            return True
    return False


def detect(log: LogFile) -> bool:
    """Text, not JSON (a JSON array, or a first line that is a JSON record), holding a printed dict of training
    metrics (tried after verl's console lines)."""
    if log.text.strip().startswith("[") or jsonl.first_record(log) is not None:
        return False
    return _has_trl_console_dicts(log.text)


def read(log: LogFile) -> Parsed:
    """TRL console output: the n-th dict with training metrics is step n, `eval_*` dicts and the summary belong
    to the latest step; other dicts and all other output are ignored; no settings."""
    records, step, finished = [], 0, None
    for raw in _console_dicts(log.text):
        record = {str(k): n for k, v in raw.items() if (n := numeric(v)) is not None}
        kind = _console_kind(record)
        if kind is None:
            continue
        if kind == "train":
            if finished is not None:
                raise PgrpoSimError(
                    f"{log_name(log.path)} holds more than one run: training metrics follow the end-of-training "
                    f"summary at step {finished}; keep one run's output"
                )
            step += 1
        elif kind == "summary":
            finished = step
        if kind != "summary" or step > 0:  # a summary without training is no step
            record.pop("step", None)
            records.append({"step": float(step), **record})
    if step == 0:
        raise PgrpoSimError(
            f"{log_name(log.path)} has no TRL console dicts with training metrics ({{'loss': …, 'reward': …}})"
        )
    return records, {}
