"""The neural baselines (MLP, rtdl-MLP, rtdl-ResNet, TabNet, STG, VIME) and their shared
training loop: learning, seeding, class alignment, early stopping, missing packages."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification
from sklearn.preprocessing import StandardScaler

from equibench.baselines.base import MissingDependencyError
from equibench.baselines.mlp import MLPMethod
from equibench.baselines.neural import fit_torch_classifier, holdout_split, minibatches, torch_seed
from equibench.baselines.rtdl_mlp import RtdlMLPMethod
from equibench.baselines.rtdl_resnet import RtdlResNetMethod
from equibench.baselines.stg import STGMethod
from equibench.baselines.tabnet import TabNetMethod
from equibench.baselines.vime import VIMEMethod
from equibench.evaluate.cells import reproducible_cell

# Few epochs keep the file fast; TabNet is ~10x slower per epoch than the others.
FAST = {
    MLPMethod: {"max_epochs": 60},
    RtdlMLPMethod: {"max_epochs": 20},
    RtdlResNetMethod: {"max_epochs": 20},
    STGMethod: {"max_epochs": 30},
    TabNetMethod: {"max_epochs": 15},
    VIMEMethod: {"max_epochs": 60, "pretrain_max_epochs": 10},
}
METHODS = list(FAST)
IDS = [cls.name for cls in METHODS]
N_CLASSES = 4


def _epochs(cls, max_epochs: int, pretrain: int) -> dict:
    """Settings of ``cls`` with these epochs (``pretrain``: VIME's self-supervised stage only)."""
    pretraining = {"pretrain_max_epochs": pretrain} if cls is VIMEMethod else {}
    return {"max_epochs": max_epochs, **pretraining}


def _data(seed=0, n=400):
    X, y = make_classification(
        n_samples=n, n_features=8, n_informative=4, n_redundant=0, n_classes=N_CLASSES,
        n_clusters_per_class=1, class_sep=2.0, random_state=seed,
    )
    return StandardScaler().fit_transform(X).astype(np.float32), y


X, Y = _data()
X_TR, Y_TR, X_VA, Y_VA, X_TE, Y_TE = X[:240], Y[:240], X[240:320], Y[240:320], X[320:], Y[320:]


@pytest.fixture(scope="module")
def twin_fits():
    """Each method fitted twice with the same seed on the same data (shared by tests)."""
    cache = {}

    def get(cls):
        if cls not in cache:
            cache[cls] = [cls(N_CLASSES, seed=3, **FAST[cls]).fit(X_TR, Y_TR, X_VA, Y_VA) for _ in range(2)]
        return cache[cls]

    return get


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_learns_valid_probabilities(cls, twin_fits):
    method = twin_fits(cls)[0]
    proba = method.predict_proba(X_TE)
    assert proba.shape == (len(X_TE), N_CLASSES)
    assert np.all(proba >= 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    accuracy = (proba.argmax(axis=1) == Y_TE).mean()
    constant = np.bincount(Y_TE).max() / len(Y_TE)  # the best constant predictor, ~0.3
    assert constant < 0.4
    assert accuracy >= 0.6, f"{cls.name}: accuracy {accuracy:.2f}"
    assert 1 <= method.epochs_trained_ <= FAST[cls]["max_epochs"]


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_same_seed_gives_identical_probabilities(cls, twin_fits):
    first, second = twin_fits(cls)
    proba = first.predict_proba(X_TE)
    np.testing.assert_array_equal(proba, second.predict_proba(X_TE))
    np.testing.assert_array_equal(proba, first.predict_proba(X_TE))  # no noise at predict time


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_a_cell_gives_the_same_probabilities_whatever_threads_its_process_has(cls):
    """Threads set the order of floating-point reductions, which training amplifies (TabNet's
    iris accuracy was 0.867 on 2 threads, 0.800 on 1): a cell always runs on its own."""
    from threadpoolctl import threadpool_limits

    probabilities, before = [], torch.get_num_threads()
    for process_threads in (2, 1):
        torch.set_num_threads(process_threads)
        try:
            with threadpool_limits(process_threads), reproducible_cell(1):
                assert torch.get_num_threads() == 1 and torch.are_deterministic_algorithms_enabled()
                probabilities.append(cls(N_CLASSES, seed=3, **FAST[cls]).fit(X_TR, Y_TR, X_VA, Y_VA).predict_proba(X_TE))
            assert torch.get_num_threads() == process_threads and not torch.are_deterministic_algorithms_enabled()
        finally:
            torch.set_num_threads(before)
    np.testing.assert_array_equal(*probabilities)


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_different_seed_gives_different_probabilities(cls):
    settings = _epochs(cls, 2, 2)
    a = cls(N_CLASSES, seed=0, **settings).fit(X_TR, Y_TR, X_VA, Y_VA).predict_proba(X_TE)
    b = cls(N_CLASSES, seed=1, **settings).fit(X_TR, Y_TR, X_VA, Y_VA).predict_proba(X_TE)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_fitted_method_pickles(cls, twin_fits):
    method = twin_fits(cls)[0]
    clone = pickle.loads(pickle.dumps(method))
    np.testing.assert_array_equal(clone.predict_proba(X_TE), method.predict_proba(X_TE))


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_classes_missing_from_train_and_validation(cls):
    """Task has 5 classes: class 4 never occurs, class 2 is absent from validation."""
    val_keep = Y_VA != 2
    settings = _epochs(cls, 3, 2)
    method = cls(5, seed=0, **settings).fit(X_TR, Y_TR, X_VA[val_keep], Y_VA[val_keep])
    proba = method.predict_proba(X_TE)
    assert proba.shape == (len(X_TE), 5)
    assert np.all(proba[:, 4] == 0)
    assert proba[:, 2].max() > 0  # seen in training, so predicted (values may underflow to 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_validation_rows_of_unseen_classes_and_no_validation(cls):
    """Train misses class 1 (a 10% holdout is used when no validation data is given)."""
    keep = Y_TR != 1
    settings = _epochs(cls, 3, 2)
    for X_val, y_val in [(X_VA, Y_VA), (None, None)]:
        method = cls(N_CLASSES, seed=0, **settings).fit(X_TR[keep], Y_TR[keep], X_val, y_val)
        proba = method.predict_proba(X_TE)
        assert proba.shape == (len(X_TE), N_CLASSES)
        assert np.all(proba[:, 1] == 0)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("cls", METHODS, ids=IDS)
def test_early_stopping_on_noise_labels(cls):
    """Random labels: the validation loss stops improving early, so training stops long
    before max_epochs (patience 3)."""
    rng = np.random.RandomState(0)
    y_noise = rng.randint(0, N_CLASSES, len(X_TR))
    y_val_noise = rng.randint(0, N_CLASSES, len(X_VA))
    max_epochs = 60 if cls is TabNetMethod else 300
    settings = {**_epochs(cls, max_epochs, 5), "patience": 3}
    method = cls(N_CLASSES, seed=0, **settings).fit(X_TR, y_noise, X_VA, y_val_noise)
    assert method.epochs_trained_ < max_epochs
    if hasattr(method, "log_"):
        log = method.log_
        assert log.stopped_early and log.epochs_trained == log.best_epoch + 1 + 3
        assert min(log.val_losses) == log.best_val_loss


def test_best_weights_are_restored():
    rng = np.random.RandomState(0)
    y_noise = rng.randint(0, N_CLASSES, len(X_TR))
    y_val_noise = rng.randint(0, N_CLASSES, len(X_VA))
    method = MLPMethod(N_CLASSES, seed=0, patience=3, lr=0.01).fit(X_TR, y_noise, X_VA, y_val_noise)
    assert method.log_.stopped_early
    proba = method.predict_proba(X_VA)
    val_loss = -np.mean(np.log(proba[np.arange(len(X_VA)), y_val_noise]))
    np.testing.assert_allclose(val_loss, method.log_.best_val_loss, rtol=1e-5)


def test_fit_leaves_global_rng_untouched():
    torch.manual_seed(123)
    np.random.seed(123)
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    MLPMethod(N_CLASSES, seed=0, max_epochs=2).fit(X_TR, Y_TR, X_VA, Y_VA)
    TabNetMethod(N_CLASSES, seed=0, max_epochs=1).fit(X_TR, Y_TR)
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], np_state[1])


def test_fit_torch_classifier_extra_loss_and_holdout():
    with torch_seed(0):
        module = torch.nn.Linear(8, N_CLASSES)
    calls = []

    def extra():
        calls.append(1)
        return module.weight.pow(2).sum() * 0.0

    log = fit_torch_classifier(module, X_TR, Y_TR, lr=1e-2, seed=0, max_epochs=2, extra_loss=extra)
    assert log.epochs_trained == 2 and len(log.val_losses) == 2
    assert len(calls) == 2 * 2  # 216 training rows after the 10% holdout: 2 batches per epoch


def test_holdout_split_is_stratified_seeded_and_keeps_every_class():
    y = np.array([0] * 50 + [1] * 30 + [2] * 1 + [3] * 2)
    train, val = holdout_split(y, seed=0)
    assert len(np.intersect1d(train, val)) == 0 and len(train) + len(val) == len(y)
    assert np.bincount(y[val], minlength=4).tolist() == [5, 3, 0, 0]
    assert set(y[train]) == {0, 1, 2, 3}
    np.testing.assert_array_equal(val, holdout_split(y, seed=0)[1])
    assert not np.array_equal(val, holdout_split(y, seed=1)[1])


def test_single_row_last_batch_is_merged():
    generator = torch.Generator().manual_seed(0)
    assert [len(b) for b in minibatches(257, 128, generator)] == [128, 129]
    assert [len(b) for b in minibatches(256, 128, generator)] == [128, 128]
    # batch-normalised networks then train on 129 rows (128 + 1) without error
    RtdlResNetMethod(N_CLASSES, seed=0, max_epochs=1).fit(X_TR[:129], Y_TR[:129], X_VA, Y_VA)
    TabNetMethod(N_CLASSES, seed=0, max_epochs=1).fit(X_TR[:129], Y_TR[:129], X_VA, Y_VA)


def test_stg_gates():
    method = STGMethod(N_CLASSES, seed=0, max_epochs=5).fit(X_TR, Y_TR, X_VA, Y_VA)
    gates = method.gate_values_
    assert gates.shape == (X_TR.shape[1],) and np.all((gates >= 0) & (gates <= 1))
    network = method.module_.gates
    network.train()
    noisy = network.gates()
    network.eval()
    assert not torch.equal(noisy, network.gates())
    with torch.no_grad():
        assert 0 < float(network.regularizer()) < 1


@pytest.mark.parametrize(
    "cls, modules, pip_name",
    [
        (RtdlMLPMethod, ["rtdl_revisiting_models"], "rtdl-revisiting-models"),
        (RtdlResNetMethod, ["rtdl_revisiting_models"], "rtdl-revisiting-models"),
        (TabNetMethod, ["pytorch_tabnet", "pytorch_tabnet.tab_model"], "pytorch-tabnet"),
    ],
    ids=["rtdl-mlp", "rtdl-resnet", "tabnet"],
)
def test_missing_package_raises_with_pip_hint(cls, modules, pip_name, monkeypatch):
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(MissingDependencyError) as info:
        cls(N_CLASSES, seed=0, max_epochs=1).fit(X_TR, Y_TR, X_VA, Y_VA)
    assert info.value.hint == f'pip install "{pip_name}"'
    assert pip_name in str(info.value) and cls.name in str(info.value)


def _linear_shapes(module):
    return [(m.in_features, m.out_features) for m in module.modules() if isinstance(m, torch.nn.Linear)]


def test_default_architectures_follow_tabzilla(twin_fits):
    F, K = X_TR.shape[1], N_CLASSES
    assert _linear_shapes(twin_fits(MLPMethod)[0].module_) == [(F, 30), (30, 30), (30, 30), (30, K)]
    assert _linear_shapes(twin_fits(RtdlMLPMethod)[0].module_) == [(F, 128), (128, 256), (256, 128), (128, K)]
    dropouts = [m.p for m in twin_fits(RtdlMLPMethod)[0].module_.modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts == [0.1, 0.1, 0.1]
    resnet = twin_fits(RtdlResNetMethod)[0].module_
    assert len(resnet.blocks) == 2
    assert _linear_shapes(resnet) == [(F, 128), (128, 256), (256, 128), (128, 256), (256, 128), (128, K)]
    assert [m.p for m in resnet.modules() if isinstance(m, torch.nn.Dropout)] == [0.25, 0.1, 0.25, 0.1]
    stg = twin_fits(STGMethod)[0].module_
    assert _linear_shapes(stg) == [(F, 60), (60, 20), (20, K)] and stg.gates.sigma == 0.5
    assert sum(isinstance(m, torch.nn.Tanh) for m in stg.modules()) == 2
    tabnet = twin_fits(TabNetMethod)[0].model_
    assert (tabnet.n_d, tabnet.n_a, tabnet.n_steps, tabnet.gamma) == (24, 24, 5, 1.5)
    assert (tabnet.n_independent, tabnet.n_shared, tabnet.momentum) == (3, 3, 0.015)
    assert (tabnet.mask_type, tabnet.batch_size, tabnet.verbose) == ("sparsemax", 128, 0)
    vime = twin_fits(VIMEMethod)[0].module_
    assert _linear_shapes(vime) == [(F, F), (F, 100), (100, 100), (100, K)]
    assert not any(p.requires_grad for p in vime.encoder.parameters())
