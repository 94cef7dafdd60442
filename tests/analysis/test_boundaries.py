"""Traced phase boundaries against closed forms (ζ = 1, C = 0) and against bisection on the exact spectral radius."""

import json
import math

import jax
import numpy as np
import pytest
import xarray as xr

import pgrpo_sim as ps
from pgrpo_sim.analysis import boundaries as B
from pgrpo_sim.analysis.sweep import SweepSpec

K = 0.3
TOL = 1e-10  # the tracer's default xtol in float64 (box coordinates)


def _critical_damping_a(mu, tau):
    """a = ηK at ζ = 1: the positive root of a²τ² + 2a((1−μ)τ + 1+μ) − (1−μ)² = 0 (from squaring ζ = 1)."""
    b = (1 - mu) * tau + (1 + mu)
    return np.where(
        tau > 0,
        (-b + np.sqrt(b * b + tau**2 * (1 - mu) ** 2)) / np.where(tau > 0, tau, 1) ** 2,
        (1 - mu) ** 2 / (2 * (1 + mu)),
    )


def test_eta_lag_slice_against_closed_forms_and_levin_may():
    """One slice (μ = 0, K = 1, stale lag), all three boundaries (one compiled program serves them)."""
    point, box = dict(momentum=0.0, stiffness=1.0), ("learning_rate", (1e-2, 3.0), "lag", (0.0, 4.0))
    (c,) = B.trace_boundary("damping", point, *box)
    assert c.residual <= TOL and len(c.x) > 20
    # C = 0 ⇔ η·K·τ = 1 − μ; the tolerance is a distance in box coordinates, ~1e-10 relative here
    np.testing.assert_allclose(c.x * c.y, 1.0, rtol=1e-9)
    assert c.y.min() == pytest.approx(1 / 3.0, rel=1e-9)  # the curve ends on the box edge η = 3
    (z,) = B.trace_boundary("damping_ratio", point, *box)
    assert z.residual <= TOL
    np.testing.assert_allclose(z.x, _critical_damping_a(0.0, z.y), rtol=1e-9)
    (r,) = B.trace_boundary("spectral_radius", point, *box)  # the exact map exists at integer lags only
    np.testing.assert_array_equal(r.y, [0, 1, 2, 3, 4])
    levin_may = [2.0] + [2 * math.sin(math.pi / (2 * (2 * t + 1))) for t in range(1, 5)]  # lag 0: Polyak 2(1+μ)
    np.testing.assert_allclose(r.x, levin_may, rtol=1e-9)


@pytest.mark.parametrize("lag_model", ["stale", "refresh"])
def test_eta_momentum_slice_against_closed_form_and_bisection(lag_model):
    point, box = dict(lag=3, stiffness=K), ("learning_rate", (1e-3, 20.0), "momentum", (0.0, 0.9))
    (r,) = B.trace_boundary("spectral_radius", point, *box, lag_model=lag_model)
    assert r.residual <= TOL and r.y.min() < 0.01 and r.y.max() > 0.89  # across the box, both coordinates moving
    reference = np.array([float(ps.theory.critical_eta(mu, 3, K, lag_model=lag_model)) for mu in r.y[::5]])
    np.testing.assert_allclose(r.x[::5], reference, rtol=1e-8)  # bisection: 60 halvings, full precision
    if lag_model == "stale":
        (z,) = B.trace_boundary("damping_ratio", point, *box)
        assert z.residual <= TOL
        np.testing.assert_allclose(z.x * K, _critical_damping_a(z.y, 3.0), rtol=1e-9)


@pytest.mark.slow
def test_padded_stale_radius_and_its_derivative_equal_the_exact_map():
    """One companion matrix for every lag (padding zeros), with the implicit derivative of the dominant root."""
    f = lambda a, mu: B.stale_radius(a, mu, jax.numpy.asarray(4), 6)
    g = lambda a, mu: ps.spectral_radius(a, mu, 4, 1.0)
    assert float(f(0.2, 0.7)) == pytest.approx(float(g(0.2, 0.7)), rel=1e-12)
    np.testing.assert_allclose(jax.grad(f, argnums=(0, 1))(0.2, 0.7), jax.grad(g, argnums=(0, 1))(0.2, 0.7), rtol=1e-9)


@pytest.mark.slow  # ~8 s: the traced field solves for the fixed point at every evaluation (compile-bound)
def test_bandit_slice_where_the_stiffness_moves():
    """(η, β) slice of a bandit: K(β) from the exact fixed point inside the traced field."""
    cfg = ps.bandit.config(p_ref=0.2, beta=0.5, num_generations=8, momentum=0.9, lag_model="stale", lag=2)
    (curve,) = B.trace_boundary(
        "damping_ratio", cfg, "learning_rate", (1e-3, 0.1), "beta", (0.2, 2.0), grid=6, step=0.1
    )
    assert curve.residual <= TOL
    for learning_rate, beta in zip(curve.x[::4], curve.y[::4], strict=True):
        assert float(ps.predict(cfg.replace(learning_rate=learning_rate, beta=beta)).damping_ratio) == pytest.approx(
            1.0, abs=1e-8
        )


@pytest.mark.slow
def test_phase_boundaries_of_a_sweep():
    """A phase-diagram dataset (learning_rate × lag, stale): C = 0 is η·τ = const, and at τ = 1 the exact discrete
    threshold equals it (README: the continuous threshold is exact at τ = 1)."""
    base = dict(p_ref=0.2, beta=0.5, num_generations=8, momentum=0.9, lag_model="stale")
    spec = SweepSpec(
        base=base,
        axes=["learning_rate=log:0.003:1:5", "lag=0:2"],
        steps=20,
        mode="expected",
        seeds=1,
        seed=0,
        decimate=0,
    )
    ds = xr.Dataset(
        {"regime": (("learning_rate", "lag"), np.zeros((5, 3), int))},
        coords={"learning_rate": np.geomspace(0.003, 1, 5), "lag": [0, 1, 2]},
    )
    ds.attrs.update(spec=spec.to_json(), spacing=json.dumps({"learning_rate": "log", "lag": "int"}))
    curves = B.phase_boundaries(ds, "learning_rate", "lag")
    (c,) = curves["damping"]
    np.testing.assert_allclose(c.x * c.y, c.x[0] * c.y[0], rtol=1e-9)
    (r,) = curves["spectral_radius"]
    assert list(r.y) == [1, 2] and r.x[0] == pytest.approx(c.x[0] * c.y[0], rel=1e-9)
    assert len(curves["damping_ratio"]) == 1 and B.phase_boundaries(ds, "learning_rate", "beta") is None


@pytest.mark.parametrize(
    "args, word",
    [
        (
            ("damping", dict(momentum=0.9, stiffness=K), "learning_rate", (1e-3, 1.0), "temperature", (0, 1)),
            "temperature",
        ),
        (("damping", dict(momentum=0.9), "learning_rate", (1e-3, 1.0), "lag", (0, 1)), "stiffness"),
        (
            (
                "spectral_radius",
                dict(momentum=0.9, lag=2.5, stiffness=K),
                "learning_rate",
                (1e-3, 1.0),
                "momentum",
                (0, 0.9),
            ),
            "integer lag",
        ),
        (("damping", dict(lag=2, stiffness=K), "learning_rate", (0.0, 1.0), "momentum", (0, 0.9)), "log scale"),
        (("zeta", dict(lag=2, stiffness=K), "learning_rate", (1e-3, 1.0), "momentum", (0, 0.9)), "kind"),
    ],
)
def test_bad_slices_are_refused(args, word):
    with pytest.raises(ValueError, match=word):
        B.trace_boundary(*args)
