"""The reduced SDE with diffrax: deterministic solve, stationary variance, convergence order, gradients."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps
from pgrpo_sim.models.oscillator import sde

REGIMES = {"over": (0.05, 0.0, 0.0, 0.3), "under": (0.05, 0.9, 2.0, 0.3), "critical-ish": (0.05, 0.5, 1.0, 0.3)}
TS = jnp.arange(0.0, 201.0)


@pytest.mark.slow
@pytest.mark.parametrize("params", REGIMES.values(), ids=REGIMES.keys())
def test_deterministic_solve_matches_closed_form(params):
    sol = ps.solve_deterministic(TS, 0.3, -0.01, *params)
    ref = ps.trajectory(TS, 0.3, -0.01, *params)
    # Tsit5 at rtol 1e-8: error ~1e-9 of the scale, well inside rtol 1e-4
    np.testing.assert_allclose(sol, ref, rtol=1e-4, atol=1e-4 * 0.3)


@pytest.mark.slow  # moved out of the default suite's 5-minute budget (~10 s on 2 cores)
def test_gradient_through_deterministic_solve_matches_finite_differences():
    def e50(learning_rate, momentum):
        return ps.solve_deterministic(TS[:60], 0.3, 0.0, learning_rate, momentum, 1.0, 0.3)[50]

    g = jax.grad(e50, argnums=(0, 1))(0.05, 0.5)
    h = 1e-6
    fd = [(e50(0.05 + h, 0.5) - e50(0.05 - h, 0.5)) / (2 * h), (e50(0.05, 0.5 + h) - e50(0.05, 0.5 - h)) / (2 * h)]
    # solver tolerance 1e-8 relative divided by h = 1e-6 bounds the FD error at ~1e-2·|e|; rtol 1e-3 on O(1) slopes
    np.testing.assert_allclose(g, fd, rtol=1e-3)


@pytest.mark.slow
def test_ensemble_stationary_variance_and_one_over_g():
    params, noise = REGIMES["critical-ish"], 0.01
    ts = jnp.arange(0.0, 601.0)
    late = slice(200, None, 50)  # ≥ 6 relaxation times in; samples 50 steps (≈ 1.5 relaxation times) apart
    out = {}
    for g in (8, 16):
        ens = ps.solve_ensemble(ts, 0.0, 0.0, *params, noise, g, paths=8000, key=jax.random.key(g), dt=0.25)
        out[g] = float(ens.paths[:, late].var(0).mean())
        target = float(ps.stationary_variance(*params, noise, g))
        # 8000 paths × 9 times: sampling error ≈ 1.6 % (one-time) / √(effective samples); Euler bias at dt=0.25 ≈ 1 %
        assert abs(out[g] / target - 1) < 0.05, (g, out[g] / target)
    assert out[16] / out[8] == pytest.approx(0.5, rel=0.07)


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["euler", "shark"])
def test_ensemble_mean_closed_form_and_independent_paths(solver):
    """All paths in one solve: the mean follows the closed form, and paths do not share noise."""
    params, ts, paths = REGIMES["under"], jnp.arange(0.0, 101.0), 4000
    kw = dict(dt=0.25, solver=solver)
    ens = ps.solve_ensemble(ts, 0.3, 0.0, *params, 0.01, 4, paths=paths, key=jax.random.key(5), **kw)
    quiet = ps.solve_ensemble(ts, 0.3, 0.0, *params, 0.0, 4, paths=1, **kw).paths[0]
    # the noise-free solve is the scheme at the same dt, within Euler's O(dt) error of the closed form
    np.testing.assert_allclose(quiet, ps.trajectory(ts, 0.3, 0.0, *params), atol=0.01)
    # the scheme's mean for a linear SDE with additive noise is exactly its noise-free solution: within 5 s.e.
    assert np.all(np.abs(ens.mean - quiet)[1:] <= 5 * ens.std[1:] / np.sqrt(paths))
    # e(100) (3.6 relaxation times in) of disjoint halves and of neighbouring paths: if independent,
    # the sample correlation of n = 2000 pairs is ≈ N(0, 1/n); 4/√n bounds it (two-sided p ≈ 6e-5)
    x = np.asarray(ens.paths[:, -1])
    limit = 4 / np.sqrt(paths // 2)
    for a, b in ((x[: paths // 2], x[paths // 2 :]), (x[0::2], x[1::2])):
        assert abs(np.corrcoef(a, b)[0, 1]) < limit


def test_block_brownian_path_increments():
    """The "unsafe" Brownian path: W ~ N(0, h) and H ~ N(0, h/12) per path, all independent, keyed by the interval."""
    n, h = 20_000, 0.25
    shape = jax.ShapeDtypeStruct((n,), jnp.float64)
    bm = sde.BlockBrownianPath(shape=shape, levy_area=diffrax.SpaceTimeLevyArea, key=jax.random.key(0))
    a = bm.evaluate(1.0, 1.0 + h, use_levy=True)
    np.testing.assert_array_equal(a.W, bm.evaluate(1.0, 1.0 + h, use_levy=True).W)  # same interval, same draw
    draws = {
        "W": np.asarray(a.W),
        "H": np.asarray(a.H),
        "next W": np.asarray(bm.evaluate(1.0 + h, 1.0 + 2 * h)),
        # end points equal in float32: float64 times are keyed by all their bits
        "nearby W": np.asarray(bm.evaluate(1.0, 1.0 + h + 1e-12)),
    }
    variances = {"W": h, "H": h / 12, "next W": h, "nearby W": h}
    for name, x in draws.items():
        # sample variance within 5 standard errors (σ²·√(2/n)); mean within 5 σ/√n
        assert abs(x.var() / variances[name] - 1) < 5 * np.sqrt(2 / n), name
        assert abs(x.mean()) < 5 * np.sqrt(variances[name] / n), name
    # pairwise independent (and independent across paths): |r| < 4/√n
    names = list(draws)
    for i, p in enumerate(names):
        for q in names[i + 1 :]:
            assert abs(np.corrcoef(draws[p], draws[q])[0, 1]) < 4 / np.sqrt(n), (p, q)
    assert abs(np.corrcoef(draws["W"][:-1], draws["W"][1:])[0, 1]) < 4 / np.sqrt(n)
    # W(t) from 0 when t1 is omitted, as diffrax's paths
    assert abs(np.asarray(bm.evaluate(0.5)).var() / 0.5 - 1) < 5 * np.sqrt(2 / n)


@pytest.mark.slow
def test_ensemble_shapes_and_seeds():
    ens = ps.solve_ensemble(jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=7, key=jax.random.key(0))
    assert ens.paths.shape == (7, 11) and np.all(ens.paths[:, 0] == 0.1)
    again = ps.solve_ensemble(
        jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=7, key=jax.random.key(0)
    )
    np.testing.assert_array_equal(ens.paths, again.paths)
    quiet = ps.solve_ensemble(jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"], 0.0, 4, paths=2, dt=0.05)
    np.testing.assert_allclose(quiet.mean, ps.trajectory(jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"]), atol=1e-3)


def _orders(solver):
    """Strong and weak (f = e²) convergence slopes against a fine solve on the same Brownian trees."""
    params, ts = (0.5, 0.0, 0.0, 1.0), jnp.array([0.0, 2.0])  # M = 1, C = 2, K = 1
    kw = dict(paths=100, key=jax.random.key(3), solver=solver, brownian="tree", tree_tol=2.0**-9)
    ref = ps.solve_ensemble(ts, 0.5, 0.0, *params, 4.0, 2, dt=2.0**-9, **kw).paths[:, -1]
    dts = 2.0 ** -np.arange(2, 6)
    strong, weak = [], []
    for dt in dts:
        x = ps.solve_ensemble(ts, 0.5, 0.0, *params, 4.0, 2, dt=float(dt), **kw).paths[:, -1]
        strong.append(np.sqrt(np.mean((x - ref) ** 2)))
        weak.append(abs(np.mean(x**2 - ref**2)))
    return np.polyfit(np.log(dts), np.log(strong), 1)[0], np.polyfit(np.log(dts), np.log(weak), 1)[0]


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
def test_euler_convergence_orders():
    """Euler–Maruyama with additive noise: strong order 1, weak order 1 (±0.4)."""
    strong, weak = _orders("euler")
    print(f"\nEuler: strong {strong:.2f}, weak {weak:.2f}")
    assert abs(strong - 1.0) < 0.4 and abs(weak - 1.0) < 0.4


@pytest.mark.slow  # 5-15 s of compilation on 2 cores: in the slow suite (CI), to keep the default run under 5 minutes
@pytest.mark.parametrize("solver", ["shark", "sra1"])
def test_srk_convergence_order(solver):
    """ShARK and SRA1 with additive noise: strong order ≥ 1.5 (measured ≈ 2.1 on this linear problem)."""
    strong, _ = _orders(solver)
    print(f"\n{solver}: strong {strong:.2f}")
    assert strong > 1.5 - 0.4


def test_ensemble_compiles_once_across_step_sizes(backend_compiles):
    """dt is traced and max_steps a power of two: nearby step sizes reuse one compilation."""
    run = lambda dt: ps.solve_ensemble(TS[:21], 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=3, dt=dt)
    run(0.25)
    backend_compiles.clear()
    for dt in (0.2, 0.125, 0.1):
        run(dt)
    assert not [name for name in backend_compiles if "_ensemble" in name], backend_compiles


def test_bad_input():
    with pytest.raises(ValueError, match="paths"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=0)
    with pytest.raises(ValueError, match="solver"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 4, solver="rk4")
    with pytest.raises(ValueError, match="num_generations"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 1)
    with pytest.raises(ValueError, match="learning_rate"):
        ps.solve_deterministic(TS, 0.1, 0.0, -0.05, 0.0, 0.0, 0.3)


@pytest.mark.slow
def test_a_failed_solve_is_nan_not_inf():
    # K < 0 grows without bound; diffrax fails and fills the solve with inf from t0 on: reported as NaN
    solve = jax.jit(lambda k: ps.solve_deterministic(jnp.arange(0.0, 5.0), 0.3, 0.0, 0.05, 0.0, k, 0.3))
    assert np.all(np.isnan(solve(-1.0)))
    assert np.all(np.isfinite(solve(1.0)))
