"""Nonlinear least squares in JAX (optimistix Levenberg-Marquardt) with the parameters' standard errors from the
Jacobian at the solution: what the law fits (`laws`) and the stiffness fit (`stiffness`) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import Array
from jax.typing import ArrayLike

from ..base.checks import as_float


class LeastSquares(NamedTuple):
    """Result of `least_squares`: parameters, their standard errors (from the Jacobian), the cost ½Σr²,
    the residual sum of squares Σr², the number of points and whether the solver met its tolerance.

    Under `vmap` or `lax.map` every field gains the leading batch axis.

    Attributes:
        params: the solution x; shape (p,); the units of the fit coordinates.
        stderr: standard errors of `params`, √diag(s²(JᵀJ)⁻¹) with s² = RSS/(n − p); shape (p,); their units.
        cost: ½Σr² at the solution; scalar; squared units of the residuals.
        rss: Σr² at the solution; scalar; squared units of the residuals.
        n: number of residuals.
        converged: whether the solver met its tolerance within `iterations` steps; bool scalar.
    """

    params: Array
    stderr: Array
    cost: Array
    rss: Array
    n: int
    converged: Array


def least_squares(
    residuals: Callable[[Array], Array],
    x0: ArrayLike,
    *,
    iterations: int = 200,
    rtol: float | None = None,
    atol: float | None = None,
) -> LeastSquares:
    """Minimise ½‖r(x)‖² by Levenberg–Marquardt (`optimistix.LevenbergMarquardt`: trust-region damping).

    Stops when an accepted step changes every xᵢ by less than atol + rtol·|xᵢ| and every rᵢ by less than
    atol + rtol·|rᵢ| (default for both: √eps of the dtype, 1.5e-8 in float64), else after `iterations` steps
    with `converged` False and the last accepted point. Standard errors are √diag(s²(JᵀJ)⁻¹) with
    s² = RSS/(n − p), J at the solution. Pure JAX: jit/vmap-compatible.

    Args:
        residuals: x ↦ r(x), the residual vector; maps shape (p,) to shape (n,) (weighted as the caller wants).
        x0: starting point; shape (p,); float (its dtype sets the default tolerances).
        iterations: largest number of solver steps; integer ≥ 1.
        rtol: relative tolerance on x and r; > 0; None: √eps of `x0`'s dtype.
        atol: absolute tolerance on x and r; > 0; None: √eps of `x0`'s dtype.

    Returns:
        `LeastSquares` (the last accepted point, with `converged` False, if the tolerance was not met).
    """
    x0 = as_float(x0)
    tol = float(np.sqrt(jnp.finfo(x0.dtype).eps))
    solver = optx.LevenbergMarquardt(tol if rtol is None else rtol, tol if atol is None else atol)
    sol = optx.least_squares(lambda x, _: residuals(x), solver, x0, max_steps=iterations, throw=False)
    x = sol.value
    r, jac = residuals(x), jax.jacfwd(residuals)(x)
    n, p = r.size, x.size
    rss = jnp.sum(r**2)
    cov = rss / max(n - p, 1) * jnp.linalg.pinv(jac.T @ jac)
    converged = sol.result == optx.RESULTS.successful
    return LeastSquares(x, jnp.sqrt(jnp.abs(jnp.diag(cov))), rss / 2, rss, n, converged)
