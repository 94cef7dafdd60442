"""Exact discrete linear map (pgrpo_sim.linear) against published results and brute force.

Runs in float64 (conftest enables x64 for tests); float32 checks pass float32 arrays. Calls use arrays
where possible so each (lag, lag_model, dtype) is compiled once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgrpo_sim.models.oscillator import linear as L

F32 = np.float32


# ---------------------------------------------------------------------------------------------------
# numpy references


def simulate_stale(a, mu, tau, n, rng):
    """Brute-force iteration of e_{n+1} = (1+mu)e_n - mu e_{n-1} - a e_{n-tau}."""
    hist = max(tau, 1) + 1
    e = list(rng.standard_normal(hist))
    for _ in range(n):
        e.append((1 + mu) * e[-1] - mu * e[-2] - a * e[-1 - tau])
    return np.array(e)


def refresh_cycle(a, mu, k, e0, em1):
    """One refresh cycle of k steps with the force frozen at e0; returns (e_K, e_{K-1})."""
    prev, cur = em1, e0
    for _ in range(k):
        prev, cur = cur, (1 + mu) * cur - mu * prev - a * e0
    return cur, prev


def continuous_dominant_exponent(a, mu, tau):
    """Root of largest real part of M s^2 + C s + K (times learning_rate/K; only a = learning_rate K matters)."""
    m = ((1 + mu) + a * tau**2) / 2
    c = (1 - mu) - a * tau
    s = np.roots([m, c, a])
    return s[np.argmax(s.real)]


# ---------------------------------------------------------------------------------------------------
# 1. heavy ball without lag: stable iff 0 < learning_rate K < 2(1 + mu)  (Polyak 1964)


def test_heavy_ball_no_lag_threshold():
    mu = np.array([0.0, 0.3, 0.5, 0.9, 0.99])
    k = 2.5
    eta_c = np.asarray(L.critical_eta(mu, 0, k))
    np.testing.assert_allclose(eta_c, 2 * (1 + mu) / k, rtol=1e-12)
    below = np.asarray(L.spectral_radius(eta_c * (1 - 1e-6), mu, 0, k))
    above = np.asarray(L.spectral_radius(eta_c * (1 + 1e-6), mu, 0, k))
    assert (below < 1).all() and (above > 1).all()


# 2. mu = 0, constant lag: critical a = 2 sin(pi / (2(2 tau + 1)))  (Levin & May 1976)
# The bisection runs to the last bit and the crossing root is simple with |d radius / d a| = O(1),
# so in float64 the only error is eig round-off: observed <= 1e-14 relative; 1e-12 leaves margin.


@pytest.mark.parametrize("tau", range(1, 11))
def test_levin_may(tau):
    expected = 2 * np.sin(np.pi / (2 * (2 * tau + 1)))
    np.testing.assert_allclose(float(L.critical_eta(0.0, tau, 1.0)), expected, rtol=1e-12)
    # stiffness only rescales learning_rate
    np.testing.assert_allclose(float(L.critical_eta(0.0, tau, 4.0)), expected / 4, rtol=1e-12)


@pytest.mark.parametrize("tau", [1, 5])
def test_levin_may_float32(tau):
    out = L.critical_eta(F32(0.0), tau, F32(1.0))
    assert out.dtype == jnp.float32
    np.testing.assert_allclose(float(out), 2 * np.sin(np.pi / (2 * (2 * tau + 1))), rtol=1e-5)


# 3. at tau = 1 the continuous threshold learning_rate K tau = 1 - mu is exact (|z|^2 = mu + a)


def test_tau_one_continuous_threshold_exact():
    mu = np.array([0.0, 0.2, 0.5, 0.8, 0.95])
    np.testing.assert_allclose(np.asarray(L.critical_eta(mu, 1, 3.0)) * 3.0, 1 - mu, rtol=1e-12)


# ---------------------------------------------------------------------------------------------------
# 4. continuous oscillator vs exact map


def test_continuous_matches_discrete_small_step():
    """For learning_rate K <= 0.01, tau <= 5 the continuous exponent matches log(dominant root) to < 1e-2.

    Holds over this grid (observed max 9.2e-3 at mu = 0.9, tau = 5, a = 0.01); see the next test
    for where it fails.
    """
    mus = np.array([0.0, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99])
    avals = np.array([1e-4, 3e-4, 1e-3, 3e-3, 1e-2])
    mu_g, a_g = np.meshgrid(mus, avals, indexing="ij")
    n_checked = 0
    for tau in range(6):
        roots = np.asarray(L.dominant_root(a_g, mu_g, tau, 1.0))
        radius = np.asarray(L.spectral_radius(a_g, mu_g, tau, 1.0))
        for idx in np.ndindex(a_g.shape):
            if radius[idx] >= 1:  # only stable maps (mu = 0.99 with larger a and tau >= 1 is not)
                continue
            s = continuous_dominant_exponent(a_g[idx], mu_g[idx], tau)
            err = abs(np.log(roots[idx]) - s) / abs(s)
            assert err < 1e-2, (tau, mu_g[idx], a_g[idx], err)
            n_checked += 1
    assert n_checked >= 200


def test_continuous_fails_near_critical_damping():
    """Known breakdown: near a double root the exponent error is amplified (~ sqrt of model error).

    mu = 0.8, tau = 1, a = 0.01: the discrete map has the exact double root z = 0.9 while the
    continuous zeta = 0.9986 -> relative error 5.3e-2 at learning_rate K = 0.01.
    """
    root = complex(L.dominant_root(0.01, 0.8, 1, 1.0))
    np.testing.assert_allclose(root, 0.9, atol=1e-7)
    s = continuous_dominant_exponent(0.01, 0.8, 1)
    err = abs(np.log(root) - s) / abs(s)
    assert 0.04 < err < 0.07


@pytest.mark.parametrize("mu,tau", [(0.0, 1), (0.5, 3), (0.0, 5)])
def test_continuous_mismatch_grows_with_step(mu, tau):
    avals = np.array([1e-3, 1e-2, 3e-2, 1e-1])
    roots = np.asarray(L.dominant_root(avals, mu, tau, 1.0))
    assert (np.asarray(L.spectral_radius(avals, mu, tau, 1.0)) < 1).all()
    s = np.array([continuous_dominant_exponent(a, mu, tau) for a in avals])
    err = np.abs(np.log(roots) - s) / np.abs(s)
    assert (np.diff(err) > 0).all(), err
    assert err[-1] > 10 * err[0]


# ---------------------------------------------------------------------------------------------------
# 5. regimes, refresh model, brute force


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_regimes_hand_checkable(dt):
    a = lambda *v: np.array(v, dt)
    one, zero, half = dt(1.0), dt(0.0), dt(0.5)
    # tau = 0, mu = 0: root 1 - a
    assert list(L.discrete_regime(a(0.5, 1.5, 2.5), zero, 0, one)) == ["monotone", "flip", "unstable"]
    # tau = 0, mu = 0.5, a = 0.5: z^2 - z + 0.5, complex, |z|^2 = 0.5
    assert L.discrete_regime(half, half, 0, one) == "oscillatory"
    # tau = 1, mu = 0: z^2 - z + a, real for a < 1/4, complex with |z|^2 = a above
    assert list(L.discrete_regime(a(0.1, 0.5, 1.5), zero, 1, one)) == ["monotone", "oscillatory", "unstable"]
    # tau = 3, mu = 0: z^4 - z^3 + a; small a -> real root near 1 - a; above Levin-May 0.445 unstable
    assert list(L.discrete_regime(a(0.01, 0.3, 0.5), zero, 3, one)) == ["monotone", "oscillatory", "unstable"]
    # refresh, mu = 0, K = 2: cycle multiplier 1 - 2a; negative -> per-step root is imaginary
    got = L.discrete_regime(a(0.25, 0.75, 1.25), zero, 2, one, lag_model="refresh")
    assert list(got) == ["monotone", "oscillatory", "unstable"]
    root = L.dominant_root(dt(0.75), zero, 2, one, lag_model="refresh")
    assert root.dtype == np.result_type(dt, np.complex64)
    np.testing.assert_allclose(complex(root), 1j * np.sqrt(0.5), atol=1e-6)
    codes = np.asarray(L.discrete_regime_code(a(0.5, 0.5, 1.5, 2.5), a(0.0, 0.5, 0.0, 0.0), 0, one))
    np.testing.assert_array_equal(codes, [L.MONOTONE, L.OSCILLATORY, L.FLIP, L.UNSTABLE])
    assert [L.DISCRETE_REGIMES[c] for c in codes] == ["monotone", "oscillatory", "flip", "unstable"]


def test_regime_tolerance_treats_near_double_root_as_real():
    # tau = 0, mu = 0.25: double root z = 0.5 at a = (1 - sqrt(mu))^2 = 0.25. At a = 0.25 + 1e-15 the
    # pair is complex with |imag|/|z| ~ 4.5e-8, below the default tol (1.5e-7): read as real.
    assert L.discrete_regime(0.25, 0.25, 0, 1.0) == "monotone"
    assert L.discrete_regime(0.25 + 1e-15, 0.25, 0, 1.0) == "monotone"
    assert L.discrete_regime(0.25 + 1e-15, 0.25, 0, 1.0, tol=0.0) == "oscillatory"
    # a = 0.25 + 1e-6: |imag|/|z| ~ 1.4e-3, genuinely oscillatory unless tol is coarser
    assert L.discrete_regime(0.25 + 1e-6, 0.25, 0, 1.0) == "oscillatory"
    assert L.discrete_regime(0.25 + 1e-6, 0.25, 0, 1.0, tol=1e-2) == "monotone"


def test_refresh_lag_one_is_stale_lag_zero():
    learning_rate = np.array([0.1, 0.7, 1.4, 2.3, 3.5])
    mu = np.array([0.0, 0.5, 0.3, 0.9, 0.8])
    for lag in (0, 1):
        np.testing.assert_array_equal(
            L.spectral_radius(learning_rate, mu, lag, 1.3, "refresh"), L.spectral_radius(learning_rate, mu, 0, 1.3)
        )
        np.testing.assert_array_equal(
            L.dominant_root(learning_rate, mu, lag, 1.3, "refresh"), L.dominant_root(learning_rate, mu, 0, 1.3)
        )
        np.testing.assert_allclose(
            L.monodromy_matrix(learning_rate, mu, lag, 1.3),
            L.companion_matrix(learning_rate, mu, 0, 1.3),
            rtol=1e-13,
            atol=1e-15,
        )


def test_matrices_against_brute_force():
    a, mu = 0.3, 0.6
    np.testing.assert_array_equal(
        np.asarray(L.companion_matrix(0.1, mu, 3, 3.0)),
        [[1 + mu, -mu, 0, -0.1 * 3.0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
    )
    for k in (2, 3, 7):
        cols = [refresh_cycle(a, mu, k, 1.0, 0.0), refresh_cycle(a, mu, k, 0.0, 1.0)]
        got = np.asarray(L.monodromy_matrix(a, mu, k, 1.0))
        np.testing.assert_allclose(got, np.array(cols).T, rtol=1e-12, atol=1e-14)


def test_closed_forms_agree_with_numpy_eig():
    learning_rate = np.array([0.05, 0.2, 0.9, 1.6, 3.0])
    mu = np.array([0.0, 0.9, 0.5, 0.2, 0.7])
    for lag, model, mats in [
        (0, "stale", L.companion_matrix(learning_rate, mu, 0, 1.0)),
        (1, "stale", L.companion_matrix(learning_rate, mu, 1, 1.0)),
        (3, "stale", L.companion_matrix(learning_rate, mu, 3, 1.0)),
        (4, "refresh", L.monodromy_matrix(learning_rate, mu, 4, 1.0)),
    ]:
        k = lag if model == "refresh" else 1
        ref = np.array([np.max(np.abs(np.linalg.eigvals(m))) ** (1 / k) for m in np.asarray(mats)])
        np.testing.assert_allclose(np.asarray(L.spectral_radius(learning_rate, mu, lag, 1.0, model)), ref, rtol=1e-12)
    # lag-0 roots themselves (closed form) against numpy roots, imag >= 0 convention
    ref_root = []
    for e, m in zip(learning_rate, mu, strict=True):
        r = np.roots([1, -(1 + m - e), m])
        r = r[np.argmax(np.abs(r))]
        ref_root.append(complex(r.real, abs(r.imag)))
    np.testing.assert_allclose(np.asarray(L.dominant_root(learning_rate, mu, 0, 1.0)), ref_root, rtol=1e-12)


@pytest.mark.parametrize("a,mu,k", [(0.3, 0.6, 3), (0.12, 0.5, 5), (0.05, 0.9, 4), (0.9, 0.2, 2)])
def test_refresh_radius_matches_simulated_growth(a, mu, k):
    """Growth rate per step of the brute-force recursion over many cycles = per-step radius."""
    x = np.random.default_rng(0).standard_normal(2)
    burn_in, n_cycles = 100, 2000  # burn-in lets the subdominant mode die out (ratio 0.88 at worst)
    log_norm = 0.0
    for cycle in range(burn_in + n_cycles):
        x = np.array(refresh_cycle(a, mu, k, x[0], x[1]))
        nrm = np.linalg.norm(x)
        log_norm += np.log(nrm) if cycle >= burn_in else 0.0
        x /= nrm
    rate = log_norm / (n_cycles * k)  # error <= log(eigenvector condition ~ 18) / (n_cycles k)
    np.testing.assert_allclose(rate, np.log(float(L.spectral_radius(a, mu, k, 1.0, "refresh"))), atol=1e-3)


@pytest.mark.parametrize("a,mu,tau", [(0.2, 0.5, 3), (0.35, 0.0, 4)])
def test_stale_radius_matches_simulated_growth(a, mu, tau):
    e = simulate_stale(a, mu, tau, 3000, np.random.default_rng(1))
    # compare log|e| growth over a late window (max over a window to skip oscillation zeros)
    w = 50
    late, early = np.max(np.abs(e[-w:])), np.max(np.abs(e[-w - 2000 : -2000]))
    rate = np.log(late / early) / 2000
    np.testing.assert_allclose(rate, np.log(float(L.spectral_radius(a, mu, tau, 1.0))), atol=2e-3)


# ---------------------------------------------------------------------------------------------------
# shapes, dtypes, transformations


def test_broadcasting_and_vmap_float32():
    learning_rate = jnp.linspace(0.01, 0.5, 4, dtype=jnp.float32)
    mu = jnp.array([[0.0], [0.5], [0.9]], jnp.float32)
    out = L.spectral_radius(learning_rate, mu, 2, 1.0)
    assert out.shape == (3, 4) and out.dtype == jnp.float32
    assert L.dominant_root(learning_rate, mu, 2, 1.0).dtype == jnp.complex64
    vm = jax.vmap(lambda e: L.spectral_radius(e, 0.5, 2, 1.0))(learning_rate)
    np.testing.assert_allclose(vm, out[1], rtol=1e-6)
    # float32 agrees with float64 at these well-conditioned points
    ref = L.spectral_radius(np.asarray(learning_rate, np.float64), np.asarray(mu, np.float64), 2, 1.0)
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    assert L.companion_matrix(learning_rate, mu, 2, 1.0).shape == (3, 4, 3, 3)
    assert L.monodromy_matrix(learning_rate, mu, 5, 1.0).shape == (3, 4, 2, 2)
    assert L.critical_eta(mu[:, 0], 2, jnp.array([1.0, 2.0, 4.0], jnp.float32)).shape == (3,)
    # Python lists broadcast too
    assert L.spectral_radius([0.1, 0.2], 0.5, 2, 1.0).shape == (2,)


@pytest.mark.slow
def test_float32_critical_eta_matches_float64():
    mu = np.array([0.0, 0.5, 0.9, 0.99])
    for lag, model in [(3, "stale"), (5, "refresh")]:
        c32 = L.critical_eta(mu.astype(np.float32), lag, F32(1.0), model)
        assert c32.dtype == jnp.float32
        np.testing.assert_allclose(c32, L.critical_eta(mu, lag, 1.0, model), rtol=1e-4)


# 6. validation


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"learning_rate": np.nan}, "learning_rate"),
        ({"momentum": 1.0}, "momentum"),
        ({"momentum": -0.1}, "momentum"),
        ({"lag": -1}, "lag"),
        ({"lag": 1.5}, "lag"),
        ({"lag": L.MAX_LAG + 1}, "lag"),  # eig of a (lag + 1)-row matrix: minutes at a few thousand
        ({"stiffness": 0.0}, "stiffness"),
        ({"lag_model": "bogus"}, "lag_model"),
    ],
)
def test_bad_input_raises(kwargs, name):
    args = {"learning_rate": 0.1, "momentum": 0.5, "lag": 2, "stiffness": 1.0, "lag_model": "stale"} | kwargs
    with pytest.raises(ValueError, match=name):
        L.spectral_radius(**args)
    if name != "learning_rate":
        args.pop("learning_rate")
        with pytest.raises(ValueError, match=name):
            L.critical_eta(**args)


def test_bad_input_other_entries():
    with pytest.raises(ValueError, match="momentum"):
        L.companion_matrix(0.1, 1.2, 2, 1.0)
    with pytest.raises(ValueError, match="stiffness"):
        L.monodromy_matrix(0.1, 0.5, 2, -1.0)
    with pytest.raises(ValueError, match="tol"):
        L.discrete_regime(0.1, 0.5, 2, 1.0, tol=-1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        L.discrete_regime([0.1, -0.1], 0.5, 2, 1.0)
    with pytest.raises(TypeError, match="discrete_regime_code"):
        jax.jit(lambda e: L.discrete_regime(e, 0.5, 2, 1.0))(0.1)


@pytest.mark.parametrize("learning_rate", [1e200, 1e300])
def test_huge_steps_are_unstable_not_tiny(learning_rate):
    """Where a = ηK overflows eig's balancing, the radius is the exact lower bound a^(1/(lag+1)) (the roots' moduli
    multiply to a; at this size all three are about that large), never the tiny radius eig returned (1e-62)."""
    radius = float(L.spectral_radius(learning_rate, 0.9, 2, 0.3))
    assert radius == pytest.approx((0.3 * learning_rate) ** (1 / 3), rel=1e-6)
    assert L.discrete_regime(learning_rate, 0.9, 2, 0.3) == "unstable"


def test_invalid_under_jit_gives_nan():
    radius = jax.jit(lambda e: L.spectral_radius(e, 0.5, 2, 1.0))(jnp.array([0.1, -0.1, 0.0]))
    assert np.isfinite(radius[0]) and np.isnan(radius[1:]).all()
    root = jax.jit(lambda e, m: L.dominant_root(e, m, 0, 1.0))(0.1, 1.0)
    assert np.isnan(root.real)
    code = jax.jit(lambda e: L.discrete_regime_code(e, 0.5, 2, 1.0))(jnp.array([0.1, -0.1]))
    np.testing.assert_array_equal(code, [L.discrete_regime_code(0.1, 0.5, 2, 1.0), -1])
    crit = jax.jit(lambda m: L.critical_eta(m, 2, 1.0))(jnp.array([0.5, 1.0]))
    assert np.isfinite(crit[0]) and np.isnan(crit[1])
    mat = jax.jit(lambda k: L.companion_matrix(0.1, 0.5, 2, k))(-1.0)
    assert np.isnan(mat).all()


# 7. gradients


@pytest.mark.parametrize(
    "learning_rate,mu,lag,model",
    [(0.05, 0.5, 3, "stale"), (0.3, 0.2, 1, "stale"), (0.08, 0.4, 4, "refresh")],
)
def test_grad_spectral_radius_matches_finite_difference(learning_rate, mu, lag, model):
    f = lambda e: L.spectral_radius(e, mu, lag, 2.0, model)
    g = float(jax.grad(f)(learning_rate))
    h = 1e-6
    fd = (float(f(learning_rate + h)) - float(f(learning_rate - h))) / (2 * h)
    assert np.isfinite(g)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_grad_critical_eta_implicit():
    f = lambda m, k: L.critical_eta(m, 3, k)
    g_mu, g_k = jax.grad(f, argnums=(0, 1))(0.5, 2.0)
    h = 1e-6
    np.testing.assert_allclose(g_mu, (f(0.5 + h, 2.0) - f(0.5 - h, 2.0)) / (2 * h), rtol=1e-5)
    np.testing.assert_allclose(g_k, -f(0.5, 2.0) / 2.0, rtol=1e-12)
