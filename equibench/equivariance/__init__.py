"""Target-equivariance error of PFN classifiers (the paper's "equivariance gap" figures).

Definition (paper, eq. "target permutation equivariance"): ``f`` is equivariant when
``sigma^-1(f(X, sigma(Y), X*)) == f(X, Y, X*)`` for every permutation ``sigma`` of the K
classes. ``equibench equivariance`` measures how far checkpoints are from that on prior
datasets with exactly K classes, for single networks and permutation ensembles, and PFN
methods run with the user's weights through their classifiers, and draws the paper's
equivariance-gap figure and its 9-point 3x3-grid illustration.

The metric (the arg-max change and log-probability comparison, permutation ensembles) is
:mod:`equibench.equivariance_metric`, shared with pretraining's validation.
"""

from .experiment import EquivarianceConfig, measure_equivariance
from .files import run_equivariance

__all__ = ["EquivarianceConfig", "measure_equivariance", "run_equivariance"]  # public (docs/API.md)
