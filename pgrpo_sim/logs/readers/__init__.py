"""Readers for real GRPO training logs, into one tidy table with canonical metric names.

Formats (`FORMATS`; `detect_format` picks one from the file's content, or its name for TensorBoard):
- "trl": Hugging Face TRL `trainer_state.json` (GRPOTrainer `log_history`), both the older key names
  (Unsloth era: `reward`, `reward_std`, `kl`, `rewards/<fn>`) and TRL 0.26's (`entropy`,
  `frac_reward_zero_std`, `clip_ratio/region_mean`, `completions/*`, `eval_*`).
- "trl_console": TRL's console output, the logged dicts printed as Python literals (`{'loss': '0', 'reward':
  '0.125', ...}`, string or float values) among other output and tqdm progress bars (a dict may follow a carriage
  return). The console does not print the step: the n-th dict with training metrics is step n (with
  `logging_steps` k > 1 the trainer's step is k·n); `eval_*` dicts belong to the latest step and the closing
  `{'train_runtime': ...}` summary is no step (merged into the last one, as in `trainer_state.json`).
- "typed_jsonl": JSON lines whose records carry a `type` (the CS336 GRPO loop): `rollout` (one per GRPO step,
  the batch's reward, `std_reward`, `num_rollouts`, ...), `train` (one per optimizer update within a GRPO
  step), `eval` (periodic, on a validation set); the step is `grpo_step`. See `typed_jsonl.read`.
- "verl": verl metrics, either its `file` logger's JSONL (`{"step": n, "data": {...}}` or flat objects) or
  its console lines (`step:12 - critic/score/mean:0.4 - actor/entropy:0.9 - ...`).
- "tensorboard": an event file (`events.out.tfevents.*`) or a folder holding a run's event files, read with
  tensorboard's own `EventAccumulator` (optional extra: `pip install 'pgrpo-sim[tensorboard]'`); every scalar,
  old-style or TF2 tensor, one record per step. TRL writes `train/<key>` and `eval/<key>` tags.
- "wandb": a Weights & Biases CSV export: a panel's (`Step`, `<run> - train/reward`, `..__MIN`, `..__MAX`;
  the min/max band columns are not metrics, a single run's name prefix is removed) or a run's history
  (`_step`, `_runtime`, `trainer/global_step`, ...; `trainer/global_step` is preferred to `_step`).
- "wandb_long": a W&B export in long form, `run_name,metric,step,value`, one row per logged value, often several
  runs of a sweep in one file: `run` picks one (required when the file holds several; the error lists them). A
  metric logged several times at one step (per optimiser step, e.g. `train/grad_norm` with 16 updates per
  rollout) is averaged there.
- "jsonl": any other file of one JSON object per line, or one JSON array of objects (pandas' `to_json(orient=
  "records")`). Strings holding a number (`"0.125"`) are numbers in every JSON format.
- "csv": any comma- (or tab-) separated table with a header row, including `pgrpo-sim simulate` output.

Each canonical metric (`CANONICAL`) is looked up under its known source names (ignoring case), first match
wins, then under the same names with TRL's `train/` prefix (TensorBoard and W&B); a column map
(`{"reward": "train/reward"}`) overrides the lookup. Source names are kept (`TrainingLog.sources`), as are the
numeric columns that map to no canonical name (`TrainingLog.other`). Metrics that a log lacks are listed in
`TrainingLog.missing`, never filled in. Eval metrics keep an eval name (`eval_*`, `eval/*`) in every format, so
they are never read as the training reward.

`TrainingLog.settings` holds the run settings the log itself states, under TRL `GRPOConfig` names
(`num_generations`, `prompts_per_step` = unique prompts per rollout, `num_iterations`, `steps_per_generation`,
`epsilon`, `epsilon_high`, `beta`, `learning_rate` when constant, `loss_type` as the log names it); nothing is
guessed, so it is often empty.

Records sharing a step are merged (TRL logs eval metrics as a separate record at the training step). A
record whose reward is logged but not a finite number (NaN, inf, null, or text such as "n/a") is
dropped with a warning and counted in `TrainingLog.skipped_steps` (an empty CSV cell is "not logged");
steps that go backwards and a metric logged twice at one step with different values are errors. Every error
is a one-line `ValueError`.

One module per format (`trl`, `trl_console`, `typed_jsonl`, `verl`, `tensorboard_events`, `wandb_csv`,
`wandb_long`, `jsonl`, `csv_table`), each with its `detect` and `read`, behind one table (`registry.READERS`) that
`detect_format` and `read_log` consult; `table` holds `TrainingLog`, the canonical names and `tidy`, `source` the
file and its values, `simulation` a simulated run as a log (`from_run`).
"""

from .registry import FORMATS as FORMATS, detect_format as detect_format, read_log as read_log
from .simulation import RUN_COLUMNS as RUN_COLUMNS, from_run as from_run
from .source import Parsed as Parsed
from .table import (
    CANONICAL as CANONICAL,
    SCHEDULE_TOLERANCE as SCHEDULE_TOLERANCE,
    SETTINGS as SETTINGS,
    TrainingLog as TrainingLog,
    check_columns as check_columns,
    check_log as check_log,
    constant_learning_rate as constant_learning_rate,
    logged_schedule as logged_schedule,
    parse_column_map as parse_column_map,
    tidy as tidy,
)
