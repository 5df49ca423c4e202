"""The forward passes of a fitted PFN classifier: each ensemble member's test rows in
batches against the member's context, either through the whole network (``low_memory``) or
against the context's keys and values computed once (``fit_with_cache``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from ..devices import resolve_precision

#: ``cache_precision``: "auto" keeps the cache in the dtype it is computed in; a dtype name
#: stores it in that dtype (bfloat16 and float16 halve float32's memory).
CACHE_PRECISIONS = ("auto", "float32", "bfloat16", "float16")

#: test batches are padded to at least this many rows (see :func:`test_batches`)
MIN_TEST_ROWS = 16


class EnsemblePrediction:
    """Mixin of the estimators: the prediction plumbing over their fitted attributes
    (``model_``, ``device_``, ``transforms_``, ``train_features_``, ``train_labels_``,
    ``classes_`` and, with ``fit_with_cache``, ``contexts_``)."""

    def _network(self) -> tuple[nn.Module, torch.dtype, torch.dtype | None]:
        """The estimator's own network on ``device_`` in the precision's dtype (moved in
        place the first time), the input dtype and the autocast dtype."""
        dtype, autocast = resolve_precision(self.inference_precision, self.device_)
        self.model_ = self.model_.to(self.device_, dtype)
        return self.model_, dtype, autocast

    def _mixed_precision(self, autocast: torch.dtype | None):
        return torch.autocast(self.device_.type, dtype=autocast) if autocast else contextlib.nullcontext()

    def _member_context(self, dtype: torch.dtype, transform, train_features: torch.Tensor):
        """The member's training rows and shifted labels on the device: (1, N, F), (1, N)."""
        n_classes = len(self.classes_)
        x_train = train_features.to(self.device_, dtype).unsqueeze(0)
        y_train = ((self.train_labels_ + transform.spec.class_shift) % n_classes).to(self.device_).unsqueeze(0)
        return x_train, y_train

    def _cache_dtype(self) -> torch.dtype | None:
        """The dtype ``cache_precision`` stores the cache in; None: as computed (also for
        classifiers pickled before the parameter existed)."""
        precision = getattr(self, "cache_precision", "auto")
        return None if precision == "auto" else getattr(torch, precision)

    def _cache_storage_dtype(self) -> torch.dtype:
        """The cache's dtype: ``cache_precision``'s, else the inference dtype (an upper bound under autocast)."""
        return self._cache_dtype() or resolve_precision(self.inference_precision, self.device_)[0]

    def estimate_cache_bytes(self) -> int:
        """The bytes that ``fit_mode="fit_with_cache"`` keeps for this fitted context (whatever
        the fit_mode it was fitted with): per member, about 2 x layers x context rows x (1+K)
        x d_model numbers for EquiTabPFN (2 x blocks x rows x d_model for TabPFN*), in the
        cache's dtype. fit checks it against ``cache_memory_limit_gb`` before building the cache.
        With local contexts, the sum over the training clusters' contexts and their runs."""
        if getattr(self, "context_", "subsample") == "local":
            if getattr(self, "cluster_contexts_", None) is None:
                self._plan_clusters()
            return self._local_cache_numel() * self._cache_storage_dtype().itemsize
        return self._cache_bytes(len(self.train_labels_), len(self.transforms_))

    def _cache_bytes(self, n_rows: int, n_members: int) -> int:
        """The cache of ``n_members`` members over one context of ``n_rows`` rows, in bytes."""
        numel = self.model_.context_numel(n_rows, len(self.classes_))
        return n_members * numel * self._cache_storage_dtype().itemsize

    def _building_bytes(self, n_rows: int, n_classes: int) -> int:
        """The working memory of encoding one context of ``n_rows`` rows and ``n_classes``
        classes (besides the cache it keeps), in the compute dtype, in bytes."""
        compute = resolve_precision(self.inference_precision, self.device_)[0]
        return self.model_.building_numel(n_rows, n_classes) * compute.itemsize

    def _encode_contexts(self) -> list:
        """fit_with_cache: each member's train side (keys/values per layer), computed once and
        stored in ``cache_precision``'s dtype."""
        model, dtype, autocast = self._network()
        contexts = []
        with torch.inference_mode(), self._mixed_precision(autocast):
            for transform, train_features in zip(self.transforms_, self.train_features_):
                x_train, y_train = self._member_context(dtype, transform, train_features)
                contexts.append(model.encode_context(x_train, y_train, len(self.classes_),
                                                     store_dtype=self._cache_dtype()))  # stored as it is built
        return contexts

    def _member_outputs(self, values, embed: bool = False):
        """Per ensemble member, its transform and, for the encoded test rows ``values`` (M rows),
        on the CPU: its logits (M, K) in float64 and the member's class order, or with ``embed``
        the decoder's inputs, (M, 1+K, d) for EquiTabPFN and (M, d) for TabPFN*."""
        model, dtype, autocast = self._network()
        if self.fit_mode == "fit_with_cache" and getattr(self, "contexts_", None) is None:
            self.contexts_ = self._encode_contexts()  # after unpickling or load_from_fit_state
        contexts = self.contexts_ if self.fit_mode == "fit_with_cache" else [None] * len(self.transforms_)
        n_classes = len(self.classes_)
        for transform, train_features, context in zip(self.transforms_, self.train_features_, contexts):
            test_features = transform.transform(values).to(dtype)  # (M, F)
            train = None if context is not None else self._member_context(dtype, transform, train_features)
            chunks = []
            with torch.inference_mode(), self._mixed_precision(autocast):
                for x_test, n_real in test_batches(test_features, self.batch_size, self.device_):  # (1, m, F)
                    if context is not None:
                        run = model.embed_in_context if embed else model.predict_in_context
                        out = run(context, x_test)[0]
                    else:
                        run = model.embed_chunked if embed else model.forward_chunked
                        out = run(*train, x_test, n_classes)[0]
                    wide = torch.float64 if not embed or out.dtype == torch.float64 else torch.float32
                    chunks.append(out[:n_real].to("cpu", wide))
            yield transform, torch.cat(chunks)

    def _ensemble(self, values) -> dict[str, np.ndarray]:
        """For the encoded test rows ``values`` (M rows), each (M, K) in ``classes_`` order:
        "proba", the average over members of softmax(logits / softmax_temperature); "log_proba",
        its logarithm computed in log space; "logits", the members' average logits. With local
        contexts (``context_ == "local"``), per group of test rows (see :mod:`.local_prediction`)."""
        if getattr(self, "context_", "subsample") == "local":
            result = self._local_ensemble(values)
        else:
            member_logits = (torch.roll(logits, -transform.spec.class_shift, dims=-1)  # classes_ order
                             for transform, logits in self._member_outputs(values))
            result = combine_members(member_logits, self.softmax_temperature)
        broken = ~np.isfinite(result["proba"]).all(axis=1) | np.isnan(result["logits"]).any(axis=1)
        if broken.any():
            raise FloatingPointError(
                f"the model produced NaN or infinite probabilities for {int(broken.sum())} rows; its weights are not "
                "usable (a diverged training?): use another checkpoint"
            )
        return result

    def _raw_logits(self, values) -> np.ndarray:
        """Each member's logits for the encoded test rows, before the temperature: (n_estimators,
        M, K) in ``classes_`` order (-inf for a class a row's local context lacks)."""
        if getattr(self, "context_", "subsample") == "local":
            return self._local_raw_logits(values)
        return torch.stack([torch.roll(logits, -transform.spec.class_shift, dims=-1)
                            for transform, logits in self._member_outputs(values)]).numpy()

    def _embeddings(self, values) -> np.ndarray:
        """The decoder's inputs for the encoded test rows, per member: (n_estimators, M, 1+K, d)
        for EquiTabPFN (whose members never shift the classes: slot 1+k is ``classes_[k]``),
        (n_estimators, M, d) for TabPFN* (one token per row, whatever its members' class shifts)."""
        return torch.stack([embedded for _, embedded in self._member_outputs(values, embed=True)]).numpy()


def test_batches(x_test: torch.Tensor, batch_size: int, device) -> Iterator[tuple[torch.Tensor, int]]:
    """The test rows ``x_test`` (M, F) in batches (1, b, F) on ``device``, each with its number of
    real rows: a batch of fewer than ``MIN_TEST_ROWS`` rows is padded with copies of its last row,
    because float32 matrix products over a few rows take other kernels and round differently,
    and a row's prediction should not depend on the rows predicted with it."""
    for start in range(0, x_test.shape[0], batch_size):
        batch = x_test[start : start + batch_size]
        n_real = batch.shape[0]
        if n_real < MIN_TEST_ROWS:
            batch = torch.cat([batch, batch[-1:].expand(MIN_TEST_ROWS - n_real, -1)])
        yield batch.to(device).unsqueeze(0), n_real


def combine_members(member_logits, temperature: float) -> dict[str, np.ndarray]:
    """The ensemble of the members' logits, each (M, K) float64 in ``classes_`` order: "proba",
    the average of softmax(logits / temperature); "log_proba", its logarithm in log space;
    "logits", the average of logits / temperature (TabPFN's ``predict_logits``). A logit of
    -inf (a class a local context lacks) gives probability 0."""
    proba = log_proba = logits = None
    n_members = 0
    for member in member_logits:
        scaled = member / temperature
        member_proba, member_log = torch.softmax(scaled, dim=-1), torch.log_softmax(scaled, dim=-1)
        if proba is None:
            proba, log_proba, logits = member_proba, member_log, scaled
        else:
            proba, logits = proba + member_proba, logits + scaled
            log_proba = torch.logaddexp(log_proba, member_log)
        n_members += 1
    return {"proba": (proba / n_members).numpy(), "log_proba": (log_proba - np.log(n_members)).numpy(),
            "logits": (logits / n_members).numpy()}
