"""Workload 6: the cost of `jax.grad` through a 1000-step expected-mode run, relative to the run (a `report`).

The objective is the mean reward over the last quarter of a 1000-step expected-mode `simulate` run of
the default bandit (N = 2, G = 8, on-policy, heavy-ball SGD), as a function of (η, μ, β); its gradient
d(mean late reward)/d(η, μ, β) by reverse mode (`jax.grad`, with the full tape and with `simulate(checkpoint=True)`,
blocks of √steps rematerialised; and by forward mode, `jax.jacfwd` with three tangents, in the one-process table),
against the forward run alone:
- one configuration (η, μ, β) = `POINT`;
- vmapped over 10^3 configurations (bench_bandit's (η, μ, β) sweep, η scaled into [0.002, 0.2]), at 1000 steps
  and at 4000 (the tape's memory grows with the steps, the checkpointed gradient's with their square root).
- vmapped over 2040 and 2048 configurations (`WIDE`), with XLA's CPU defaults and with reductions kept out of
  YNNPACK (`YNN_REDUCE_OFF`), in the wide-batch table.
Float32, jitted and compiled ahead of time, one XLA CPU device; each (case, side) runs in a fresh
process, one untimed warm-up call, then `reps` calls timed together, median over rounds.
"""

from __future__ import annotations

import os
import time

import harness
import numpy as np

STEPS = 1000
POINT = (0.01, 0.5, 0.05)
"""(η, μ, β) of the single configuration: the late reward (0.974) still depends on all three."""
SIDES = ("forward", "grad", "grad_checkpoint")
GRAD_TARGET = 4.0
"""Issue #16, target 4: a gradient through a run costs at most this many forward runs."""
WIDE = (2040, 2048)
"""Batch widths either side of the width from which XLA's CPU backend (jaxlib 0.10) hands the reductions of a
vmapped reverse-mode gradient (sums over the arms that transpose broadcasts) to YNNPACK library calls: between 2040
and 2048 configurations, where the gradient's time per configuration jumps 3–6-fold (measured: RESULTS.md)."""
YNN_REDUCE_OFF = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
"""XLA flag that keeps reductions out of YNNPACK: XLA's own fused loops compute them."""


def objective(steps: int = STEPS, checkpoint: bool = False):
    """(η, μ, β) ↦ mean reward over the last quarter of a `steps`-step expected-mode run (default bandit)."""
    import pgrpo_sim as ps

    config = ps.bandit.config()

    def late_reward(learning_rate, momentum, beta):
        reward = ps.simulate(
            config.replace(learning_rate=learning_rate, momentum=momentum, beta=beta), steps, checkpoint=checkpoint
        ).reward
        return reward[-((steps + 1) // 4) :].mean()

    return late_reward


def per_arm_objective(steps: int = STEPS, checkpoint: bool = False):
    """`objective` on `profile_expected.fused_two_arm_rewards`: the same update, each arm's logit and velocity its
    own array."""
    import profile_expected

    def late_reward(learning_rate, momentum, beta):
        reward = profile_expected.fused_two_arm_rewards(
            learning_rate, momentum, beta, steps=steps, p_ref=0.2, num_generations=8, checkpoint=checkpoint
        )
        return reward[-((steps + 1) // 4) :].mean()

    return late_reward


def transformed(side: str, steps: int = STEPS):
    import jax

    f = objective(steps, checkpoint=side == "grad_checkpoint")
    if side in ("grad", "grad_checkpoint"):
        return jax.grad(f, argnums=(0, 1, 2))
    if side == "jacfwd":
        return jax.jacfwd(f, argnums=(0, 1, 2))
    return f


def sweep(configs: int):
    """(η, μ, β) arrays of `configs` configurations, float32."""
    rng = np.random.default_rng(0)
    learning_rate = 10 ** rng.uniform(np.log10(0.002), np.log10(0.2), configs)
    return tuple(
        np.asarray(x, np.float32) for x in (learning_rate, rng.uniform(0, 0.9, configs), rng.uniform(0, 0.05, configs))
    )


def _grad_cases(quick: bool) -> list[dict]:
    """One configuration and 10^3 vmapped, at 1000 steps, and 10^3 at 4000 steps (--quick: 200 and 800 steps,
    100 configurations)."""
    steps, configs = (200, 100) if quick else (STEPS, 1000)
    return [
        dict(label="one configuration", configs=None, steps=steps, reps=50 if quick else 100),
        dict(label=f"vmap over {configs} configurations", configs=configs, steps=steps, reps=3),
        dict(label=f"vmap over {configs} configurations, {4 * steps} steps", configs=configs, steps=4 * steps, reps=1),
    ]


def prepare_side(case: dict, side: str):
    """Compile `side` of `case` ahead of time and call it once (untimed: a first call also pays for its buffers'
    first touch, which made a vmapped forward run 2–3× slower than the calls after it); `run()` makes `reps`
    calls, ready."""
    import jax

    fn = transformed(side, case["steps"])
    if case["configs"] is None:
        args = tuple(np.float32(x) for x in POINT)
    else:
        fn = jax.vmap(fn)
        args = sweep(case["configs"])
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))

    def run():
        for _ in range(case["reps"]):
            out = compiled(*args)
        jax.block_until_ready(out)

    return run, compile_s


def check() -> list[tuple[str, bool]]:
    """Float64: `jax.grad` and `jax.jacfwd` of the objective against central finite differences
    (step 1e-5 × max(|x|, 0.01)) at `POINT` and at (0.005, 0.9, 0.05), relative error of the gradient
    vector ≤ 1e-6; float32: the vmapped `jax.grad` of 3 configurations, and that of the per-arm hand-written
    objective, against float64 `jax.grad` of each, to 1e-3."""
    import jax

    results = []
    with jax.enable_x64(True):
        f = jax.jit(objective())
        grad, jacfwd = jax.jit(transformed("grad")), jax.jit(transformed("jacfwd"))
        for point in (POINT, (0.005, 0.9, 0.05)):
            p = [np.float64(x) for x in point]
            fd = []
            for i in range(3):
                h = 1e-5 * max(abs(p[i]), 1e-2)
                up, down = list(p), list(p)
                up[i] += h
                down[i] -= h
                fd.append((float(f(*up)) - float(f(*down))) / (2 * h))
            fd = np.array(fd)
            for name, g in (("grad", grad), ("jacfwd", jacfwd)):
                g = np.array([float(x) for x in g(*p)])
                err = float(np.linalg.norm(g - fd) / np.linalg.norm(fd))
                results.append(
                    (
                        f"{name} at (η, μ, β) = {point}: {np.array2string(g, precision=4)} vs finite "
                        f"differences, rel. error {err:.1e} (limit 1e-6)",
                        err <= 1e-6,
                    )
                )
        args = sweep(3)
        single = np.array([[float(x) for x in grad(*(np.float64(a[i]) for a in args))] for i in range(3)]).T
    batched = np.array(jax.jit(jax.vmap(transformed("grad")))(*args))
    err = float(np.max(np.abs(batched - single) / (np.abs(single) + 1e-3)))
    results.append(
        (
            f"vmapped float32 grad of 3 configurations vs float64 grad of each: max rel. error {err:.1e} (limit 1e-3)",
            err <= 1e-3,
        )
    )
    per_arm_grad = np.array(jax.jit(jax.vmap(jax.grad(per_arm_objective(), argnums=(0, 1, 2))))(*args))
    err = float(np.max(np.abs(per_arm_grad - single) / (np.abs(single) + 1e-3)))
    results.append(
        (
            "float32 grad of the per-arm hand-written objective (`fused_two_arm_rewards`) vs pgrpo-sim's float64 "
            f"grad, 3 configurations: max rel. error {err:.1e} (limit 1e-3)",
            err <= 1e-3,
        )
    )
    return results


def _interleaved_ms(fns: dict, args, reps: int, rounds: int = 5) -> dict[str, float]:
    """Milliseconds per call of each of `fns` (jitted, compiled ahead of time): the median over `rounds` rounds,
    in which the functions take turns (an untimed call, then `reps` timed calls each), so a slow spell of the
    machine falls on all of them."""
    import jax

    compiled = {name: jax.jit(fn).lower(*args).compile() for name, fn in fns.items()}
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, run in compiled.items():
            jax.block_until_ready(run(*args))
            start = time.perf_counter()
            for _ in range(reps):
                out = run(*args)
            jax.block_until_ready(out)
            times[name].append((time.perf_counter() - start) / reps)
    return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


def measure_fused(steps: int, configs: int) -> dict:
    """In one process: milliseconds per call of forward, grad (also checkpointed, where the objective can be) and
    jacfwd, for pgrpo-sim's objective and for the same objective on `profile_expected.fused_rewards` (the on-policy
    update written out in jnp, no library code but the pmf) and on `fused_two_arm_rewards` (the same, each arm's
    logit and velocity its own array), one configuration and vmapped over `configs` (`_interleaved_ms`)."""
    import jax
    import profile_expected

    def fused(learning_rate, momentum, beta):
        reward = profile_expected.fused_rewards(
            learning_rate, momentum, beta, steps=steps, n_arms=2, n_correct=1, p_ref=0.2, num_generations=8
        )
        return reward[-((steps + 1) // 4) :].mean()

    single, batch = tuple(np.float32(x) for x in POINT), sweep(configs)
    objectives = {
        "pgrpo-sim": (objective(steps), objective(steps, checkpoint=True)),
        "hand-written jnp": (fused, None),
        "hand-written jnp, per-arm arrays": (per_arm_objective(steps), per_arm_objective(steps, checkpoint=True)),
    }
    out = {}
    for name, (f, f_checkpointed) in objectives.items():
        for case, args, wrap, reps in (("one", single, lambda g: g, 50), ("vmap", batch, jax.vmap, 2)):
            variants = dict(forward=f, grad=jax.grad(f, argnums=(0, 1, 2)), jacfwd=jax.jacfwd(f, argnums=(0, 1, 2)))
            if f_checkpointed is not None:
                variants["grad_checkpoint"] = jax.grad(f_checkpointed, argnums=(0, 1, 2))
            out[f"{name}|{case}"] = _interleaved_ms({side: wrap(g) for side, g in variants.items()}, args, reps)
    return out


def measure_wide(steps: int, configs: int) -> dict:
    """In this process (its XLA_FLAGS decide where reductions go): milliseconds per call of the forward run,
    `jax.grad` (full tape and checkpointed) and `jax.jacfwd`, vmapped over `configs` configurations
    (`_interleaved_ms`)."""
    import jax

    sides = {side: jax.vmap(transformed(side, steps)) for side in (*SIDES, "jacfwd")}
    return _interleaved_ms(sides, sweep(configs), 1)


def _verdict(fresh: dict[str, float], interleaved: dict[str, float], configs: int) -> str:
    """Target 4 judged on both tables' vmapped case (milliseconds per side): the cheapest gradient over the
    forward run, rounded as printed; met or missed in each."""
    names = dict(grad="full-tape grad", grad_checkpoint="checkpointed grad", jacfwd="jacfwd")
    judged, met = [], []
    for where, ms in (("fresh processes", fresh), ("one process, sides taking turns", interleaved)):
        best = min((side for side in names if side in ms), key=ms.get)
        ratio = round(ms[best] / ms["forward"], 1)
        judged.append(f"{where}: {names[best]} {ratio:.1f}×")
        if ratio <= GRAD_TARGET:
            met.append(where)
    verdict = "met in both" if len(met) == 2 else f"met in {met[0]} only" if met else "missed in both"
    return (
        f"- Target (issue #16): gradients with respect to ≤ 4 hyperparameters ≤ {GRAD_TARGET:g}× the forward run; "
        f"the cheapest way vmapped over {configs} configurations: " + "; ".join(judged) + f" — {verdict}."
    )


def _wide_table(steps: int) -> list[str]:
    """`measure_wide` either side of `WIDE`'s threshold, with XLA's defaults and with `YNN_REDUCE_OFF`, each in a
    fresh process."""
    flags = os.environ.get("XLA_FLAGS", "")
    envs = {"default": None, f"`{YNN_REDUCE_OFF}`": dict(os.environ, XLA_FLAGS=f"{flags} {YNN_REDUCE_OFF}".strip())}
    lines = [
        "",
        f"Wide batches: the same objective vmapped over {' and '.join(map(str, WIDE))} configurations ({steps} "
        "steps), with XLA's default CPU settings and with reductions kept out of YNNPACK, each in a fresh process "
        "(sides taking turns, median of 5 rounds; milliseconds per call). From 2048 configurations on, XLA's CPU "
        "backend (jaxlib 0.10) hands "
        "the reductions of reverse mode (sums over the arms, the transposes of broadcasts of per-configuration "
        "values) to YNNPACK library calls; forward mode has no such reductions.",
        "",
        "| Configurations | XLA flag | forward ms | grad / forward | checkpointed / forward | jacfwd / forward |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, env in envs.items():
        for configs in WIDE:
            ms = harness.run_measure(__file__, "wide", env, steps=steps, configs=configs)
            lines.append(
                f"| {configs} | {label} | {ms['forward']:.3g} | {ms['grad'] / ms['forward']:.1f}× | "
                f"{ms['grad_checkpoint'] / ms['forward']:.1f}× | {ms['jacfwd'] / ms['forward']:.1f}× |"
            )
    return lines


def report(quick: bool, rounds: int, out_dir) -> str:
    """Per-call seconds of forward and grad, each (case, side) a fresh process per round; then forward,
    grad and jacfwd of pgrpo-sim and of the hand-written objective in one process."""
    lines = [
        "## Gradients through a run: cost relative to the forward run",
        "",
        f"d(mean reward over the last quarter)/d(η, μ, β) of a {_grad_cases(quick)[0]['steps']}-step expected-mode run "
        "(default bandit, float32, one XLA CPU device, compiled ahead of time); milliseconds per call, "
        f"median of {rounds} fresh processes (each: one untimed warm-up call, then `reps` calls timed); gradients "
        "checked against "
        "central finite differences first (`--check`). grad: `jax.grad` with the full tape; checkpointed: "
        "`simulate(checkpoint=True)`, blocks of about √steps steps recomputed on the backward pass.",
        "",
        "| Case | forward ms | grad ms | grad / forward | checkpointed grad ms | checkpointed / forward | "
        "compile s (fwd / grad / ckpt) | peak RSS MiB (fwd / grad / ckpt) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    fresh = {}
    for case in _grad_cases(quick):
        r = harness.time_sides(__file__, case, SIDES, rounds)
        ms = fresh[case["label"]] = {side: 1e3 * r[side]["seconds"] / case["reps"] for side in SIDES}
        lines.append(
            f"| {case['label']} | {ms['forward']:.3g} | {ms['grad']:.3g} | {ms['grad'] / ms['forward']:.1f}× | "
            f"{ms['grad_checkpoint']:.3g} | {ms['grad_checkpoint'] / ms['forward']:.1f}× | "
            + " / ".join(f"{r[s]['compile_s']:.1f}" for s in SIDES)
            + " | "
            + " / ".join(f"{r[s]['rss_mib']:.0f}" for s in SIDES)
            + " |"
        )
    lines += [
        "",
        "- One configuration: a forward call is a fraction of a millisecond, much of it the fixed cost of "
        "a call, so its ratios overstate the per-step cost of a gradient; the vmapped case shows the "
        "per-step cost.",
    ]
    cases = _grad_cases(quick)
    fused = harness.run_measure(__file__, "fused", steps=cases[0]["steps"], configs=cases[1]["configs"])
    lines += [
        "",
        "Reverse and forward mode (`jax.jacfwd`, three tangents), for pgrpo-sim's objective and for the "
        "same objective written out by hand (`profile_expected.fused_rewards`: the on-policy update in "
        "jnp, no library code but the pmf; `fused_two_arm_rewards`: the same with each arm's logit and velocity "
        "its own array, no arm axis), all in one process, the sides taking turns (median of 5 rounds; "
        "milliseconds per call):",
        "",
        "| Objective | Case | forward ms | grad / forward | checkpointed grad / forward | jacfwd / forward |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for key, ms in fused.items():
        if isinstance(ms, dict):
            name, case = key.split("|")
            label = "one configuration" if case == "one" else f"vmap over {cases[1]['configs']}"
            ratio = {side: f"{ms[side] / ms['forward']:.1f}×" for side in ms}
            ratio.setdefault("grad_checkpoint", "—")
            lines.append(
                f"| {name} | {label} | {ms['forward']:.3g} | {ratio['grad']} | {ratio['grad_checkpoint']} | "
                f"{ratio['jacfwd']} |"
            )
    lines += ["", _verdict(fresh[cases[1]["label"]], fused["pgrpo-sim|vmap"], cases[1]["configs"])]
    return "\n".join(lines + _wide_table(cases[0]["steps"]))


if __name__ == "__main__":
    harness.use_all_cores()
    harness.side_main(prepare_side, dict(fused=measure_fused, wide=measure_wide))
