"""Target-equivariance error of PFN classifiers (the paper's "equivariance gap" figures).

Definition (paper, eq. "target permutation equivariance"): ``f`` is equivariant when
``sigma^-1(f(X, sigma(Y), X*)) == f(X, Y, X*)`` for every permutation ``sigma`` of the K
classes. ``equibench equivariance`` measures how far checkpoints are from that on prior
datasets with exactly K classes, for single networks and permutation ensembles, and PFN
methods run with the user's weights through their classifiers, and draws the paper's
equivariance-gap figure and its 9-point 3x3-grid illustration.

Modules: :mod:`.metric` (the arg-max change and log-probability comparison),
:mod:`.experiment` (prior datasets, measuring models over K and ensemble sizes),
:mod:`.methods` (the PFN methods with the user's weights),
:mod:`.toy` (the 9-point problem), :mod:`.figures` and :mod:`.files` (the results folder).
"""

from ..equivariance_metric import compare_log_probs, unpermute
from .experiment import EquivarianceConfig, draw_permutations, measure_equivariance, measure_model, prior_datasets
from .figures import plot_equivariance_gap, plot_nine_point_toy
from .files import run_equivariance
from .toy import TOY_ORDERINGS, nine_point_toy, toy_predictions

# The public names (docs/API.md); the other names imported above are internal.
__all__ = ["EquivarianceConfig", "measure_equivariance", "run_equivariance"]
