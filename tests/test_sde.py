"""The reduced SDE with diffrax: deterministic solve, stationary variance, convergence order, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pgrpo_sim as ps

REGIMES = {"over": (0.05, 0.0, 0.0, 0.3), "under": (0.05, 0.9, 2.0, 0.3), "critical-ish": (0.05, 0.5, 1.0, 0.3)}
TS = jnp.arange(0.0, 201.0)


@pytest.mark.parametrize("params", REGIMES.values(), ids=REGIMES.keys())
def test_deterministic_solve_matches_closed_form(params):
    sol = ps.solve_deterministic(TS, 0.3, -0.01, *params)
    ref = ps.trajectory(TS, 0.3, -0.01, *params)
    # Tsit5 at rtol 1e-8: error ~1e-9 of the scale, well inside rtol 1e-4
    np.testing.assert_allclose(sol, ref, rtol=1e-4, atol=1e-4 * 0.3)


def test_gradient_through_deterministic_solve_matches_finite_differences():
    def e50(eta, momentum):
        return ps.solve_deterministic(TS[:60], 0.3, 0.0, eta, momentum, 1.0, 0.3)[50]

    g = jax.grad(e50, argnums=(0, 1))(0.05, 0.5)
    h = 1e-6
    fd = [(e50(0.05 + h, 0.5) - e50(0.05 - h, 0.5)) / (2 * h), (e50(0.05, 0.5 + h) - e50(0.05, 0.5 - h)) / (2 * h)]
    # solver tolerance 1e-8 relative divided by h = 1e-6 bounds the FD error at ~1e-2·|e|; rtol 1e-3 on O(1) slopes
    np.testing.assert_allclose(g, fd, rtol=1e-3)


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


def test_ensemble_shapes_and_seeds():
    ens = ps.solve_ensemble(jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=7, key=jax.random.key(0))
    assert ens.paths.shape == (7, 11) and np.all(ens.paths[:, 0] == 0.1)
    again = ps.solve_ensemble(jnp.arange(0.0, 11.0), 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=7, key=jax.random.key(0))
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


def test_euler_convergence_orders():
    """Euler–Maruyama with additive noise: strong order 1, weak order 1 (±0.4)."""
    strong, weak = _orders("euler")
    print(f"\nEuler: strong {strong:.2f}, weak {weak:.2f}")
    assert abs(strong - 1.0) < 0.4 and abs(weak - 1.0) < 0.4


def test_shark_convergence_order():
    """ShARK with additive noise: strong order ≥ 1.5 (measured 2.1 on this linear problem)."""
    strong, _ = _orders("shark")
    print(f"\nShARK: strong {strong:.2f}")
    assert strong > 1.5 - 0.4


def test_bad_input():
    with pytest.raises(ValueError, match="paths"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 4, paths=0)
    with pytest.raises(ValueError, match="solver"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 4, solver="rk4")
    with pytest.raises(ValueError, match="group_size"):
        ps.solve_ensemble(TS, 0.1, 0.0, *REGIMES["over"], 0.01, 1)
    with pytest.raises(ValueError, match="eta"):
        ps.solve_deterministic(TS, 0.1, 0.0, -0.05, 0.0, 0.0, 0.3)
