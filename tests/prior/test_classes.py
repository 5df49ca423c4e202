"""Tests of the class assignment and loss mask (equibench.prior.classes)."""

from __future__ import annotations

from equibench.prior import PriorConfig


def test_loss_mask_flags_exactly_the_datasets_with_test_classes_unseen_in_train(draw):
    # few rows, few train rows and many classes: many datasets miss a class in train
    config = PriorConfig(rows=24, p_binary=0.0, min_train_fraction=0.1, max_train_fraction=0.4)
    n_masked = n_kept = 0
    for seed in range(10):
        batch = draw(config, batch_size=16, seed=seed)
        for i in range(16):
            train = set(batch.y[i, :batch.n_train].tolist())
            test = set(batch.y[i, batch.n_train:].tolist())
            unseen = bool(test - train)
            if bool(batch.loss_mask[i]):
                assert not unseen
                n_kept += 1
            else:
                # masked: an unseen test class, or an MLP that overflowed (zeroed features)
                assert unseen or bool((batch.x[i] == 0).all())
                n_masked += 1
    assert n_masked > 0 and n_kept > 0
