"""The two public classes, EquiTabPFNClassifier and TabPFNStarClassifier, and
:func:`classifier_for`, which picks the class for a checkpoint's architecture (with ECOC beyond
its class limit). The classes name ``equibench.classifier`` as their module, so that pickles and
OpenML flows name them ``equibench.classifier.<class>`` (the package exports them lazily).
"""

from __future__ import annotations

from ..errors import CheckpointError
from .checkpoints import shared_network
from .ecoc import ecoc_beyond
from .estimator import PFNClassifier, PretrainingLimitWarning
from .local_contexts import uses_local_context

__all__ = ["EquiTabPFNClassifier", "PretrainingLimitWarning", "TabPFNStarClassifier", "classifier_for"]


class EquiTabPFNClassifier(PFNClassifier):
    """EquiTabPFN as a scikit-learn classifier: exactly equivariant to the order of the
    classes, any number of classes, no training at fit time.

    Parameters
    ----------
    checkpoint : "default", name, path or model, default="default"
        "default" loads the pretrained EquiTabPFN checkpoint packaged with equibench; the
        name of a packaged checkpoint ("equitabpfn-small") loads that one; a path (str or
        ``pathlib.Path``) loads a file written by ``equibench pretrain``; an ``EquiTabPFN``
        module is copied and used as is.
    n_estimators : int, default=4
        Ensemble members. Member 0 keeps the feature order; the others rotate the feature
        columns by random shifts.
    feature_transforms : sequence of {"none", "quantile"}, default=("none", "quantile")
        Member i first applies ``feature_transforms[i % len(feature_transforms)]``: "none"
        keeps the raw values, "quantile" maps each feature to a normal distribution by its
        train quantiles. A robust z-score follows in both cases.
    categorical_encodings : sequence of {"ordinal", "onehot"}, default=("ordinal", "onehot")
        Member i presents categorical columns as
        ``categorical_encodings[(i // len(feature_transforms)) % len(categorical_encodings)]``,
        so the default 4 members pair each feature transform with each encoding:
        "ordinal" gives each category its code (0, 1, ...), "onehot" one 0/1 column per
        category for columns of 3 or more categories, fewest categories first, as long as
        the table stays within the network's 100 features (the others stay ordinal).
        One-hot lets the small network use categories with no order (identifiers, names);
        the ordinal code keeps an order the categories may have. Numeric tables are
        unaffected.
    device : str, default="auto"
        "auto" uses CUDA when available, else Apple's MPS when available, else CPU;
        "cpu", "cuda", "cuda:N" or "mps" name one. A device torch cannot use here is
        refused at fit. :meth:`to` moves a fitted classifier to another device.
    fit_mode : {"low_memory", "fit_with_cache", "fit_preprocessors"}, default="low_memory"
        "low_memory" runs the whole network for every test batch, in bounded memory
        (row- and slot-wise chunks; K=1000 classes fit in a few GB); "fit_preprocessors"
        (TabPFN's name) is the same. "fit_with_cache" keeps each context's keys/values per
        layer once computed (the shared context at fit; a local context when a predict first
        reaches it), so later predicts only run the test rows: much faster for repeated
        predicts (permutation importance, small batches), at the cost of memory of about
        2 x n_layers x context rows x (1+K) x d_model numbers per member and context
        (:meth:`estimate_cache_bytes`; refused at fit above ``cache_memory_limit_gb``). Both
        modes compute the same function: predictions agree to float32 rounding (1e-6).
    inference_precision : {"auto", "autocast"}, torch dtype or dtype name, default="auto"
        "auto": bfloat16 autocast on CUDA, float32 on CPU; "autocast": bfloat16 autocast
        on any device; a dtype ("float32", "float64", torch.float64, ...): weights and
        inputs in that dtype. float64 makes predictions independent of the batch
        composition to ~1e-15, for exactness checks.
    softmax_temperature : float, default=0.8
        Logits are divided by it before the softmax.
    max_train_rows : int, default=3000
        The context cap. Above this many training rows, ``context="auto"`` (the default)
        uses local contexts; ``context="subsample"`` makes a random subsample of this many
        rows the context (with a :class:`PretrainingLimitWarning`): stratified, so it keeps the
        table's class proportions, except that every class keeps at least
        ``preprocessing.CONTEXT_CLASS_FLOOR`` (10) rows (or all it has).
    ignore_pretraining_limits : bool, default=False
        If True, every training row is the context however many there are (memory and
        time grow with it) and no :class:`PretrainingLimitWarning` is issued for it. The
        network takes at most 100 features either way: dropping the others is still
        announced by that warning.
    categorical_features : array-like of int, bool or str, default=None
        Columns to treat as categorical besides the non-numeric ones, for instance
        integer-coded categories in an array: indices, a boolean mask, or column names of
        a data frame. They are encoded as ``categorical_encodings`` says; categories unseen
        at fit become missing (NaN when ordinal, all zeros when one-hot).
    batch_size : int, default=1024
        Test rows per forward pass; bounds memory (each pass re-reads the context).
    random_state : int, RandomState or None, default=0
        Seeds the subsample, the member shifts and the feature selection. The default is
        a fixed seed, so that two default fits give the same predictions (TabPFN defaults
        to 0, TabICL to 42): a deliberate departure from scikit-learn's None. None draws
        fresh randomness at every fit.
    cache_precision : {"auto", "float32", "bfloat16", "float16"}, default="auto"
        The dtype ``fit_mode="fit_with_cache"`` stores its cache in; "auto" keeps the
        inference dtype. "float16" and "bfloat16" halve float32's memory; each block casts
        the cached keys and values back to its compute dtype. Measured on wine, digits and
        100 classes (docs/BENCHMARKS.md): probabilities moved by at most about 1e-3 with
        float16 and 1e-2 with bfloat16, and no accuracy changed.
    cache_memory_limit_gb : float or None, default=4.0
        ``fit_mode="fit_with_cache"`` refuses at fit, before any preprocessing, a cache whose
        fit is estimated to peak above this many GB (1e9 bytes): the cache, built in
        ``cache_precision``, plus the working memory of building it (the token tensor and
        one layer's keys and values); the message names both and the alternatives. None: no
        limit.
    preprocessing : {"equibench", "official"}, default="equibench"
        "equibench": the ensemble preprocessing described in the Notes. "official": the
        preprocessing of the EquiTabPFN authors' one-member evaluation (the paper's tables;
        train-row normalisation, constant columns dropped, outlier squashing, x 100 / F), for
        their checkpoint converted by ``equibench convert-official``; needs
        ``n_estimators=1`` (docs/OFFICIAL_CHECKPOINT.md).
    context : {"auto", "subsample", "local"}, default="auto"
        Which training rows each test row sees. "subsample": one context for every test
        row, all training rows up to ``max_train_rows`` and a stratified subsample above.
        "local": at fit, the training rows are clustered by k-means (about
        ``local_cluster_size`` rows a cluster) and each cluster's context is the union of its
        rows' ``local_neighbors`` nearest training rows (Euclidean on the standardised encoded
        columns), nearest first, at most ``local_max_rows``; each test row is served by the
        context of the cluster of its nearest training row, and each member's feature
        transform is fitted on that context. A context holds only some classes: the others
        get probability 0 for its rows (EquiTabPFN: exact by equivariance; TabPFN*:
        error-correcting output codes within a context past its class limit). A row's
        prediction depends only on the fitted classifier and that row, never on the rows
        predicted with it. "auto": "local" above ``max_train_rows`` training rows (unless
        ``ignore_pretraining_limits``), "subsample" up to it, where it changes nothing.
        docs/EVALUATE.md says when local contexts pay and what they cost.
    local_neighbors : int, default=20
        With local contexts: the nearest training rows each training row of a cluster brings to
        the cluster's context.
    local_cluster_size : int, default=125
        With local contexts: the training rows per cluster; smaller clusters are more local and
        cost more (more contexts to run).
    local_max_rows : int, default=500
        With local contexts: the most rows of a context (the pretraining datasets had at most
        1,024); the nearest are kept.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels seen at fit, sorted; the columns of ``predict_proba``.
    n_features_in_ : int
        Number of columns of X at fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of X at fit, when X was a data frame (pandas, polars or any frame
        narwhals or the ``__dataframe__`` protocol reads) with string column names.
    model_ : torch.nn.Module
        This estimator's own copy of the network (no other estimator shares it).
    checkpoint_reference_ : dict or None
        The checkpoint file as pickles and fit states record it: ``{"packaged": name,
        "sha256": ...}`` or ``{"path": ..., "sha256": ...}``; None for a model object.
    device_ : torch.device
        The device the network runs on.
    encoder_ : TableEncoder
        The fitted column encoding and feature selection.
    context_ : {"subsample", "local"}
        The context strategy this fit uses (``context`` with "auto" resolved).
    strategy_ : SharedContext or LocalContexts
        The fitted context strategy (:mod:`equibench.classifier.contexts`): the training rows it
        uses as the encoder encodes them, their labels, the members' preprocessing, the
        contexts, the resolved parameters (temperature, fit mode, neighbours, cluster size) and,
        with ``fit_mode="fit_with_cache"``, the cached keys and values.
    inference_precision_, batch_size_
        ``inference_precision`` and ``batch_size`` as read at fit.

    Notes
    -----
    Preprocessing, fitted on the training rows: categorical/object/string columns are
    ordinal-encoded; NaN and +-inf reach the model's missing-value indicator; constant
    columns are dropped; above 100 features, the 100 with the highest mutual information
    with y are kept (with a :class:`PretrainingLimitWarning`); robust z-score with
    log-squashing beyond 4 std; rescale by 100 / features used; zero-padding to 100
    inside the model.

    Outputs: :meth:`predict_proba`, :meth:`predict_log_proba`, :meth:`predict_logits` (the
    members' average of logits / ``softmax_temperature``, as TabPFN's), :meth:`predict_raw_logits`
    (each member's logits before the temperature, (n_estimators, n_samples, n_classes)) and
    :meth:`get_embeddings` (the decoder's inputs per member).
    ``sample_weight`` is not supported: the network has no loss to weight, so
    ``fit(X, y, sample_weight=w)`` is refused with that reason, and scikit-learn's
    ``AdaBoostClassifier`` refuses these classifiers as base estimators; resample the rows
    in proportion to the weights instead.

    Persistence: ``pickle``/``joblib`` work; a classifier fitted with a packaged
    checkpoint pickles a reference (file name and sha256) instead of the network and
    loads it back from the installation. :meth:`save_fit_state` writes a weights-free
    state without pickle. ``skops.io`` cannot save these classifiers (it refuses the
    torch tensors of the fitted state): use :meth:`save_fit_state` instead.
    """

    __module__ = "equibench.classifier"  # pickles name the package (see the module docstring)
    _arch = "equitabpfn"
    _class_shifts = False  # the model is equivariant: rotating the classes changes nothing


class TabPFNStarClassifier(PFNClassifier):
    """TabPFN*, the non-equivariant comparison model, as a scikit-learn classifier.

    Same parameters, fitted attributes (documented there once; ``model_`` is a TabPFN* network)
    and preprocessing as :class:`EquiTabPFNClassifier`, except that ``checkpoint="default"`` is
    the packaged TabPFN* checkpoint; ensemble members additionally rotate the class ids (the
    model is not equivariant, so this averages over class orders). At most the checkpoint's
    ``max_classes`` classes (10 for the packaged one): :func:`classifier_for` wraps it in ECOC
    beyond that.

    Notes
    -----
    :meth:`get_embeddings` gives the decoder's inputs of shape (n_estimators, n_samples,
    d_model). Beyond ``max_classes``, :func:`classifier_for` returns an ``ECOCClassifier``:
    its ``predict_logits`` are the class scores whose softmax is its ``predict_proba`` and
    its ``get_embeddings`` stacks its single-member classifiers' embeddings, one per
    codebook row, (n_codebook_rows, n_samples, d_model).
    """

    __module__ = "equibench.classifier"
    _arch = "tabpfn-star"
    _class_shifts = True


#: The estimator class of each architecture (a network's ``arch``).
CLASSIFIERS = {classifier._arch: classifier for classifier in (EquiTabPFNClassifier, TabPFNStarClassifier)}


def classifier_for(checkpoint="default", n_classes: int | None = None, n_rows: int | None = None, **params):
    """The classifier for ``checkpoint``'s architecture: ``EquiTabPFNClassifier`` or
    ``TabPFNStarClassifier(checkpoint=checkpoint, **params)``.

    ``checkpoint`` is what the classifiers take: "default" (here the packaged EquiTabPFN),
    an architecture ("equitabpfn", "tabpfn-star": its packaged checkpoint), a packaged
    checkpoint's name ("tabpfn-star-small"), a file path or a model object. A bad one is a
    :class:`~equibench.errors.CheckpointError`. When ``n_classes`` exceeds the network's class
    limit (TabPFN*'s ``max_classes``; EquiTabPFN has none), the result is an
    ``ECOCClassifier`` of single-member classifiers whose redundancy is ``n_estimators``,
    seeded by ``random_state``; except when the classifier will use local contexts for
    ``n_rows`` training rows (``context`` "local", or "auto" above ``max_train_rows``): it then
    takes any number of classes itself, with ECOC only within a context past the limit.
    """
    network = shared_network(checkpoint)
    classifier = CLASSIFIERS.get(getattr(network, "arch", None))
    if classifier is None:
        raise CheckpointError(f"checkpoint is a {type(network).__name__}, not an EquiTabPFN or TabPFN* network")
    settings = {**PFNClassifier.__init__.__kwdefaults__, **params}
    local = n_rows is not None and uses_local_context(settings["context"], n_rows, settings["max_train_rows"],
                                                      settings["ignore_pretraining_limits"])
    if n_classes is None or network.class_limit is None or local:
        return classifier(checkpoint=checkpoint, **params)
    params.pop("n_estimators", None)
    return ecoc_beyond(lambda members: classifier(checkpoint=checkpoint, n_estimators=members, **params),
                       n_classes, network.class_limit, settings["n_estimators"], settings["random_state"])
