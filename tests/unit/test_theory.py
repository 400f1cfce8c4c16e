"""Numerical checks of ACCO's Lyapunov function on convex quadratics (see acco/analytic/theory.py).

V_t pairs θ_t with θ̃_t (same index).  With the algorithm's start θ̃_0 = θ_0 full-batch ACCO
coincides with gradient descent, so V cannot increase below η = 2/L; the increases near 1/L
need θ̃_0 ≠ θ_0 (first one just above η ≈ 1.22/L).  The property test covers both starts.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    from acco.analytic import theory
except ImportError:  # plain `pytest` without the project root on sys.path
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from acco.analytic import theory

from acco.analytic.theory import (
    ROUNDOFF_RTOL,
    acco_gd_iterates,
    lyapunov,
    lyapunov_sequence,
    max_lyapunov_increase,
    random_quadratic,
)

# database=None: no .hypothesis/ directory written into the repository.
_SETTINGS = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _starts(rng, dim, theta_star, log10_start, log10_tilde):
    """θ_0 around θ* at distance ~10**log10_start; θ̃_0 = θ_0 or θ_0 + noise of ~10**log10_tilde."""
    theta0 = theta_star + rng.standard_normal(dim) * 10.0**log10_start
    tilde0 = None if log10_tilde is None else theta0 + rng.standard_normal(dim) * 10.0**log10_tilde
    return theta0, tilde0


@settings(max_examples=200, **_SETTINGS)
@given(
    dim=st.integers(2, 20),
    log10_cond=st.floats(0.0, 4.0),
    log10_scale=st.floats(-3.0, 3.0),
    eta_frac=st.one_of(st.just(1.0), st.floats(1e-4, 1.0)),
    log10_start=st.floats(-3.0, 3.0),
    log10_tilde=st.one_of(st.none(), st.floats(-3.0, 3.0)),
    seed=st.integers(0, 2**32 - 1),
)
def test_lyapunov_non_increasing_for_eta_up_to_half_over_L(
    dim, log10_cond, log10_scale, eta_frac, log10_start, log10_tilde, seed
):
    rng = np.random.default_rng(seed)
    A, b, L, f, grad, f_star = random_quadratic(dim, rng, cond=10.0**log10_cond, scale=10.0**log10_scale)
    theta0, tilde0 = _starts(rng, dim, np.linalg.solve(A, b), log10_start, log10_tilde)
    eta = eta_frac / (2.0 * L)  # η ∈ (0, 1/(2L)]
    inc = max_lyapunov_increase(A, b, eta, theta0, steps=60, theta_tilde0=tilde0)
    assert inc <= ROUNDOFF_RTOL, f"V increased by {inc:.3e}·V_0 at ηL = {eta * L:.4f}"


def test_full_batch_acco_with_equal_start_is_gradient_descent():
    """θ̃_0 = θ_0 ⇒ θ̃_t = θ_t bit for bit: the reason increases need η > 2/L there."""
    A, b, L, f, grad, f_star = random_quadratic(6, np.random.default_rng(3), cond=50.0)
    theta0 = np.random.default_rng(4).standard_normal(6)
    eta = 0.4 / L
    thetas, tildes = acco_gd_iterates(grad, theta0, eta, 40)
    assert np.array_equal(thetas, tildes)
    gd = [theta0]
    for _ in range(40):
        gd.append(gd[-1] - eta * grad(gd[-1]))
    np.testing.assert_allclose(thetas, np.array(gd), rtol=1e-12, atol=1e-12)


# --- the check can fail -------------------------------------------------------------------------


@pytest.mark.parametrize("eta_L, increases", [(0.5, False), (1.0, False), (1.2, False), (1.25, True), (1.5, True)])
def test_lyapunov_1d_increases_just_above_1_22_over_L(eta_L, increases):
    """f(θ) = ½θ² (L = 1), θ_0 = 1, θ̃_0 = −1.8: V_1 > V_0 once ηL exceeds ≈ 1.2238."""
    A, b = np.array([[1.0]]), np.array([0.0])
    inc = max_lyapunov_increase(A, b, eta_L, np.array([1.0]), 30, theta_tilde0=np.array([-1.8]))
    if increases:
        assert inc > 1e-3
    else:
        assert inc <= ROUNDOFF_RTOL


def test_lyapunov_increases_on_seeded_quadratic_with_drifted_streams():
    rng = np.random.default_rng(19)
    A, b, L, f, grad, f_star = random_quadratic(3, rng, cond=1000.0)
    theta0 = rng.standard_normal(3) * 10.0
    tilde0 = theta0 + rng.standard_normal(3) * 10.0
    assert max_lyapunov_increase(A, b, 0.5 / L, theta0, 100, tilde0) <= ROUNDOFF_RTOL
    assert max_lyapunov_increase(A, b, 1.0 / L, theta0, 100, tilde0) <= ROUNDOFF_RTOL
    assert max_lyapunov_increase(A, b, 1.3 / L, theta0, 100, tilde0) > 1e-3
    assert max_lyapunov_increase(A, b, 1.5 / L, theta0, 100, tilde0) > 1e-2


def test_lyapunov_increases_past_2_over_L_with_equal_start():
    rng = np.random.default_rng(0)
    A, b, L, f, grad, f_star = random_quadratic(8, rng, cond=100.0)
    theta0 = rng.standard_normal(8) * 10.0
    assert max_lyapunov_increase(A, b, 1.99 / L, theta0, 100) <= ROUNDOFF_RTOL
    assert max_lyapunov_increase(A, b, 2.1 / L, theta0, 100) > 1.0


# --- sanity -------------------------------------------------------------------------------------


@settings(max_examples=25, **_SETTINGS)
@given(
    dim=st.integers(2, 20),
    log10_cond=st.floats(0.0, 1.0),
    eta_frac=st.floats(0.2, 1.0),
    drifted=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_iterates_converge_to_minimizer(dim, log10_cond, eta_frac, drifted, seed):
    rng = np.random.default_rng(seed)
    A, b, L, f, grad, f_star = random_quadratic(dim, rng, cond=10.0**log10_cond)
    theta_star = np.linalg.solve(A, b)
    theta0, tilde0 = _starts(rng, dim, theta_star, 1.0, 1.0 if drifted else None)
    eta = eta_frac / (2.0 * L)
    # both streams contract like GD: the slowest mode decays as (1 − ηλ_min)^t
    steps = math.ceil(30.0 / (eta * np.linalg.eigvalsh(A).min()))
    thetas, tildes = acco_gd_iterates(grad, theta0, eta, steps, tilde0)
    dist0 = np.linalg.norm(theta0 - theta_star) + np.linalg.norm((theta0 if tilde0 is None else tilde0) - theta_star)
    tol = 1e-8 * dist0 + 1e-12 * (1.0 + np.linalg.norm(theta_star))
    assert np.linalg.norm(thetas[-1] - theta_star) <= tol
    assert np.linalg.norm(tildes[-1] - theta_star) <= tol
    assert f(thetas[-1]) - f_star <= 1e-10 * (1.0 + abs(f_star))


def test_lyapunov_matches_definition_and_vanishes_at_minimizer():
    A, b, L, f, grad, f_star = random_quadratic(5, np.random.default_rng(7), cond=20.0)
    theta_star = np.linalg.solve(A, b)
    assert abs(lyapunov(f, f_star, L, 0.3 / L, theta_star, theta_star)) <= 1e-12 * (1 + abs(f_star))
    th, tt = theta_star + 1.0, theta_star - 0.5
    eta = 0.3 / L
    expected = (f(th) - f_star) + eta * L * (f(tt) - f_star) + L * np.sum((th - tt) ** 2)
    assert lyapunov(f, f_star, L, eta, th, tt) == pytest.approx(expected, rel=1e-12)
    thetas, tildes = acco_gd_iterates(grad, th, eta, 10, tt)
    V = lyapunov_sequence(f, f_star, L, eta, thetas, tildes)
    assert V.shape == (11,) and np.all(np.diff(V) <= 1e-9 * V[0])
    assert theory.ROUNDOFF_RTOL == ROUNDOFF_RTOL
