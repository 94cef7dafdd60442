"""The language-model level's start: a supervised (SFT) policy with a chosen accuracy, made from a seed and cached.

Real GRPO runs start from a pretrained model that already writes the format most of the time, answers right some
of the time and varies its length. Here the policy is trained by cross-entropy (Adam) on demonstrations
(`demonstrations`) and **stopped early** when its sampled (T = 1) accuracy on the held-out evaluation prompts first
reaches `start_accuracy`, measured every `CHECK_EVERY` steps on `EVAL_SAMPLES` completions per prompt.

Why early stopping and not a label-noise mixture: a model trained to convergence on a mixture of right and wrong
answers learns the task and a calibrated coin on top — GRPO then only has to sharpen a distribution the model
already computes. Stopped early, the model has learned the format and part of the arithmetic, and its errors are
its own (wrong partial sums, answers guessed after skipped steps), as in a pretrained model that is not good at
the task yet; GRPO must improve the computation itself, which is slower and can break.

What keeps the start broad: demonstrations write a uniformly chosen number of reasoning steps (0 … k, so lengths
4 … 2k + 4 tokens, with the shorter ones harder; imitating them caps the accuracy near 0.4-0.45 at the default
sizes, so a higher target writes every step in a share `full_share` of them, from 0 at 0.3 to 1 at 0.95), and a
fraction `FORMAT_NOISE` of them is malformed (no `<ans>`, no `</ans>`, or no EOS and random digits up to the length
cap), so the start also produces some malformed and runaway completions.

A base model that knows the answers but not the format (a 3 % eval accuracy that GRPO lifts to 30 % in three steps)
is a start with a low `start_format`: the share of well-formed demonstrations (default `DEFAULT_START_FORMAT`, i.e.
`FORMAT_NOISE` malformed). SFT imitates that share, and stopping at `start_accuracy` then leaves a policy whose
answers are right about `start_accuracy / start_format` of the time, hidden behind its format.

Cache: `$PGRPO_SIM_CACHE/lm/` (default `$XDG_CACHE_HOME/pgrpo-sim/lm/`, else `~/.cache/pgrpo-sim/lm/`), one file per
setting named by a hash of every setting that changes the result (task, held-out rule, shape, architecture constants,
target, seed, the SFT constants below and `SFT_VERSION`; `start_file`). Deleting it is safe: the next call trains
again (same result on the same machine); so does a file that cannot be read back (truncated, or written by other
code). The starts the first commands need (the default sizes') ship with the package in `SHIPPED_STARTS`, made by
`tools/ship_starts.py` and named the same way, so a change of any setting leaves them unused (and a test red).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jax import Array

from ...base.checks import check_range, check_seed
from ...base.compile_options import OPTIMISED_CODEGEN
from ...base.errors import PgrpoSimError
from ...base.files import save_atomically
from .policy import INIT_STD, LN_EPS, MLP_RATIO, Policy, PolicyShape, init_policy, sample, token_logits
from .task import (
    DIGIT0,
    HOLDOUT_MOD,
    PAD,
    TaskSpec,
    eval_prompts,
    max_solution_steps,
    response_mask,
    solutions,
    task_prompts,
    task_reward,
)

SFT_VERSION = 3
"""Bump when the SFT recipe, the task's held-out rule or the architecture's code changes, so cached starts made by the
old one are not reused (version 2: MLP width 2×, held-out weights 3^(k−i); version 3: SFT compiled with optimised
machine code in every command — before, a start first trained under `validate`'s unoptimised code generation
differed from one trained by any other command in its last bits and so in its stopping step)."""
SFT_BATCH = 128
"""Demonstrations per SFT step."""
SFT_LEARNING_RATE = 3e-3
"""Adam's learning rate for SFT (fast for widths 32–128; the start only needs to pass the target)."""
CHECK_EVERY = 20
"""SFT steps between accuracy checks; a bisection then finds the step where the target is first reached."""
MAX_SFT_STEPS = 6000
"""SFT gives up (one-line error) when the target is not reached in this many steps."""
EVAL_SAMPLES = 4
"""Sampled completions per evaluation prompt in the accuracy check (256 prompts: 1024 completions, standard error
≤ 0.016)."""
FORMAT_NOISE = 0.1
"""Share of malformed demonstrations (a third each: no `<ans>`, no `</ans>`, no EOS)."""
DEFAULT_START_FORMAT = 1 - FORMAT_NOISE
"""Share of well-formed demonstrations unless a start asks for another (`start_format`)."""
MAX_START_ACCURACY = 0.95
"""Highest target: the accuracy must be reachable and leave GRPO something to learn."""
UNIFORM_CAP = 0.3
"""Targets up to this imitate demonstrations of uniformly varied length only (`full_share`)."""
SFT_OPTIMIZER = optax.adam(SFT_LEARNING_RATE)
SHIPPED_STARTS = Path(__file__).resolve().parent / "starts"
"""The package's folder of pre-trained starts (`tools/ship_starts.py`), read before the cache."""
CACHE_ENV = "PGRPO_SIM_CACHE"
"""Environment variable: the cache root (the SFT starts go to its `lm/` folder)."""


class SFTStart(NamedTuple):
    """A pretrained start: `params`, its measured sampled (T = 1) accuracy on the evaluation prompts, and the SFT
    steps it took.

    Attributes:
        params: the SFT policy (`Policy`, float32).
        accuracy: its sampled (T = 1) share of rewarded completions on the evaluation prompts; in [0, 1].
        steps: SFT (Adam) steps it took; ≥ 0.
    """

    params: Policy
    accuracy: float
    steps: int


@functools.partial(jax.jit, static_argnames=("spec", "n"))
def demonstrations(
    spec: TaskSpec, key, n: int, format_noise: float | Array = FORMAT_NOISE, full_share: float | Array = 0.0
) -> tuple[Array, Array]:
    """`n` SFT examples: training prompts int32[n, prompt_len] and completions int32[n, max_response_len] that write
    a uniformly chosen number of reasoning steps (all of them for a share `full_share`) and the right answer; a
    share `format_noise` is malformed (see the module docstring).

    Args:
        spec: the task (`TaskSpec`); static.
        key: a JAX PRNG key.
        n: demonstrations to draw; integer ≥ 1; static.
        format_noise: the chance that a demonstration is malformed; in [0, 1]; may be traced.
        full_share: the chance that a demonstration writes every reasoning step; in [0, 1]; may be traced.

    Returns:
        (prompts, completions): int32 (n, prompt_len) and int32 (n, max_response_len) tokens.
    """
    k_prompt, k_steps, k_kind, k_drop, k_digits = jax.random.split(key, 5)
    prompts, _ = task_prompts(spec, k_prompt, n)
    most = max_solution_steps(spec)
    steps = jax.random.randint(k_steps, (n,), 0, most + 1)
    full = jax.random.uniform(jax.random.fold_in(k_steps, 1), (n,)) < full_share  # k_steps' own draw unchanged
    steps = jnp.where(full, most, steps)
    good = solutions(spec, prompts, steps)
    length = spec.max_response_len
    # malformed kinds 0, 1, 2 drop `<ans>`, `</ans>` or EOS; kind 3 (the rest) keeps the demonstration intact
    kind = jnp.where(jax.random.uniform(k_kind, (n,)) < format_noise, jax.random.randint(k_drop, (n,), 0, 3), 3)
    answer_at = 2 * steps  # position of `<ans>`; `</ans>` is 2 later, EOS 3 later
    dropped = answer_at + jnp.asarray([0, 2, 3, length])[kind]
    positions = jnp.arange(length)[None, :]
    source = jnp.minimum(positions + (positions >= dropped[:, None]), length - 1)
    shifted = jnp.where(positions == length - 1, PAD, jnp.take_along_axis(good, source, axis=1))
    digits = jax.random.randint(k_digits, (n, length), DIGIT0, DIGIT0 + spec.modulus)
    runaway = (kind == 2)[:, None] & (positions >= answer_at[:, None] + 3)
    completions = jnp.where(runaway, digits, jnp.where(kind[:, None] == 3, good, shifted))
    return prompts, completions.astype(jnp.int32)


def _sft_loss(params: Policy, prompts: Array, completions: Array, spec: TaskSpec) -> Array:
    """Mean cross-entropy (nats per token) of the completion tokens up to and including EOS."""
    sequences = jnp.concatenate([prompts, completions], axis=1)[:, :-1]
    logits = jax.vmap(token_logits, in_axes=(None, 0))(params, sequences)[:, spec.prompt_len - 1 :]
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(log_probs, completions[..., None], axis=-1)[..., 0]
    mask = response_mask(spec, completions)
    return (nll * mask).sum() / mask.sum()


@functools.partial(jax.jit, static_argnames=("spec", "samples"), compiler_options=dict(OPTIMISED_CODEGEN))
def eval_accuracy(spec: TaskSpec, params: Policy, key, temperature=1.0, samples: int = EVAL_SAMPLES) -> Array:
    """Share of rewarded completions on the evaluation prompts, `samples` completions each at `temperature` (0:
    greedy, where one sample per prompt suffices). Compiled once per (`spec`, `samples`, policy shape).

    Args:
        spec: the task (`TaskSpec`); static.
        params: the `Policy`.
        key: a JAX PRNG key.
        temperature: the sampling temperature; ≥ 0 (0: greedy).
        samples: completions per evaluation prompt; integer ≥ 1; static.

    Returns:
        The share of rewarded completions; float32 scalar in [0, 1].
    """
    prompts, answers = eval_prompts(spec)
    prompts, answers = jnp.tile(prompts, (samples, 1)), jnp.tile(answers, samples)
    keys = jax.random.split(key, len(answers))
    draw = jax.vmap(sample, in_axes=(None, 0, 0, None, None))
    completions, _ = draw(params, prompts, keys, temperature, spec.max_response_len)
    return task_reward(spec, completions, answers).mean()


def full_share(start_accuracy: float) -> float:
    """The share of demonstrations that write every reasoning step, for a start of `start_accuracy`: 0 up to
    `UNIFORM_CAP` (varied lengths keep the start broad), rising linearly to 1 at `MAX_START_ACCURACY` (imitating
    varied lengths caps the sampled accuracy near 0.4-0.45 at the default sizes: answers guessed after skipped steps
    are mostly wrong, so higher starts need fuller demonstrations, as a model fine-tuned on full solutions is).

    Args:
        start_accuracy: the SFT start's target sampled accuracy; in (0, 0.95].

    Returns:
        The share, in [0, 1], rounded to 1e-3 (one setting, one cached file).
    """
    share = (float(start_accuracy) - UNIFORM_CAP) / (MAX_START_ACCURACY - UNIFORM_CAP)
    return round(min(max(share, 0.0), 1.0), 3)


def _format_noise(start_format: float) -> float:
    """The malformed share of the demonstrations for a start's well-formed share (rounded: one setting, one file)."""
    return round(1.0 - float(start_format), 12)


def start_settings(spec: TaskSpec, shape: PolicyShape, start_accuracy: float, seed: int, start_format: float) -> dict:
    """Everything that changes the SFT result, as JSON-able values: the key of its cached start.

    Args:
        spec: the task (`TaskSpec`).
        shape: the policy's sizes (`PolicyShape`).
        start_accuracy: the target sampled accuracy; in (0, 0.95].
        seed: the SFT seed; integer in [0, 2³² − 1].
        start_format: share of well-formed demonstrations; in (0, 1].

    Returns:
        The settings as a dict of JSON-able values (version, task, shape, architecture, target, seed, SFT constants).
    """
    return dict(
        version=SFT_VERSION,
        task=dict(modulus=spec.modulus, operands=spec.operands, max_response_len=spec.max_response_len),
        eval_size=spec.eval_size,
        shape=dict(vocab=shape.vocab, max_len=shape.max_len, width=shape.width, layers=shape.layers, heads=shape.heads),
        architecture=dict(mlp_ratio=MLP_RATIO, init_std=INIT_STD, ln_eps=LN_EPS),
        held_out_modulus=HOLDOUT_MOD,
        start_accuracy=float(start_accuracy),
        seed=int(seed),
        sft=dict(
            batch=SFT_BATCH,
            learning_rate=SFT_LEARNING_RATE,
            check_every=CHECK_EVERY,
            max_steps=MAX_SFT_STEPS,
            eval_samples=EVAL_SAMPLES,
            format_noise=_format_noise(start_format),
        )
        # a key only where it is used: starts of targets up to UNIFORM_CAP keep the files they had
        | ({"full_share": full} if (full := full_share(start_accuracy)) > 0 else {}),
    )


def start_file(settings: dict) -> str:
    """The file name of the start with these `start_settings`: `sft-` and 20 hex digits of their SHA-256."""
    return f"sft-{hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]}.eqx"


def cache_dir(environ: dict | None = None) -> Path:
    """Where SFT starts are cached: `$PGRPO_SIM_CACHE/lm`, else `$XDG_CACHE_HOME/pgrpo-sim/lm`, else
    `~/.cache/pgrpo-sim/lm`.

    Args:
        environ: the environment variables to read; None: `os.environ`.

    Returns:
        The folder (not created here).
    """
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser() / "lm"
    root = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(root).expanduser() / "pgrpo-sim" / "lm"


def _check(spec: TaskSpec, shape: PolicyShape, start_accuracy, seed, start_format) -> None:
    if not isinstance(spec, TaskSpec) or not isinstance(shape, PolicyShape):
        raise PgrpoSimError("task_spec must be a TaskSpec and shape a PolicyShape")
    if shape.vocab != spec.vocab_size or shape.max_len < spec.prompt_len + spec.max_response_len:
        raise PgrpoSimError(
            f"shape must have vocab {spec.vocab_size} and max_len >= {spec.prompt_len + spec.max_response_len} for "
            f"this task, got vocab {shape.vocab} and max_len {shape.max_len} (use task_policy_shape)"
        )
    check_range("start_accuracy", start_accuracy, 0, MAX_START_ACCURACY, low_open=True)
    check_range("start_format", start_format, 0, 1, low_open=True)
    if start_accuracy > start_format:
        raise PgrpoSimError(
            f"start_accuracy ({start_accuracy:g}) cannot exceed start_format ({start_format:g}): a malformed "
            "completion is not rewarded"
        )
    check_seed(seed)


@functools.partial(jax.jit, static_argnames=("spec", "format_noise", "full"), compiler_options=dict(OPTIMISED_CODEGEN))
def _train_chunk(spec: TaskSpec, params: Policy, opt_state, key, format_noise: float, full: float):
    """`CHECK_EVERY` SFT steps, each on fresh demonstrations: the final (params, optimizer state) and the params
    after every step (stacked on a leading axis; small, and they let the stop land on one step)."""

    def step(carry, step_key):
        params, opt_state = carry
        prompts, completions = demonstrations(spec, step_key, SFT_BATCH, format_noise, full)
        grads = jax.grad(_sft_loss)(params, prompts, completions, spec)
        updates, opt_state = SFT_OPTIMIZER.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (params, opt_state), params

    return jax.lax.scan(step, (params, opt_state), jax.random.split(key, CHECK_EVERY))


class StartNotReached(PgrpoSimError):
    """SFT did not reach the asked `start_accuracy` in `MAX_SFT_STEPS` steps; `reached` is where it stopped. (Imitating
    demonstrations of varied length levels off near 0.4-0.45 at the default sizes; `full_share` gives higher targets
    fuller demonstrations.)

    Attributes:
        target: the asked `start_accuracy`; in (0, 0.95].
        reached: the sampled accuracy at the last check; in [0, 1].
    """

    def __init__(self, target: float, reached: float):
        self.target, self.reached = float(target), float(reached)
        super().__init__(
            f"start_accuracy {target:g} was not reached in {MAX_SFT_STEPS} SFT steps (reached {reached:.3f}): ask for "
            "less, or give the policy more width or layers"
        )


def train_start(spec: TaskSpec, shape: PolicyShape, start_accuracy: float, seed: int, start_format: float) -> SFTStart:
    """SFT from `seed`, checking the accuracy every `CHECK_EVERY` steps; in the chunk where it first reaches
    `start_accuracy`, a bisection over the steps finds the crossing, and of its two sides the one closer to the target
    is the start.

    Args:
        spec: the task (`TaskSpec`).
        shape: the policy's sizes (`PolicyShape`, fitting `spec`).
        start_accuracy: the target sampled (T = 1) accuracy; in (0, 0.95].
        seed: the seed of the initial parameters, demonstrations and checks; integer in [0, 2³² − 1].
        start_format: share of well-formed demonstrations; in (0, 1].

    Returns:
        The `SFTStart` (not cached; `pretrained_start` caches and checks its arguments).

    Raises:
        StartNotReached: the target is not reached in `MAX_SFT_STEPS` steps.
    """
    key_init, key_data, key_eval = jax.random.split(jax.random.key(seed), 3)
    params = init_policy(shape, key_init)

    def checked(params, steps):
        return SFTStart(params, float(eval_accuracy(spec, params, key_eval)), steps)

    opt_state = SFT_OPTIMIZER.init(params)  # pyright: ignore[reportArgumentType]  # optax types no eqx.Module pytrees
    below = checked(params, 0)
    for chunk in range(MAX_SFT_STEPS // CHECK_EVERY):
        chunk_key = jax.random.fold_in(key_data, chunk)
        noise, full = _format_noise(start_format), full_share(start_accuracy)
        (params, opt_state), history = _train_chunk(spec, params, opt_state, chunk_key, noise, full)
        above = checked(params, below.steps + CHECK_EVERY)
        if above.accuracy >= start_accuracy:
            while above.steps - below.steps > 1:
                middle = (above.steps + below.steps) // 2
                at = middle - chunk * CHECK_EVERY - 1
                step = checked(jax.tree.map(lambda leaf, at=at: leaf[at], history), middle)
                below, above = (below, step) if step.accuracy >= start_accuracy else (step, above)
            closer = abs(below.accuracy - start_accuracy) < abs(above.accuracy - start_accuracy)
            return below if closer and below.steps > 0 else above
        below = above
    raise StartNotReached(start_accuracy, below.accuracy)


def pretrained_start(
    task_spec: TaskSpec,
    shape: PolicyShape,
    start_accuracy: float,
    seed: int = 0,
    *,
    start_format: float = DEFAULT_START_FORMAT,
    cache: bool = True,
) -> SFTStart:
    """The SFT start (params, measured accuracy, steps) for these settings: loaded from the package's shipped starts
    or the cache when there, else trained (see the module docstring) and, with `cache`, saved. The accuracy is the
    sampled (T = 1) share of rewarded completions on the evaluation prompts, measured on `EVAL_SAMPLES` × the
    evaluation prompts (standard error ≤ 0.016 for 256 of them); it lands within one SFT step's progress plus that
    error of the target (the returned value says where). `start_format`: the share of well-formed demonstrations
    (module docstring).

    Args:
        task_spec: the task (`TaskSpec`).
        shape: the policy's sizes (`PolicyShape`) with the task's vocab and max_len ≥ prompt plus response length.
        start_accuracy: the target sampled (T = 1) accuracy; in (0, 0.95], ≤ `start_format`.
        seed: the SFT seed; integer in [0, 2³² − 1].
        start_format: share of well-formed demonstrations; in (0, 1].
        cache: whether to read the shipped starts and read and write the cache (`cache_dir`).

    Returns:
        The `SFTStart`.

    Raises:
        PgrpoSimError: an argument has the wrong type or is out of range, or the shape does not fit the task.
        StartNotReached: SFT does not reach the target in `MAX_SFT_STEPS` steps.
    """
    _check(task_spec, shape, start_accuracy, seed, start_format)
    name = start_file(start_settings(task_spec, shape, start_accuracy, seed, start_format))
    path = cache_dir() / name
    like = (init_policy(shape, jax.random.key(0)), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
    for stored in (SHIPPED_STARTS / name, path) if cache else ():
        if stored.exists():
            try:
                params, accuracy, steps = eqx.tree_deserialise_leaves(stored, like)
                return SFTStart(params, float(accuracy), int(steps))
            except (OSError, ValueError, RuntimeError, EOFError):
                pass  # unreadable or stale: trained again below and the cached file replaced
    start = train_start(task_spec, shape, float(start_accuracy), int(seed), float(start_format))
    if cache:
        save_start(path, start)
    return start


def save_start(path: Path, start: SFTStart) -> None:
    """Write `start` (params, accuracy, steps) to `path` as equinox leaves, atomically (`pretrained_start` reads it).

    Args:
        path: the file; its folder exists.
        start: the `SFTStart`.
    """
    tree = (start.params, jnp.asarray(start.accuracy, jnp.float32), jnp.asarray(start.steps, jnp.int32))
    save_atomically(path, lambda handle: eqx.tree_serialise_leaves(handle, tree))


def pretrained_policy(
    task_spec: TaskSpec,
    shape: PolicyShape,
    start_accuracy: float,
    seed: int = 0,
    start_format: float = DEFAULT_START_FORMAT,
) -> Policy:
    """The parameters of `pretrained_start` (cached on disk): a reproducible SFT policy whose sampled (T = 1)
    accuracy on the evaluation prompts is about `start_accuracy` (in (0, 0.95]), `start_format` of its
    demonstrations well-formed.

    Args:
        task_spec: the task (`TaskSpec`).
        shape: the policy's sizes (`PolicyShape`, `task_policy_shape`).
        start_accuracy: the target sampled (T = 1) accuracy; in (0, 0.95], ≤ `start_format`.
        seed: the SFT seed; integer in [0, 2³² − 1].
        start_format: share of well-formed demonstrations; in (0, 1].

    Returns:
        The `Policy` (float32).

    Raises:
        PgrpoSimError: as `pretrained_start` (`StartNotReached` included).
    """
    return pretrained_start(task_spec, shape, start_accuracy, seed, start_format=start_format).params
