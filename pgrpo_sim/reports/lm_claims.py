"""Validation section 11: does the language-model level (`models.lm`) break where LLM GRPO runs break?

Real runs (shared/anchors, Qwen2.5-Math-1.5B on MATH) collapse when the learning rate is a few times too high
(1e-4 against the best 3e-5: a ratio of 3.3), when a rollout is reused for 16 optimiser steps, and when the clip is
dropped with 2 epochs per rollout. The level's own runs, `seeds` per setting from the same SFT start, are asked
the same questions. A run's verdict is `analysis.lm_sweep`'s (the what-if rule on the trailing running mean of its
reward; a collapse on its chance-corrected reward, `analysis.lm_sweep.knowledge`): it *collapses* when that ends
below half the best it had (start or peak) by more than 3 standard errors; a setting collapses when at least half
its seeds do, and its collapse share is given with its binomial standard error. Final rewards are compared with
`VERDICT_Z` standard errors over seeds.

The claims ask in three rounds, each of settings that do not depend on one another: the learning rates; at the best
of them, reuse and the clip pairs; the K_ref check at the first collapsing reuse. A round's settings are handed to a
`Deal`, which may run them in other processes (`pgrpo-sim validate` deals them over its workers): each setting's runs
are one program with its own fixed key, so the numbers do not depend on where they ran.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import lm_sweep
from ..runtime.sweep_store import PointFolder
from .claims import VERDICT_Z, verdict


@dataclasses.dataclass(frozen=True)
class LMResolution:
    """How much of the level each claim runs: GRPO steps, seeds per setting, the learning rates (a grid over two
    decades), the optimiser steps per rollout as (num_iterations, steps_per_generation), and the epochs of the clip
    comparison; `settings`: the task, model and batch (`lm.config`'s; default its own: 32 prompts × G 8, ≤ 16 tokens,
    width 64, 2 layers)."""

    steps: int = 80
    seeds: int = 6
    learning_rates: tuple = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
    reuse: tuple = ((1, 1), (2, 1), (4, 1), (4, 2), (4, 4))
    clip_epochs: tuple = (2, 4)
    settings: dict = dataclasses.field(default_factory=dict)


QUICK = LMResolution(steps=40, seeds=4, settings=dict(prompts_per_step=16))
FULL = LMResolution()


def summarize_setting(rows: list[dict], **point) -> dict:
    """The seeds of one grid point: their final rewards' mean and standard error, collapse share and its s.e."""
    runs = [r for r in rows if all(r[k] == v for k, v in point.items())]
    final = np.array([r["final_reward"] for r in runs], float)
    collapsed = np.array([r["verdict"] in ("collapses", "diverges") for r in runs])
    n = len(runs)
    share = float(collapsed.mean())
    return dict(
        **point,
        seeds=n,
        final=float(np.nanmean(final)) if np.isfinite(final).any() else math.nan,
        final_se=float(np.nanstd(final, ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
        peak=float(np.nanmean([r["peak_reward"] for r in runs])),
        length=float(np.nanmean([r["final_mean_length"] for r in runs])),
        entropy=float(np.nanmean([r["final_entropy"] for r in runs])),
        collapse_share=share,
        collapse_se=math.sqrt(share * (1 - share) / n),
        collapses=share >= 0.5,
    )


Deal = Callable[[Callable, Sequence[tuple]], list[Callable[[], Any]]]
"""How the claims run a round of settings: called with a module-level function and the argument tuples of its
calls, it starts them (here or in other processes) and returns a getter of each call's result, in order."""


def run_here(function: Callable, calls: Sequence[tuple]) -> list[Callable[[], Any]]:
    """The `Deal` that runs each call in this process, once, when its result is first got."""
    return [functools.cache(functools.partial(function, *args)) for args in calls]


def run_setting(base: dict, point: dict, common: dict) -> tuple[list[dict], np.ndarray]:
    """The `seeds` runs of `point` (settings over `base`) by `lm_sweep.sweep_rows` (`common`: its keyword arguments):
    their rows and their reward curves float32[seeds, steps]."""
    (key, value), *rest = point.items()
    rows, curves = lm_sweep.sweep_rows({**base, **dict(rest)}, {key: [value]}, **common)
    return rows, curves["reward"][0]


def _start(settings: list[tuple[dict, dict]], common: dict, deal: Deal) -> list[Callable[[], tuple]]:
    """Start the runs of each (base, point) of a round by `deal`, a setting asked twice in it (two ways of writing
    one configuration) run once: a getter of each one's `run_setting` result, its rows tagged with all of the point's
    keys."""
    keys = [json.dumps(lm_sweep.every_setting(base, point), sort_keys=True) for base, point in settings]
    unique = list(dict.fromkeys(keys))
    getters = deal(run_setting, [(*settings[keys.index(key)], common) for key in unique])

    def got(i: int) -> tuple[list[dict], np.ndarray]:
        rows, reward = getters[unique.index(keys[i])]()
        return [{**settings[i][1], **row} for row in rows], reward

    return [functools.partial(got, i) for i in range(len(settings))]


def significantly_worse(a: dict, b: dict) -> bool:
    """Whether setting `a`'s final reward is below `b`'s by more than VERDICT_Z standard errors."""
    se = math.hypot(a["final_se"], b["final_se"])
    return bool(b["final"] - a["final"] > VERDICT_Z * se)


def _row(s: dict, label: str) -> list:
    return [
        label,
        f"{s['final']:.3f} ± {s['final_se']:.3f}",
        f"{s['peak']:.3f}",
        f"{s['length']:.1f}",
        f"{s['entropy']:.3f}",
        f"{s['collapse_share']:.2f} ± {s['collapse_se']:.2f}",
    ]


HEADER = ["setting", "final reward (mean ± s.e.)", "peak", "mean length", "entropy", "collapse share (± s.e.)"]


def lm_collapse(res: LMResolution, seed: int, plot: Callable | None, deal: Deal = run_here) -> dict:
    """Claim: the language-model level fails where LLM runs fail. (a) Over two decades of learning rate the final reward
    rises, peaks and the largest rates collapse; (b) at the best rate (`best_rate`: the fastest of those tied with the
    top) with clip 0.2, 1 optimiser step per rollout learns and 16 collapse; (c) without the clip, reuse collapses where
    the clipped run does not; (d) near the edge some seeds collapse and others not. Holds when (a), (b) and (c) hold;
    (d) is reported. `deal`: how each round of settings is run (`Deal`)."""
    chunks = Path(tempfile.mkdtemp(prefix="pgrpo-sim-lm-claims-"))  # a setting asked in two rounds runs once
    try:
        points = PointFolder(chunks)
        return _lm_collapse(res, plot, dict(seeds=res.seeds, steps=res.steps, seed=seed, store=points), deal)
    finally:
        shutil.rmtree(chunks, ignore_errors=True)


def best_rate(rates: list[dict]) -> dict:
    """The best learning rate of a sweep's summaries (in increasing rate): the largest rate whose final reward is not
    significantly below the highest one (`significantly_worse`), as a practitioner takes the fastest of the rates
    that learn best. Rates tied within their noise would otherwise be picked by it, and the claims run at the best
    rate (reuse, clip) ask a different question at each (docs/guide/validation.md)."""
    top = max(rates, key=lambda s: s["final"] if math.isfinite(s["final"]) else -math.inf)
    return [s for s in rates if math.isfinite(s["final"]) and not significantly_worse(s, top)][-1]


def _rate_claim(res: LMResolution, common: dict, deal: Deal) -> dict:
    """(a) a learning rate a few times the best collapses: the rates' summaries, the best, the lowest collapsing rate
    and its ratio to the best, whether the claim holds (the best is interior, the highest rate collapses and the
    lowest is significantly worse than the best), and the reward curves float32[rates, seeds, steps]."""
    settings = [(res.settings, dict(learning_rate=lr)) for lr in res.learning_rates]
    runs = [got() for got in _start(settings, common, deal)]
    rows = [row for found, _ in runs for row in found]
    rates = [summarize_setting(rows, learning_rate=lr) for lr in res.learning_rates]
    best = best_rate(rates)
    lowest = min((s["learning_rate"] for s in rates if s["collapses"]), default=None)
    interior = rates[0] is not best and rates[-1] is not best
    holds = bool(interior and rates[-1]["collapses"] and significantly_worse(rates[0], best))
    ratio = lowest / best["learning_rate"] if lowest else None
    return dict(rates=rates, best=best, lowest=lowest, ratio=ratio, holds=holds, reward=np.stack([r for _, r in runs]))


def _reuse_settings(res: LMResolution, best: dict) -> list[tuple[dict, dict]]:
    """(b)'s settings as (base, point): the steps per rollout at the best rate with clip 0.2."""
    base = dict(res.settings, learning_rate=best["learning_rate"], epsilon=0.2)
    return [(base, dict(num_iterations=e, steps_per_generation=m)) for e, m in res.reuse]


def _reuse_claim(res: LMResolution, rows: list[dict]) -> dict:
    """(b) reusing a rollout for more optimiser steps degrades and then collapses a run at the best rate: from the
    rows of `_reuse_settings`, the settings' summaries, the first steps per rollout that degrade and that collapse,
    whether the claim holds."""
    reuse = [summarize_setting(rows, num_iterations=e, steps_per_generation=m) for e, m in res.reuse]
    first = reuse[0]
    degrades = next((e * m for (e, m), s in zip(res.reuse, reuse, strict=True) if significantly_worse(s, first)), None)
    collapse_at = next((e * m for (e, m), s in zip(res.reuse, reuse, strict=True) if s["collapses"]), None)
    holds = bool(not first["collapses"] and reuse[-1]["collapses"])
    return dict(reuse=reuse, degrades=degrades, collapse_at=collapse_at, holds=holds)


def _clip_settings(res: LMResolution, best: dict) -> list[tuple[dict, dict]]:
    """(c)'s settings as (base, point): each number of epochs with ε = 0.2 and without the clip, at the best rate."""
    base = dict(res.settings, learning_rate=best["learning_rate"])
    return [(base, dict(num_iterations=e, epsilon=eps)) for e in res.clip_epochs for eps in (0.2, None)]


def _clip_claim(res: LMResolution, rows: list[dict]) -> tuple[dict, bool]:
    """(c) without the clip a reused rollout collapses where it does not with ε = 0.2: from the rows of
    `_clip_settings`, (epochs, ε) → summary, and whether the claim holds at some number of epochs."""
    clip = {
        (e, eps): summarize_setting(rows, num_iterations=e, epsilon=eps) for e in res.clip_epochs for eps in (0.2, None)
    }
    return clip, any(clip[e, None]["collapses"] and not clip[e, 0.2]["collapses"] for e in res.clip_epochs)


def _lm_collapse(res: LMResolution, plot: Callable | None, common: dict, deal: Deal) -> dict:
    rate = _rate_claim(res, common, deal)
    rates, best, ratio, lowest_collapse, a_holds = (
        rate["rates"],
        rate["best"],
        rate["ratio"],
        rate["lowest"],
        rate["holds"],
    )
    reuse_at, clip_at = _reuse_settings(res, best), _clip_settings(res, best)
    found = [got()[0] for got in _start(reuse_at + clip_at, common, deal)]  # (b) and (c): one round
    reused = _reuse_claim(res, [row for rows in found[: len(reuse_at)] for row in rows])
    reuse, degrades, collapse_at, b_holds = reused["reuse"], reused["degrades"], reused["collapse_at"], reused["holds"]
    clip, c_holds = _clip_claim(res, [row for rows in found[len(reuse_at) :] for row in rows])
    oscillator = oscillator_claims(res, rates, rate["reward"], reuse, common, deal)

    settings = [*rates, *reuse, *clip.values(), *oscillator["reuse_slower"]]
    edge = [s for s in settings if 0 < s["collapse_share"] < 1]
    holds = a_holds and b_holds and c_holds
    ratio_text = f"{ratio:g}" if ratio else "none (no rate collapses)"
    text = (
        f"({res.seeds} seeds × {res.steps} GRPO steps per setting) "
        f"(a) {'holds' if a_holds else 'fails'}: best learning rate {best['learning_rate']:g} (final reward "
        f"{best['final']:.3f}), lowest collapsing rate / best = {ratio_text} (the real sweep: 3.3); "
        f"(b) {'holds' if b_holds else 'fails'}: steps per rollout degrade from "
        f"{degrades or 'none'} and collapse from {collapse_at or 'none'} (the real sweep: 16 collapses); "
        f"(c) {'holds' if c_holds else 'fails'}: no clip vs clip 0.2, collapse share at "
        + ", ".join(
            f"{e} epochs {clip[e, None]['collapse_share']:.2f} vs {clip[e, 0.2]['collapse_share']:.2f}"
            for e in res.clip_epochs
        )
        + f"; (d) {len(edge)} of {len(settings)} settings split their seeds"
        + (
            " (" + "; ".join(f"{_label(s)}: {s['collapse_share']:.2f} ± {s['collapse_se']:.2f}" for s in edge) + ")"
            if edge
            else ""
        )
        + f"; (e) {oscillator['text']}"
    )
    table = [HEADER]
    table += [_row(s, f"learning_rate={s['learning_rate']:g}") for s in rates]
    table += [
        _row(s, f"lr {best['learning_rate']:g}, {e}×{m} = {e * m} steps/rollout")
        for (e, m), s in zip(res.reuse, reuse, strict=True)
    ]
    table += [
        _row(s, f"lr {best['learning_rate']:g}, {e} epochs, " + ("no clip" if eps is None else f"clip {eps}"))
        for (e, eps), s in clip.items()
    ]
    figure = None
    if plot:
        figure = plot("lm_collapse", [s["learning_rate"] for s in rates], [s["final"] for s in rates],
                      [s["final_se"] for s in rates], [e * m for e, m in res.reuse], [s["final"] for s in reuse],
                      [s["final_se"] for s in reuse])  # fmt: skip
    none_collapse = "no learning rate collapsed in at least half its seeds"
    out: dict = dict(
        z=VERDICT_Z,
        learning_rates=[_reported(s) for s in rates],
        best_learning_rate=best["learning_rate"],
        lowest_collapsing_learning_rate=lowest_collapse,
        collapse_ratio=ratio,
        reuse=[_reported(s) for s in reuse],
        reuse_degrades_at=degrades,
        reuse_collapses_at=collapse_at,
        clip=[_reported(dict(s, epsilon="none" if eps is None else eps)) for (_, eps), s in clip.items()],
        edge=[_label(s) for s in edge],
        claims=dict(learning_rate=a_holds, reuse=b_holds, clip=c_holds),
        oscillator={k: v for k, v in oscillator.items() if k != "reuse_slower"}
        | dict(reuse_slower=[_reported(s) for s in oscillator["reuse_slower"]]),
        verdict=verdict(holds, text),
        table=table,
    )
    reasons = dict(
        lowest_collapsing_learning_rate=none_collapse,
        collapse_ratio=none_collapse,
        reuse_degrades_at=f"no number of steps per rollout ended {VERDICT_Z:g} s.e. below one step per rollout",
        reuse_collapses_at="no number of steps per rollout collapsed in at least half its seeds",
    )
    out.update({f"{k}_missing_reason": why for k, why in reasons.items() if out[k] is None})
    if figure:
        out["figure"] = figure
    return out


ZETA_Z = 2.0
"""ζ at the slowest learning rate exceeds ζ at the fastest by more than ZETA_Z combined standard errors."""
SLOWER = 4.0
"""The K_ref check reruns the collapsing reuse at the best learning rate / SLOWER."""
MIN_FIT_STEPS = 20
"""Fewest GRPO steps for the oscillator fits (five parameters)."""


def oscillator_claims(
    res: LMResolution, rates: list[dict], reward: np.ndarray, reuse: list[dict], common: dict, deal: Deal = run_here
) -> dict:
    """(e) The oscillator's claims on this level, as far as its runs can test them:
    - ζ from a fit: the damped-oscillator law fitted to each non-collapsing rate's seed-mean reward (weights: the
      seeds' standard error per step), its regime read as `fit` reads a log's; the oscillator has ζ ∝ 1/√(Kη), so
      ζ should fall as the rate rises: holds when ζ at the slowest such rate exceeds ζ at the fastest by `ZETA_Z`
      combined standard errors;
    - the K_ref threshold: reuse is stable while K·η·K_ref < 1 − μ, so the steps per rollout that collapse at the
      best rate should not at a `SLOWER` times smaller one: holds when that setting's collapse share falls below ½;
    - not tested here (no runs for them): the fixed point under β (needs a β sweep) and the 1/G scaling of the
      stationary fluctuations (needs a G sweep and many more seeds than a collapse share does).
    The K_ref setting is started (`deal`) before the fits, which run here meanwhile."""
    from ..logs.law_regimes import read_regime, simpler_bics
    from ..logs.laws import fit_laws

    collapsing = next(((e, m) for (e, m), s in zip(res.reuse, reuse, strict=True) if s["collapses"]), None)
    slower_at = []
    if collapsing is not None:
        rate = best_rate(rates)["learning_rate"] / SLOWER
        point = dict(learning_rate=rate, num_iterations=collapsing[0], steps_per_generation=collapsing[1])
        slower_at = _start([(dict(res.settings, epsilon=0.2), point)], common, deal)
    fits = []
    for s, curves in zip(rates, reward, strict=True):
        if s["collapses"] or res.steps < MIN_FIT_STEPS:
            continue
        curves = np.asarray(curves, float)
        mean = np.nanmean(curves, axis=0)
        sigma = np.maximum(np.nanstd(curves, axis=0, ddof=1) / math.sqrt(curves.shape[0]), 1e-3)
        steps = np.arange(mean.size, dtype=float)
        laws = fit_laws(steps, mean, sigma=sigma)
        oscillator = laws["oscillator"]
        regime = read_regime(oscillator, steps=steps, simpler_bic=simpler_bics(laws, steps, mean, sigma=sigma))
        zeta_se = float(oscillator.stderr[oscillator.names.index("zeta")]) if oscillator.stderr is not None else None
        zeta, zeta_se = oscillator["zeta"], zeta_se if zeta_se is not None and math.isfinite(zeta_se) else None
        fit = dict(learning_rate=s["learning_rate"], zeta=zeta, zeta_se=zeta_se, regime=regime.regime)
        if zeta_se is None:
            fit["zeta_se_missing_reason"] = "the fit gave no finite standard error"
        fits.append(fit)
    usable = [f for f in fits if f["zeta_se"] is not None and math.isfinite(f["zeta_se"])]
    zeta_holds = None
    if len(usable) >= 2:
        slow, fast = usable[0], usable[-1]
        zeta_holds = bool(slow["zeta"] - fast["zeta"] > ZETA_Z * math.hypot(slow["zeta_se"], fast["zeta_se"]))
    slower = [summarize_setting(got()[0], **point) for got in slower_at]
    kref_holds = not slower[0]["collapses"] if slower else None
    zeta_text = ", ".join(
        f"η {f['learning_rate']:g}: ζ {f['zeta']:.2f}" + ("" if f["zeta_se"] is None else f" ± {f['zeta_se']:.2f}")
        + f" ({f['regime']})"
        for f in fits
    )  # fmt: skip
    word = {True: "holds", False: "fails", None: "undetermined"}
    text = (
        f"ζ falls as η rises {word[zeta_holds]} ({zeta_text or 'no rate left to fit'}); K_ref threshold "
        f"{word[kref_holds]}"
        + (
            f" ({collapsing[0] * collapsing[1]} steps/rollout at η/{SLOWER:g}: collapse share "
            f"{slower[0]['collapse_share']:.2f} ± {slower[0]['collapse_se']:.2f})"
            if collapsing is not None
            else " (no reuse collapsed at the best rate)"
        )
        + "; fixed point under β and 1/G fluctuations: not run on this level"
    )
    out = dict(zeta_fits=fits, zeta_falls=zeta_holds, kref=kref_holds, reuse_slower=slower, text=text)
    if zeta_holds is None:
        out["zeta_falls_missing_reason"] = (
            f"fewer than two non-collapsing rates with a ζ and its standard error (fits need {MIN_FIT_STEPS} steps)"
        )
    if kref_holds is None:
        out["kref_missing_reason"] = "no reuse collapsed at the best rate"
    return out


def _reported(setting: dict) -> dict:
    """A setting's summary for results.json: an undefined number (NaN) is None with the reason beside it."""
    reasons = dict(
        final_se="fewer than 2 seeds with a final reward",
        **dict.fromkeys(("final", "peak", "length", "entropy"), "every seed diverged"),
    )
    out = {}
    for key, value in setting.items():
        if isinstance(value, float) and not math.isfinite(value):
            out[key], out[f"{key}_missing_reason"] = None, reasons.get(key, "not defined")
        else:
            out[key] = value
    return out


def _label(s: dict) -> str:
    keys = ("learning_rate", "num_iterations", "steps_per_generation", "epsilon")
    return ", ".join(f"{k}={s[k]}" for k in keys if k in s)
