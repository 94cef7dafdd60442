"""Closed-form oscillator: formulas, ODE residuals, regimes, continuity at ζ = 1, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import pgrpo_sim as ps

# (learning_rate, momentum, lag, stiffness) in each regime
OVER = (0.05, 0.0, 0.0, 0.3)  # ζ = 1/sqrt(2·0.015) ≈ 5.8
UNDER = (0.05, 0.9, 2.0, 0.3)  # ζ ≈ 0.29
UNSTABLE = (0.05, 0.9, 10.0, 0.3)  # Kητ = 0.15 > 1 − μ = 0.1


def _critical_eta(momentum, lag, k):
    """η with ζ = 1, by bisection on the expanded formula (independent of the library)."""
    f = lambda e: ((1 - momentum) - k * e * lag) / np.sqrt(2 * k * e * ((1 + momentum) + k * e * lag**2)) - 1
    lo, hi = 1e-8, (1 - momentum) / (k * max(lag, 1e-9))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


def test_coefficients_match_formulas():
    learning_rate, mu, tau, k = 0.07, 0.6, 3.0, 0.4
    m, c, kk = ps.theory.coefficients(learning_rate, mu, tau, k)
    assert np.isclose(m, ((1 + mu) + k * learning_rate * tau**2) / (2 * learning_rate), rtol=1e-14)
    assert np.isclose(c, ((1 - mu) - k * learning_rate * tau) / learning_rate, rtol=1e-14)
    assert kk == k
    zeta = ((1 - mu) - k * learning_rate * tau) / np.sqrt(
        2 * k * learning_rate * ((1 + mu) + k * learning_rate * tau**2)
    )
    assert np.isclose(ps.damping_ratio(learning_rate, mu, tau, k), zeta, rtol=1e-12)
    assert np.isclose(ps.natural_frequency(learning_rate, mu, tau, k), np.sqrt(k / m), rtol=1e-12)
    assert np.isclose(ps.critical_lag(learning_rate, mu, k), (1 - mu) / (learning_rate * k), rtol=1e-14)


@pytest.mark.slow
def test_broadcasting_and_vmap():
    etas = jnp.logspace(-3, 0, 7)
    z = ps.damping_ratio(etas[:, None], jnp.array([0.0, 0.5, 0.9]), 1.0, 0.3)
    assert z.shape == (7, 3)
    zv = jax.vmap(lambda e: ps.damping_ratio(e, 0.5, 1.0, 0.3))(etas)
    np.testing.assert_allclose(zv, z[:, 1], rtol=1e-12)


@pytest.mark.parametrize("wrt", [0, 1, 2, 3])
def test_grad_damping_ratio_matches_finite_differences(wrt):
    x = np.array([0.03, 0.7, 1.5, 0.25])
    g = jax.grad(lambda *a: ps.damping_ratio(*a), argnums=wrt)(*x)
    h = 1e-6 * max(abs(x[wrt]), 1.0)
    xp, xm = x.copy(), x.copy()
    xp[wrt] += h
    xm[wrt] -= h
    fd = (ps.damping_ratio(*xp) - ps.damping_ratio(*xm)) / (2 * h)
    # central differences: truncation O(h²) ≈ 1e-12, rounding ≈ 1e-16/1e-6 = 1e-10 — well under rtol 1e-6
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_regimes():
    assert ps.regime(*OVER) == "overdamped"
    assert ps.regime(*UNDER) == "underdamped"
    assert ps.regime(*UNSTABLE) == "unstable"
    eta_c = _critical_eta(0.5, 1.0, 0.3)
    assert ps.regime(eta_c, 0.5, 1.0, 0.3, tol=1e-6) == "critical"
    codes = ps.theory.regime_code(jnp.array([OVER[0], UNDER[0]]), jnp.array([0.0, 0.9]), jnp.array([0.0, 2.0]), 0.3)
    assert list(np.asarray(codes)) == [0, 2]
    # exactly at the critical lag C = 0: unstable (no damping, no stationary state)
    tau_star = float(ps.critical_lag(0.05, 0.9, 0.3))
    assert ps.regime(0.05, 0.9, tau_star, 0.3) == "unstable"


def test_stationary_variance():
    d, g = 0.2, 8
    _m, c, k = ps.theory.coefficients(*UNDER)
    assert np.isclose(ps.stationary_variance(*UNDER, d, g), d / (2 * g * c * k), rtol=1e-12)
    assert ps.stationary_variance(*UNDER, d, 2 * g) == pytest.approx(0.5 * ps.stationary_variance(*UNDER, d, g))
    assert ps.stationary_variance(*UNSTABLE, d, g) == np.inf


@pytest.mark.parametrize("params", [OVER, UNDER, UNSTABLE], ids=["over", "under", "unstable"])
def test_trajectory_solves_the_ode(params):
    """Autodiff residual M ë + C ė + K e = 0 and initial conditions, plus an independent RK45 solve."""
    e0, v0 = 0.3, -0.02
    m, c, k = (float(v) for v in ps.theory.coefficients(*params))
    e = jax.jit(lambda t: ps.trajectory(t, e0, v0, *params))  # jitted: eager second derivatives dispatch op by op
    de, d2e = jax.jit(jax.grad(e)), jax.jit(jax.grad(jax.grad(e)))
    assert np.isclose(e(0.0), e0, atol=1e-14) and np.isclose(de(0.0), v0, atol=1e-12)
    for t in [0.5, 3.0, 17.0, 60.0]:
        scale = abs(m * d2e(t)) + abs(c * de(t)) + abs(k * e(t))
        assert abs(m * d2e(t) + c * de(t) + k * e(t)) <= 1e-9 * scale
    ts = np.linspace(0, 60, 13)
    sol = solve_ivp(
        lambda t, y: [y[1], -(c * y[1] + k * y[0]) / m], (0, 60), [e0, v0], t_eval=ts, rtol=1e-11, atol=1e-13
    )
    np.testing.assert_allclose(jax.vmap(e)(ts), sol.y[0], rtol=1e-7, atol=1e-10)


def test_trajectory_continuous_across_critical_damping():
    mu, tau, k = 0.5, 1.0, 0.3
    eta_c = _critical_eta(mu, tau, k)
    # move ζ by ±1e-6: dζ/dη from the library's gradient
    dz = float(jax.grad(ps.damping_ratio)(eta_c, mu, tau, k))
    ts = jnp.linspace(0.0, 200.0, 401)
    curves = [ps.trajectory(ts, 0.4, 0.01, eta_c + s * 1e-6 / dz, mu, tau, k) for s in (-1, 0, 1)]
    for cur in curves:
        assert np.all(np.isfinite(cur))
    zetas = [float(ps.damping_ratio(eta_c + s * 1e-6 / dz, mu, tau, k)) for s in (-1, 0, 1)]
    assert min(zetas) < 1 < max(zetas) and abs(zetas[1] - 1) < 1e-9
    # a ζ change of 1e-6 moves the solution by O(1e-6) relative; a branch jump would be O(1)
    np.testing.assert_allclose(curves[0], curves[1], atol=1e-5 * 0.4)
    np.testing.assert_allclose(curves[2], curves[1], atol=1e-5 * 0.4)
    g = jax.grad(lambda e: ps.trajectory(50.0, 0.4, 0.01, e, mu, tau, k))(eta_c)
    assert np.isfinite(g)


@pytest.mark.slow
def test_trajectory_float32():
    args = [jnp.float32(v) for v in UNDER]
    ts = jnp.linspace(0, 50, 11, dtype=jnp.float32)
    e32 = ps.trajectory(ts, jnp.float32(0.3), jnp.float32(0.0), *args)
    assert e32.dtype == jnp.float32
    e64 = ps.trajectory(np.asarray(ts, np.float64), 0.3, 0.0, *UNDER)
    np.testing.assert_allclose(e32, e64, atol=1e-5)  # float32 eps ≈ 1.2e-7 times O(10) operations
    assert ps.damping_ratio(*args).dtype == jnp.float32


@pytest.mark.parametrize("momentum, lag", [(0.0, 0.0), (0.9, 2.0)])
def test_trajectory_float32_slow_overdamped_decay(momentum, lag):
    """At LLM-sized learning rates (η = 1e-7, K = 0.3: ζ ~ 10³) the slow mode's rate √Δ − γ is a difference of
    nearly equal numbers; written as −(K/M)/(√Δ + γ) it keeps float32's precision: relative error ≤ 1e-5 (float32
    eps 1.2e-7 times an exponent of order 10) against float64, out to e(t) ~ 1e-4 (it read 20× too small)."""
    ts = np.array([0.0, 1e3, 1e5, 1e7, 3e7])
    args = (1e-7, momentum, lag, 0.3)
    e32 = ps.trajectory(jnp.float32(ts), jnp.float32(1.0), jnp.float32(0.0), *map(jnp.float32, args))
    with jax.enable_x64(True):
        e64 = np.asarray(ps.trajectory(ts, 1.0, 0.0, *args))
    assert e64[-1] < 0.5  # the decay is well under way
    np.testing.assert_allclose(e32, e64, rtol=1e-5)


def test_empirical_laws():
    assert np.isclose(ps.theory.saturation_law(10.0, 0.8, 10.0), 0.8 * (1 - np.exp(-1)), rtol=1e-14)
    assert ps.theory.saturation_law(0.0, 0.8, 10.0) == 0.0
    # the critically damped law is the closed-form trajectory at ζ = 1 with ė(0) = 0
    mu, tau, k = 0.5, 1.0, 0.3
    eta_c = _critical_eta(mu, tau, k)
    omega = float(ps.natural_frequency(eta_c, mu, tau, k))
    ts = jnp.linspace(0, 100, 51)
    r_inf, r0 = 0.9, 0.2
    law = ps.theory.critical_law(ts, r_inf, r0, omega)
    osc = r_inf + ps.trajectory(ts, r0 - r_inf, 0.0, eta_c, mu, tau, k)
    np.testing.assert_allclose(law, osc, atol=1e-8)


@pytest.mark.parametrize(
    "bad, name",
    [
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(learning_rate=-1.0), "learning_rate"),
        (dict(momentum=1.0), "momentum"),
        (dict(momentum=-0.1), "momentum"),
        (dict(lag=-1.0), "lag"),
        (dict(stiffness=0.0), "stiffness"),
        (dict(learning_rate=np.nan), "learning_rate"),
        (dict(stiffness=np.inf), "stiffness"),
    ],
)
def test_bad_input_raises(bad, name):
    args = dict(learning_rate=0.05, momentum=0.5, lag=1.0, stiffness=0.3) | bad
    with pytest.raises(ValueError, match=name):
        ps.damping_ratio(**args)


def test_bad_group_size_and_nan_under_jit():
    with pytest.raises(ValueError, match="num_generations"):
        ps.stationary_variance(*UNDER, 0.1, 1)
    assert np.isnan(jax.jit(ps.damping_ratio)(-0.1, 0.5, 1.0, 0.3))
    assert np.isnan(jax.jit(ps.stationary_variance)(*UNDER, 0.1, 1.0))
    assert int(jax.jit(ps.theory.regime_code)(0.05, 1.5, 1.0, 0.3)) == -1
