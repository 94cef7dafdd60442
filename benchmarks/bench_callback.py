"""Workload 9: the TRL callback's cost to a training step (`pgrpo_sim.integrations.trl.ForecastCallback`, issue 49:
target ≤ 5 % slower; a `report`, no comparison-table cases).

TRL's `GRPOTrainer` on the CPU with a tiny randomly initialised model (one-layer Qwen2 of width 16, a character
tokenizer built here: 1 prompt × G 4 per step, completions ≤ 4 tokens, logged every step; about 15 ms a step on one
torch thread: the callback's fixed costs weigh the most against it), `WARMUP` steps and then `STEPS` timed ones, each
side in a fresh process, the sides taking turns over rounds: the seconds between two steps' ends (logging and every
callback included), median over the timed steps, against the run without the callback. Sides:
- "none": no callback (the baseline);
- "callback": the callback with a stand-in forecast (`idle_forecast`, a sleep in the worker: the callback's own cost,
  i.e. its bookkeeping at each step and log call, the snapshots, their pickling, the worker process), a forecast every
  `EVERY` steps;
- "every step": the same with a forecast every step (the most snapshots it can take);
- "forecasting": the real forecast (`watch_forecast`, minutes long) running in the worker (at nice 10) through the
  timed steps: what it takes from a training that shares its CPU cores (on a GPU machine the steps run on the GPU).
The trainer's sampling is seeded, so every side trains on the same completions. Needs TRL (`pip install -e
'.[trl]'`); skipped with a message without it. Standalone: `python benchmarks/bench_callback.py [--quick]`.
"""

from __future__ import annotations

import statistics
import sys
import time

import harness

WARMUP = 400
"""Steps before the timed ones (about 5 s): the worker process starts meanwhile (JAX's import, seconds)."""
STEPS = 800
"""Timed steps (about 10 s)."""
EVERY = 10
"""Steps between two forecasts (the callback's default)."""
SIDES = ("none", "callback", "every step", "forecasting")
ROUNDS = 3


def available() -> bool:
    """Whether TRL is installed."""
    import importlib.util

    return importlib.util.find_spec("trl") is not None


def idle_forecast(log, run_config=None, *, until=None, level=0.8, seed=0, eval_size=None):
    """A stand-in for `watch_forecast` run in the worker: 2 s asleep, then a fixed forecast from the log's last step."""
    time.sleep(2.0)
    last = float(log.series("reward")[0][-1])
    return dict(step=last, until=float(until), collapse_probability=0.1, collapse_probability_stderr=0.05,
                verdict="learns", final_reward=0.5, final_lower=0.4, final_upper=0.6, peak_reward=0.5, runs=12,
                seconds=2.0)  # fmt: skip


def tiny_trainer(max_steps: int, output_dir: str, **settings):
    """The tiny GRPOTrainer of the module docstring (nothing downloaded): prompts "a+b=", reward the share of 1s in
    the completion; `settings` override its `GRPOConfig` arguments (e.g. report_to). The callback's tests train it
    too."""
    import torch
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate("0123456789+=")}}
    tokens = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tokens.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokens, pad_token="<pad>", eos_token="<eos>")
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32, pad_token_id=0,
                         bos_token_id=1, eos_token_id=1)  # fmt: skip
    model = Qwen2ForCausalLM(config)

    def ones(completions, **kwargs):
        return [c.count("1") / max(len(c), 1) for c in completions]

    args = GRPOConfig(output_dir=output_dir, per_device_train_batch_size=4, num_generations=4, max_completion_length=4,
                      max_steps=max_steps, logging_steps=1, save_strategy="no", use_cpu=True, learning_rate=1e-3,
                      disable_tqdm=True, **{"report_to": "none", "seed": 0, **settings})  # fmt: skip
    prompts = Dataset.from_dict({"prompt": [f"{a}+{b}=" for a in range(4) for b in range(4)]})
    return GRPOTrainer(model=model, reward_funcs=ones, args=args, train_dataset=prompts, processing_class=tokenizer)


def measure_steps(side: str, steps: int, warmup: int) -> dict:
    """Train `warmup` + `steps` steps with `side`'s callback; seconds between the timed steps' ends (median, mean),
    and how many forecasts the callback logged."""
    import tempfile

    import torch
    from transformers import TrainerCallback

    from pgrpo_sim.integrations.trl import ForecastCallback

    ends: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            ends.append(time.perf_counter())

    hooks = [0.0]  # seconds inside the callback's hooks during the timed steps

    def timed(hook):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return hook(*args, **kwargs)
            finally:
                if len(ends) >= warmup:
                    hooks[0] += time.perf_counter() - start

        return run

    torch.set_num_threads(1)  # two threads on a loaded machine made some processes' steps 10× slower throughout
    with tempfile.TemporaryDirectory() as out:
        trainer = tiny_trainer(warmup + steps, out)
        every = dict(callback=EVERY, forecasting=warmup // 2).get(side, 1)  # forecasting: begun before the timed steps
        if side != "none":
            callback = ForecastCallback(every=every, forecast=None if side == "forecasting" else idle_forecast)
            callback.on_log, callback.on_step_end = timed(callback.on_log), timed(callback.on_step_end)
            callback.attach(trainer)
        trainer.add_callback(Clock())
        trainer.train()
    gaps = [b - a for a, b in zip(ends[warmup - 1 : -1], ends[warmup:], strict=True)]
    logged = sum("pgrpo/collapse_probability" in r for r in trainer.state.log_history)
    return dict(side=side, step_s=statistics.median(gaps), mean_s=statistics.fmean(gaps), hook_s=hooks[0] / steps,
                forecasts_logged=logged)  # fmt: skip


def check() -> list[tuple[str, bool]]:
    """With the stand-in forecast, the callback's metrics reach the trainer's log (nothing checked without TRL)."""
    if not available():
        return []
    result = harness.run_measure(__file__, "measure_steps", side="every step", steps=400, warmup=400)
    return [("callback: the forecasts' metrics reach the trainer's log", result["forecasts_logged"] > 0)]


def report(quick: bool, rounds: int, out_dir) -> str:
    """Seconds per training step with each side's callback, against none (module docstring)."""
    title = "## The TRL callback's cost to a training step"
    if not available():
        return f"{title}\n\nSkipped: TRL is not installed (pip install -e '.[trl]')."
    steps, warmup = (200, 200) if quick else (STEPS, WARMUP)
    runs = {side: [] for side in SIDES}
    for _ in range(rounds):
        for side in SIDES:
            runs[side].append(harness.run_measure(__file__, "measure_steps", side=side, steps=steps, warmup=warmup))
    step_s = {side: statistics.median(r["step_s"] for r in rs) for side, rs in runs.items()}
    # each round's side against that round's baseline: load from other jobs drifts between rounds
    ratio = {side: statistics.median(r["step_s"] / b["step_s"] for r, b in zip(rs, runs["none"], strict=True))
             for side, rs in runs.items()}  # fmt: skip
    base = step_s["none"]
    hook_ms = {side: 1000 * statistics.median(r["hook_s"] for r in rs) for side, rs in runs.items()}
    lines = [
        title,
        "",
        f"TRL's GRPOTrainer on the CPU, a one-layer Qwen2 of width 16 (1 prompt × G 4, ≤ 4 tokens, one torch thread), "
        f"{warmup} steps and then {steps} timed ones, {harness.cpu_cores()} cores; each row a fresh process per round, "
        f"median of {rounds} rounds of the median seconds between two steps' ends (range of the rounds in "
        "brackets); × none: the median over rounds of the side's seconds over the baseline's in the same round; "
        "in hooks: the callback's own time per step (its on_step_end and on_log, timed inside the process).",
        "",
        "| Callback | Seconds per step [range] | × none | In hooks ms/step | Forecasts logged | Peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for side, rs in runs.items():
        low, high = min(r["step_s"] for r in rs), max(r["step_s"] for r in rs)
        lines.append(
            f"| {side} | {step_s[side]:.4f} [{low:.4f}, {high:.4f}] | {ratio[side]:.3f} | {hook_ms[side]:.3f} | "
            f"{max(r['forecasts_logged'] for r in rs)} | {max(r['rss_mib'] for r in rs):.0f} |"
        )
    lines += [
        "",
        f"- The callback's own cost (stand-in forecast every {EVERY} steps): {ratio['callback'] - 1:+.1%} per step "
        f"(target ≤ +5 %), of which {hook_ms['callback'] / (1000 * base):.2%} of a step inside its hooks; a "
        f"forecast every step: {ratio['every step'] - 1:+.1%}, {hook_ms['every step'] / (1000 * base):.2%} in hooks.",
        f"- A real forecast running beside the training on the same {harness.cpu_cores()} cores (the worker at nice "
        f"10): {ratio['forecasting'] - 1:+.1%} per step (none of the worker's CPU where the step runs on a GPU).",
        "- Peak RSS is the training process's (JAX and the callback's modules imported: the difference to none); the "
        "worker's own (JAX, the level's programs) is not counted.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--measure":
        harness.side_main(lambda case, side: (None, None), measures={"measure_steps": measure_steps})
    else:
        quick = "--quick" in sys.argv
        print(report(quick, 1 if quick else ROUNDS, None))
