"""Synthetic classification prior for pretraining (the TabPFN v1 / MotherNet prior).

A batch holds B datasets of R rows that share one class count K and one train/test split
point. Each dataset independently (probability ``1 - gp_fraction``) comes from a random MLP
structural causal model (:mod:`.mlp_scm`), otherwise from a Gaussian process with an RBF
kernel (:mod:`.gp`). With probability ``tree_fraction`` its target is then replaced by a sum
of random axis-aligned decision trees over its own features (:mod:`.trees`): the threshold
structure that real tables often have and smooth MLP/GP functions lack (TabICL and TabPFN v2
add tree-based SCMs for this).

The continuous target is cut into K classes at K-1 distinct random ranks (every class gets
rows) and the class ids are randomly permuted (:mod:`.classes`). With probability
``categorical_batch_prob`` a batch turns a random share of each dataset's features into
categoricals; optionally values go missing completely at random, and (``outlier_prob``) a
share of the datasets gets outlying cells after its target was drawn. A dataset uses 1..f_max
features, drawn uniformly (v1) or log-uniformly (``feature_counts``). Features are then
normalised with the train rows' statistics (``equibench.normalize``), rescaled by
``f_max / n_features`` and zero padded to ``f_max`` (:mod:`.features`).

:func:`sample_batch` (:mod:`.sample`) draws a batch; :class:`PriorConfig` holds every knob
(:mod:`.config`); :func:`preview_prior` draws a one-figure visual check (:mod:`.preview`).
"""

from __future__ import annotations

from .._lazy import lazy_exports

# Loaded on first use: the CLI reads PriorConfig's defaults without importing torch.
_LAZY = {
    "PriorBatch": "config", "PriorConfig": "config", "preview_prior": "preview",
    "draw_batch_seed": "sample", "sample_batch": "sample", "sample_batch_from_seed": "sample",
}

# The public names (docs/API.md); the others of _LAZY are importable but internal.
__all__ = ["PriorBatch", "PriorConfig", "preview_prior", "sample_batch"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
