"""The forward passes of a fitted PFN classifier: each ensemble member's test rows in
batches against the member's context, either through the whole network (``low_memory``) or
against the context's keys and values computed once (``fit_with_cache``)."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from ..devices import resolve_precision


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

    def _encode_contexts(self) -> list:
        """fit_with_cache: each member's train side (keys/values per layer), computed once."""
        model, dtype, autocast = self._network()
        contexts = []
        with torch.inference_mode(), self._mixed_precision(autocast):
            for transform, train_features in zip(self.transforms_, self.train_features_):
                x_train, y_train = self._member_context(dtype, transform, train_features)
                contexts.append(model.encode_context(x_train, y_train, len(self.classes_)))
        return contexts

    def _ensemble_proba(self, values) -> np.ndarray:
        """The average over members of softmax(logits / softmax_temperature) for the encoded
        test rows ``values`` (M rows): (M, K), columns in ``classes_`` order."""
        model, dtype, autocast = self._network()
        if self.fit_mode == "fit_with_cache" and getattr(self, "contexts_", None) is None:
            self.contexts_ = self._encode_contexts()  # after unpickling or load_from_fit_state
        contexts = self.contexts_ if self.fit_mode == "fit_with_cache" else [None] * len(self.transforms_)
        total = torch.zeros(values.shape[0], len(self.classes_), dtype=torch.float64)
        for transform, train_features, context in zip(self.transforms_, self.train_features_, contexts):
            test_features = transform.transform(values).to(dtype)  # (M, F)
            train = None if context is not None else self._member_context(dtype, transform, train_features)
            chunks = []
            with torch.inference_mode(), self._mixed_precision(autocast):
                for start in range(0, test_features.shape[0], self.batch_size):
                    x_test = test_features[start : start + self.batch_size].to(self.device_).unsqueeze(0)  # (1, m, F)
                    if context is not None:
                        logits = model.predict_in_context(context, x_test)[0]  # (m, K)
                    else:
                        logits = model.forward_chunked(*train, x_test, len(self.classes_))[0]  # (m, K)
                    chunks.append(torch.softmax(logits.double() / self.softmax_temperature, dim=-1).cpu())
            # (M, K) in the member's shifted class order -> classes_ order
            total += torch.roll(torch.cat(chunks), -transform.spec.class_shift, dims=-1)
        probabilities = (total / len(self.transforms_)).numpy()
        if not np.isfinite(probabilities).all():
            raise FloatingPointError(
                f"the model produced NaN or infinite probabilities for {int((~np.isfinite(probabilities)).any(axis=1).sum())} "
                "rows; its weights are not usable (a diverged training?): use another checkpoint"
            )
        return probabilities
