"""Bad input to the Python API: one `PgrpoSimError` (a `ValueError`) naming the parameter, never an
AttributeError or an error from deep inside JAX, and never a silent wrong run (a user review's findings)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps

CONFIG = ps.bandit.config()


def _bad_calls():
    """(label, call, words the message must hold)."""
    log = ps.from_run(ps.simulate(CONFIG, 5))
    run = ps.calibration.resolve_run_config({})
    return [
        # an object of the wrong type where a config, log, run config or calibration is expected
        ("simulate a dict", lambda: ps.simulate({"learning_rate": 0.1}, 10), "config must be a ps.bandit.Config"),
        ("predict an int", lambda: ps.predict(2), "config must be a ps.bandit.Config"),
        ("rollout_count", lambda: ps.bandit.rollout_count(2, 4), "config must be a ps.bandit.Config"),
        ("outcomes", lambda: ps.outcomes(None, 10), "config must be a ps.bandit.Config"),
        ("make_optimizer", lambda: ps.bandit.make_optimizer({}), "config must be a ps.bandit.Config"),
        (
            "with_hyperparameters",
            lambda: ps.bandit.with_hyperparameters(3, learning_rate=0.1),
            "config must be a ps.bandit.Config",
        ),
        ("set_hyperparameters None", lambda: ps.bandit.set_hyperparameters(CONFIG, None), "values must be a mapping"),
        ("diagnose a path", lambda: ps.diagnose("train.jsonl"), "read_log"),
        ("calibrate a path", lambda: ps.calibrate("train.jsonl", run), "log must be a TrainingLog"),
        ("calibrate a dict run", lambda: ps.calibrate(log, {}), "run must be a RunConfig"),
        ("log_settings", lambda: ps.calibration.log_settings("train.jsonl"), "log must be a TrainingLog"),
        ("from_run", lambda: ps.from_run(log), "run must be a ps.bandit.Run"),
        ("population_model", lambda: ps.calibration.population_model({}, 10), "run must be a RunConfig"),
        ("population_model format", lambda: ps.calibration.population_model(run, 10, log_format="jsnl"), "log_format"),
        ("synthetic_log theta", lambda: ps.calibration.synthetic_log(run, [0.0, 0.0], 10), "theta must hold 4"),
        ("synthetic_log scale", lambda: ps.calibration.synthetic_log(run, np.zeros(4), 10, scale=-1), "scale"),
        ("predictive_band", lambda: ps.calibration.predictive_band(None), "calibration must be a Calibration"),
        ("forecast", lambda: ps.forecast(log, None), "calibration must be a Calibration"),
        ("what_if", lambda: ps.what_if({}, [], until=10), "calibration must be a Calibration"),
        ("read_log None", lambda: ps.read_log(None), "path must be a file path"),
        ("read_log columns list", lambda: ps.read_log("x.csv", columns=["reward=r"]), "columns must map"),
        ("read_log unknown column", lambda: ps.read_log("x.csv", columns={"rewrd": "r"}), "unknown metric 'rewrd'"),
        (
            "resolve_run_config key",
            lambda: ps.calibration.resolve_run_config({"lr": 1e-6}),
            "unknown run-config key 'lr'",
        ),
        ("resolve_run_config path", lambda: ps.calibration.resolve_run_config("run.yaml"), "given must be a mapping"),
        # a key that is neither a PRNG key nor a seed
        ("simulate key text", lambda: ps.simulate(CONFIG, 5, mode="sampled", key="abc"), "key must be"),
        ("simulate key -1", lambda: ps.simulate(CONFIG, 5, mode="sampled", key=-1), "seed"),
        # None, text, arrays and fractions where one number is expected: refused, not trained on
        (
            "learning_rate None",
            lambda: ps.bandit.config(learning_rate=None),
            "learning_rate must be a number, got None",
        ),
        ("beta None", lambda: ps.bandit.config(beta=None), "beta must be a number"),
        ("clip None", lambda: ps.bandit.config(epsilon=None), "epsilon must be a number"),
        ("lag None", lambda: ps.bandit.config(lag=None), "lag must be a number"),
        ("num_generations None", lambda: ps.bandit.config(num_generations=None), "num_generations must be a number"),
        ("advantage None", lambda: ps.bandit.config(advantage=None), "advantage must be one of"),
        ("learning_rate text", lambda: ps.bandit.config(learning_rate="0.1"), "learning_rate must be a number"),
        (
            "learning_rate a list",
            lambda: ps.bandit.config(learning_rate=[0.1, 0.2]),
            "learning_rate must be a single number",
        ),
        ("replace learning_rate None", lambda: CONFIG.replace(learning_rate=None), "learning_rate must be a number"),
        (
            "with_hyperparameters None",
            lambda: ps.bandit.with_hyperparameters(CONFIG, num_generations=None),
            "num_generations",
        ),
        ("warmup_steps 5.5", lambda: ps.bandit.config(warmup_steps=5.5), "warmup_steps must be an integer"),
        ("max_lag 2.5", lambda: ps.bandit.config(lag_model="stale", lag=2, max_lag=2.5), "max_lag must be an integer"),
        ("dynamic_sampling text", lambda: ps.bandit.config(dynamic_sampling="no"), "dynamic_sampling must be True"),
        (
            "difficulty one number",
            lambda: ps.bandit.config(n_prompts=4, difficulty=(1.0,)),
            "difficulty must be a pair",
        ),
        ("eps -1", lambda: ps.bandit.group_advantages([1.0, 0.0], eps=-1), "eps must be >= 0"),
        # sweeps, phase predictions, search and forecasts
        (
            "sweep base key",
            lambda: ps.analysis.check_sweep(
                {"betaa": 0.1}, [ps.analysis.parse_axis("learning_rate=0.1,0.2")], steps=10
            ),
            "'betaa'",
        ),
        (
            "sweep bare axis",
            lambda: ps.analysis.check_sweep({}, ps.analysis.parse_axis("learning_rate=0.1,0.2"), steps=10),
            "list of Axis",
        ),
        ("sweep axis text", lambda: ps.analysis.check_sweep({}, ["learning_rate=0.1,0.2"], steps=10), "list of Axis"),
        ("load_sweep missing", lambda: ps.analysis.load_sweep("/nonexistent"), "no finished sweep"),
        (
            "predict_cells base key",
            lambda: ps.analysis.predict_cells({"betaa": 0.1}, {"learning_rate": [0.1]}),
            "'betaa'",
        ),
        ("predict_cells no axis", lambda: ps.analysis.predict_cells({"beta": 0.1}, {}), "coords must map"),
        (
            "predict_cells axis",
            lambda: ps.analysis.predict_cells({"beta": 0.1}, {"etaa": [0.1]}),
            "unknown hyperparameter",
        ),
        (
            "search bounds",
            lambda: ps.search("damping-ratio", ps.bandit.config(beta=0.1), target=1.0, bounds={"learning_rate": 0.1}),
            "must be a pair",
        ),
        (
            "boundary beyond mu 1",
            lambda: ps.analysis.trace_boundary(
                "damping_ratio", dict(lag=2, stiffness=0.3), "learning_rate", (1e-3, 1.0), "momentum", (0, 1.5)
            ),
            "momentum range must be in [0, 1)",
        ),
        ("horizon_limit NaN", lambda: ps.calibration.horizon_limit(np.nan, 5.0), "first_step"),
        # the log laws' helpers
        (
            "fit_start beyond",
            lambda: ps.logs.identify_stiffness(np.linspace(0.2, 0.8, 50), learning_rate=0.1, fit_start=1000),
            "fit_start",
        ),
        (
            "lag -1",
            lambda: ps.logs.identify_stiffness(np.linspace(0.2, 0.8, 50), learning_rate=0.1, lag=-1),
            "lag must be >= 0",
        ),
        ("empty curve", lambda: ps.logs.identify_stiffness([], learning_rate=0.1), "rewards must be a curve"),
        ("law params", lambda: ps.logs.law_curve("saturation", np.arange(5.0), [0.9]), "saturation are 3 numbers"),
        ("omega_n -1", lambda: ps.logs.oscillator_stiffness(-1.0, 0.1), "omega_n"),
        ("zeta -1", lambda: ps.logs.oscillator_curve(np.arange(5.0), 0.5, -1.0, 0.1, 0.0, 0.0), "zeta"),
        ("r_squared shapes", lambda: ps.logs.r_squared([1.0, 2.0, 3.0], [1.0, 2.0]), "equal shapes"),
        ("reward_stderr window", lambda: ps.logs.reward_stderr(np.ones(5), 8, window=0), "window"),
        ("saturation r_inf", lambda: ps.theory.saturation_law(np.arange(3.0), np.nan, 1.0), "r_inf"),
        ("regime tol", lambda: ps.regime(0.1, 0.0, 0.0, 1.0, tol=-1), "tol"),
        ("ts decreasing", lambda: ps.solve_deterministic([2.0, 1.0], 0.1, 0.0, 0.1, 0.0, 1.0, 0.2), "non-decreasing"),
        ("euler tolerance", lambda: ps.theory.euler_step_limit(0.1, 0.0, 1.0, 0.2, 100.0, tolerance=-1), "tolerance"),
        (
            "predict no correct arm",
            lambda: ps.predict(ps.bandit.config(rewards=[0.0, 0.0, 0.0])),
            "correct and incorrect",
        ),
        (
            "eta_scale all correct",
            lambda: ps.bandit.eta_scale(ps.bandit.config(rewards=[1.0, 1.0])),
            "got 2 correct of 2",
        ),
        ("continuous_lag model", lambda: ps.bandit.continuous_lag(2.0, "sometimes"), "lag_model must be one of"),
        # settings the theory does not describe
        (
            "predict a schedule",
            lambda: ps.predict(ps.bandit.config(beta=0.1, lr_scheduler_type="cosine", decay_steps=100)),
            "constant learning rate",
        ),
        ("rtol", lambda: ps.solve_deterministic(np.arange(3.0), 0.1, 0.0, 0.1, 0.0, 1.0, 0.2, rtol=-1), "rtol"),
        ("e0 NaN", lambda: ps.solve_deterministic(np.arange(3.0), np.nan, 0.0, 0.1, 0.0, 1.0, 0.2), "e0"),
        # shapes that do not broadcast (a JAX or NumPy broadcasting error before)
        (
            "trajectory shapes",
            lambda: ps.trajectory(np.arange(5.0), 0.1, 0.0, 0.1, [0.1, 0.2, 0.3], 0.0, 0.3),
            "momentum (3,)",
        ),
        ("damping_ratio shapes", lambda: ps.damping_ratio([0.1, 0.2], [0.1, 0.2, 0.3], 0.0, 0.3), "broadcast"),
        (
            "companion shapes",
            lambda: ps.theory.companion_matrix([0.1, 0.2], [0.1, 0.2, 0.3], 2, 0.3),
            "learning_rate (2,)",
        ),
        ("kl shapes", lambda: ps.bandit.kl_divergence(np.zeros((2, 3)), np.zeros(4)), "logits_ref (4,)"),
        ("stderr shape", lambda: ps.summarize_curve(np.linspace(0, 1, 50), stderr=np.ones(3)), "stderr"),
        ("diverged text", lambda: ps.summarize_curve(np.linspace(0, 1, 50), diverged="no"), "diverged"),
        ("diverged 2", lambda: ps.summarize_curve(np.linspace(0, 1, 50), diverged=2), "True or False"),
    ]


@pytest.mark.parametrize("label, call, words", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_bad_input_is_one_pgrpo_sim_error_naming_it(label, call, words):
    with pytest.raises(ps.PgrpoSimError, match=None) as info:
        call()
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.slow
def test_convenient_forms_mean_what_they_say():
    """An int key is a seed, one name is a one-name list (search's one name: tests/analysis/test_search.py), a
    whole float is an integer, lists are arrays."""
    sampled = dict(mode="sampled", seeds=2)
    np.testing.assert_array_equal(
        ps.simulate(CONFIG, 6, key=3, **sampled).reward, ps.simulate(CONFIG, 6, key=jax.random.key(3), **sampled).reward
    )
    assert ps.simulate(CONFIG, 6, readouts="reward").group_reward_std is None
    np.testing.assert_array_equal(
        ps.simulate(CONFIG, 6, key=np.array(3), **sampled).reward, ps.simulate(CONFIG, 6, key=3, **sampled).reward
    )
    assert ps.logs.parse_column_map("reward=r") == {"reward": "r"}
    assert ps.bandit.config(dynamic_sampling=0).dynamic_sampling is False
    run = ps.calibration.resolve_run_config({"learning_rate": 1e-6})
    assert ps.calibration.resolve_run_config(run.as_dict()) == run  # a RunConfig's dict (with its sources) reads back
    assert (
        ps.bandit.config(num_generations=8.0).num_generations == 8
        and type(ps.bandit.config(num_generations=8.0).num_generations) is int
    )
    assert float(ps.bandit.clipped_surrogate([0.0], [0.0], [1.0]).loss[0]) == -1.0  # −min(ρA, clip(ρ)A) at ρ = 1, A = 1
    assert float(ps.bandit.kl_estimate([-1.0], [-1.0])[0]) == 0.0


@pytest.mark.slow
def test_adv_eps_zero_gives_zero_advantage_to_an_all_equal_group():
    """eps = 0 (no ε in the std normalisation): an all-equal group's advantages are 0, as documented, not 0/0; the
    expected run is the limit eps → 0 (eps = 1e-30 moves a non-degenerate group's advantages by ~1e-30 relative,
    far below float64 rounding over 30 steps: 1e-12), and a sampled run does not diverge at its first such group."""
    with jax.enable_x64(True):
        assert np.array_equal(ps.bandit.group_advantages(jnp.ones(3), eps=0.0), np.zeros(3))
        assert np.all(np.isnan(ps.bandit.group_advantages(jnp.asarray([0.0, np.nan, 1.0]), eps=0.0)))  # NaN not hidden
        base = dict(p_ref=0.2, beta=0.1, num_generations=4, learning_rate=0.5)
        exact = ps.simulate(ps.bandit.config(**base, adv_eps=0.0), 30)
        limit = ps.simulate(ps.bandit.config(**base, adv_eps=1e-30), 30)
        assert not bool(exact.diverged)
        np.testing.assert_allclose(exact.reward, limit.reward, rtol=1e-12)
        sampled = ps.simulate(ps.bandit.config(**base, adv_eps=0.0), 30, mode="sampled", seeds=4)
        assert not np.any(sampled.diverged) and np.all(np.isfinite(sampled.reward))


@pytest.mark.slow
def test_traced_hyperparameters_out_of_range_make_the_run_diverge():
    """Under a caller's vmap the eager checks cannot see the values: a run with η < 0, μ ≥ 1 or a stale lag beyond
    the buffer (`max_lag` 2, which would wrap around it) is NaN from its first update, reported as diverged at
    step 0; the valid runs of the same batch are those of `simulate`."""
    config = ps.bandit.config(learning_rate=0.3, lag_model="stale", lag=2)

    def late(learning_rate, momentum, lag):
        return ps.bandit.run(
            config.replace(learning_rate=learning_rate, momentum=momentum, lag=lag), jax.random.key(0), 12, "expected"
        )

    runs = jax.jit(jax.vmap(late))(
        jnp.asarray([0.3, -0.3, 0.3, 0.3]), jnp.asarray([0.0, 0.0, 1.2, 0.0]), jnp.asarray([2, 2, 2, 5])
    )
    assert runs.diverged.tolist() == [False, True, True, True]
    assert runs.diverged_step.tolist() == [-1, 0, 0, 0]
    assert np.all(np.isnan(runs.reward[1:, 1:]))
    np.testing.assert_allclose(runs.reward[0], ps.simulate(config, 12).reward, rtol=1e-6)
    unchecked = eqx.tree_at(lambda c: c.momentum, config, jnp.float32(1.2))  # built around the eager checks
    built = jax.jit(ps.bandit.run, static_argnums=(2, 3))(unchecked, jax.random.key(0), 12, "expected")
    assert bool(built.diverged) and int(built.diverged_step) == 0


def test_traced_step_counts_and_codes_out_of_range_make_the_run_diverge():
    """The integer leaves too: a reference sync every 0 steps (n % 0), an advantage code past `ADVANTAGES`, a negative
    warm-up or a decay before the warm-up ends ran to their end with numbers; they are marked invalid as
    `bandit.config` would refuse them, and a run from them is diverged at step 0."""
    config = ps.bandit.config(beta=0.1, ref_sync_steps=4, lr_scheduler_type="linear", warmup_steps=2, decay_steps=20)
    assert bool(ps.bandit.valid_hyperparameters(config))
    for name, value in [
        ("ref_sync_steps", 0),
        ("advantage", len(ps.bandit.ADVANTAGES)),
        ("warmup_steps", -1),
        ("decay_steps", 0),
        ("warmup_steps", 21),
    ]:
        unchecked = eqx.tree_at(lambda c, name=name: getattr(c, name), config, jnp.int32(value))
        assert not bool(ps.bandit.valid_hyperparameters(unchecked)), name
        run = jax.jit(ps.bandit.run, static_argnums=(2, 3))(unchecked, jax.random.key(0), 6, "expected")
        assert bool(run.diverged) and int(run.diverged_step) == 0, name


def test_shape_checks_read_lists_of_tracers():
    """The shape checks do not read values: a list holding a tracer (here under jit) is checked by its shape and
    computed as eagerly."""
    kl = jax.jit(lambda e: ps.bandit.kl_divergence([e, 0.0], [0.0, 0.0]))(0.1)
    np.testing.assert_allclose(kl, ps.bandit.kl_divergence([0.1, 0.0], [0.0, 0.0]), rtol=1e-6)
    zeta = jax.jit(lambda e: ps.damping_ratio([e, e], 0.5, 0.0, 0.3))(0.1)
    np.testing.assert_allclose(zeta, ps.damping_ratio([0.1, 0.1], 0.5, 0.0, 0.3), rtol=1e-6)


def test_eager_checks_and_the_in_jit_mask_refuse_the_same_values():
    """Each real-valued leaf's range (`LEAF_RANGES`), at its ends and just beyond them: `bandit.config` refuses a
    value, naming the leaf, exactly when `valid_hyperparameters` masks it (a config built around the eager
    checks with `eqx.tree_at`)."""
    base = ps.bandit.config(dual_clip=3.0, kl="k3", kl_clamp=10.0, max_grad_norm=1.0)
    for name, interval in ps.bandit.LEAF_RANGES.items():
        ends = [x for x in (interval.low, interval.high) if x is not None]
        for value in [x + d for x in ends for d in (-1e-3, 0.0, 1e-3)] + [np.inf, np.nan]:
            try:
                base.replace(**{name: value})
                refused = False
            except ps.PgrpoSimError as error:
                assert name in str(error)
                refused = True
            unchecked = eqx.tree_at(lambda c, name=name: getattr(c, name), base, jnp.float32(value))
            assert bool(ps.bandit.valid_hyperparameters(unchecked)) is not refused, (name, value)
            assert bool(interval.holds(value)) is not refused


@pytest.mark.slow  # the reuse Floquet map compiles for ~30 s on 2 cores
def test_predict_checks_the_reduction_it_predicts():
    """A population of 4 prompts with rollout reuse reduces to one 2-arm prompt (mean field), which expected mode
    enumerates: predicted, no longer refused for its N-prompt form; the lag does not move p* (the on-policy drive's
    fixed point), so p* is the on-policy population's."""
    reuse = ps.predict(ps.bandit.config(beta=0.1, n_prompts=4, lag_model="refresh", lag=2))
    on_policy = ps.predict(ps.bandit.config(beta=0.1, n_prompts=4))
    assert float(reuse.p_star) == pytest.approx(float(on_policy.p_star), rel=1e-6)
