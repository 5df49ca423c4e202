"""Data shared by the classifier tests."""

import numpy as np


def blobs(n=80, n_features=4, n_classes=3, seed=0):
    """``n`` rows of ``n_classes`` well-separated Gaussian blobs, classes in turn: (X, y)."""
    rng = np.random.RandomState(seed)
    centres = rng.normal(scale=3, size=(n_classes, n_features))
    y = np.arange(n) % n_classes
    return centres[y] + rng.normal(size=(n, n_features)), y
