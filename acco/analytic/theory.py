"""Numerical check of the ACCO Lyapunov argument (arXiv 2406.02613, App. A.2) on quadratics.

For an L-smooth f with minimum f*, full-batch ACCO with step ``eta`` iterates

    θ̃_{t+1} = θ_t − η ∇f(θ̃_t)
    θ_{t+1}  = θ_t − η (∇f(θ̃_t) + ∇f(θ_t)) / 2,        θ̃_0 = θ_0,

and the paper's potential is

    V_t = (f(θ_t) − f*) + η L (f(θ̃_t) − f*) + L ‖θ_t − θ̃_t‖².

Pairing.  ``V_t`` pairs θ_t with θ̃_t (same index), the pairing the claim "V never increases for
η ≤ 1/(2L)" holds for.  The two off-by-one pairings were checked as well (exact 2×2 analysis
below, confirmed on random quadratics with an arbitrary θ̃_0):

    pairing              largest ηL with V non-increasing on every convex quadratic, any θ̃_0
    (θ_t,     θ̃_t)       ≈ 1.2238   (the paper's; claim holds, first increases just above 1.22/L)
    (θ_t,     θ̃_{t+1})   ≈ 0.7109   (claim holds too, increases from ≈ 0.71/L)
    (θ_{t+1}, θ̃_t)       ≈ 0.3624   (claim FAILS: increases already below 1/(2L))

Degeneracy of the full-batch recursion.  With θ̃_0 = θ_0 both streams take the same step, so by
induction θ̃_t = θ_t for every t (up to round-off) and ACCO *is* plain gradient descent; then
V_t = (1 + ηL)(f(θ_t) − f*) (for all three pairings a positive combination of GD's per-eigen-
direction decays (1 − ηλ)^{2t}) and V is non-increasing on convex quadratics for every η ≤ 2/L.
Increases with θ̃_0 = θ_0 therefore only appear for η > 2/L (where GD diverges), not "from
η ≈ 1/L on".  The ≈ 1/L threshold is only seen once θ̃_0 ≠ θ_0 (e.g. after a stochastic step
where the two streams saw different mini-batches), which ``acco_gd_iterates`` allows through
its optional ``theta_tilde0``.

Exact analysis on a quadratic f(θ) = ½ θᵀAθ − bᵀθ.  In A's eigenbasis, with x = θ − θ*,
y = θ̃ − θ*, every eigen-direction (eigenvalue λ = sL, h = ηλ) evolves independently by

    (x, y) ← M (x, y),   M = [[1 − h/2, −h/2], [1, −h]],

and V is the sum over directions of (x, y) P (x, y)ᵀ with P = L·[[s/2 + 1, −1], [−1, ηL·s/2 + 1]].
V is non-increasing for every start iff P − MᵀPM ⪰ 0 for all s ∈ [0, 1]; the thresholds in the
table come from bisecting that condition (the binding direction is always s = 1, i.e. λ = L).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "ROUNDOFF_RTOL",
    "acco_gd_iterates",
    "lyapunov",
    "lyapunov_sequence",
    "random_quadratic",
    "max_lyapunov_increase",
]

# Increases of V smaller than this fraction of V_0 are float64 round-off, not a violation.
ROUNDOFF_RTOL = 1e-10

Array = np.ndarray


def acco_gd_iterates(
    grad: Callable[[Array], Array],
    theta0: Array,
    eta: float,
    steps: int,
    theta_tilde0: Array | None = None,
) -> tuple[Array, Array]:
    """Run ``steps`` full-batch ACCO iterations; return ``(thetas, theta_tildes)``.

    Both arrays have shape ``(steps + 1, dim)``; row t holds θ_t and θ̃_t.  ``theta_tilde0``
    defaults to ``theta0`` (the algorithm's start); pass another point to study the two streams
    once they have drifted apart.
    """
    theta = np.array(theta0, dtype=np.float64)
    tilde = theta.copy() if theta_tilde0 is None else np.array(theta_tilde0, dtype=np.float64)
    if tilde.shape != theta.shape:
        raise ValueError("theta_tilde0 must have theta0's shape")
    thetas = np.empty((steps + 1,) + theta.shape)
    tildes = np.empty_like(thetas)
    thetas[0], tildes[0] = theta, tilde
    for t in range(steps):
        g_tilde = np.asarray(grad(tilde), dtype=np.float64)
        g = np.asarray(grad(theta), dtype=np.float64)
        # both updates start from θ_t, so compute them before overwriting it
        theta, tilde = theta - eta * (g_tilde + g) / 2.0, theta - eta * g_tilde
        thetas[t + 1], tildes[t + 1] = theta, tilde
    return thetas, tildes


def lyapunov(
    f: Callable[[Array], float],
    f_star: float,
    L: float,
    eta: float,
    theta: Array,
    theta_tilde: Array,
) -> float:
    """V = (f(θ) − f*) + ηL (f(θ̃) − f*) + L ‖θ − θ̃‖²  (pass θ_t with θ̃_t, same index)."""
    diff = np.asarray(theta, dtype=np.float64) - np.asarray(theta_tilde, dtype=np.float64)
    return float((f(theta) - f_star) + eta * L * (f(theta_tilde) - f_star) + L * np.dot(diff, diff))


def lyapunov_sequence(f, f_star, L, eta, thetas: Array, theta_tildes: Array) -> Array:
    """V_t for every row t of ``acco_gd_iterates``'s output (same-index pairing)."""
    return np.array([lyapunov(f, f_star, L, eta, th, tt) for th, tt in zip(thetas, theta_tildes)])


def random_quadratic(
    dim: int,
    rng: np.random.Generator | int | None,
    cond: float = 10.0,
    scale: float = 1.0,
):
    """Random f(θ) = ½ θᵀAθ − bᵀθ with A symmetric positive definite.

    A's eigenvalues are λ_max = ``scale`` and λ_min = ``scale / cond`` plus ``dim − 2``
    log-uniform ones in between, in a Haar-random eigenbasis; b is standard normal.
    Returns ``(A, b, L, f, grad, f_star)`` with L = λ_max(A) and f* = −½ bᵀA⁻¹b.
    """
    if dim < 1 or cond < 1.0 or scale <= 0.0:
        raise ValueError("need dim >= 1, cond >= 1, scale > 0")
    rng = np.random.default_rng(rng)
    inner = np.exp(rng.uniform(-np.log(cond), 0.0, size=max(dim - 2, 0)))
    eigs = scale * np.concatenate([[1.0], [1.0 / cond], inner])[:dim]
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    q = q * np.sign(np.diag(r))  # Haar-distributed orthogonal matrix
    A = (q * eigs) @ q.T
    A = (A + A.T) / 2.0
    b = rng.standard_normal(dim)
    L = float(np.linalg.eigvalsh(A).max())
    theta_star = np.linalg.solve(A, b)
    f_star = float(-0.5 * b @ theta_star)

    def f(theta):
        theta = np.asarray(theta, dtype=np.float64)
        return float(0.5 * theta @ A @ theta - b @ theta)

    def grad(theta):
        return A @ np.asarray(theta, dtype=np.float64) - b

    return A, b, L, f, grad, f_star


def max_lyapunov_increase(
    A: Array,
    b: Array,
    eta: float,
    theta0: Array,
    steps: int,
    theta_tilde0: Array | None = None,
) -> float:
    """Largest one-step increase max_t (V_{t+1} − V_t) / V_0 along ``steps`` ACCO iterations.

    Run on f(θ) = ½ θᵀAθ − bᵀθ with L = λ_max(A) (A symmetric PSD, b in A's range).  A value
    ≤ ``ROUNDOFF_RTOL`` means V did not increase beyond float64 round-off; negative means V
    strictly decreased at every step.  The gap f(θ) − f* is evaluated as ½ (θ − θ*)ᵀA(θ − θ*)
    rather than as a difference of two large numbers, so its round-off is relative to the gap.
    """
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    L = float(np.linalg.eigvalsh(A).max())
    theta_star = np.linalg.lstsq(A, b, rcond=None)[0]

    def gap(theta):  # = f(θ) − f*
        d = theta - theta_star
        return 0.5 * float(d @ A @ d)

    thetas, tildes = acco_gd_iterates(lambda th: A @ th - b, theta0, eta, steps, theta_tilde0)
    V = lyapunov_sequence(gap, 0.0, L, eta, thetas, tildes)
    if steps < 1:
        return 0.0
    scale = V[0] if V[0] > 0.0 else 1.0
    return float(np.max(np.diff(V)) / scale)
