"""Context strategies: which training rows each test row sees, chosen once at fit.

A strategy holds what prediction needs besides the network: the training rows it may use
(encoded), their labels, the members' preprocessing, its *contexts* (each a set of those rows,
fixed at fit) and the rule that routes a test row to one context, which depends on that row
alone. So a row's prediction depends only on the fitted training data and that row.

Every context runs the network once per *run*: an ensemble member (TabPFN* rotating the class
ids) or, for TabPFN* with more classes in a context than it takes, one row of an
error-correcting codebook (:func:`.ecoc.decode`). Each run fits its member's feature transform
on the context's rows, as a classifier fitted on those rows alone would. The classes a context
lacks get probability 0 (EquiTabPFN: exactly the network on the present classes, by equivariance).

:class:`SharedContext` has one context for every row; :class:`.local_contexts.LocalContexts`
one per training cluster. A new strategy is a subclass that chooses its training rows,
plans its contexts (:meth:`ContextStrategy._plan`) and routes test rows (:meth:`ContextStrategy.route`).

Preparing a context (its runs' fitted transforms and transformed rows) and, with ``cached``
(``fit_mode="fit_with_cache"``), encoding it (the network's keys and values) happen once, when
a predict first reaches it or at fit (:attr:`ContextStrategy.prepare_at_fit`), and are kept;
otherwise each predict prepares the contexts it reaches and keeps nothing. Both modes compute
the same function: the cache only skips recomputing the training rows' side of the network.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import InvalidInputError
from ..model.inference import Context
from ..preprocessing import MemberSpec, MemberTransform, stratified_subsample
from .ecoc import best_codebook, decode
from .network_runs import NetworkRunner, combine_members
from .official_preprocessing import OfficialTransform
from .predict_progress import predict_progress

#: Codebooks drawn for a TabPFN* context past the class limit; the best is kept (as ECOCClassifier).
CODEBOOK_DRAWS = 20


@dataclass(frozen=True)
class Run:
    """One network pass over a context: a member's preprocessing, the context rows' labels for
    this pass (0..n_classes-1) and the class rotation to undo."""

    spec: MemberSpec
    labels: np.ndarray  # (n,)
    n_classes: int
    shift: int = 0


@dataclass(frozen=True)
class RunPlan:
    """The runs of one context, whose rows hold the classes ``present`` (positions in
    ``classes_``); with ``codebook`` (TabPFN* past its class limit), run i is codebook row i,
    whose symbols present in the context are ``symbols[i]``."""

    present: np.ndarray  # (k,)
    runs: list[Run]
    codebook: np.ndarray | None = None  # (rows, k)
    symbols: list[np.ndarray] | None = None


@dataclass
class PreparedRun:
    """A run's transform fitted on its context's rows, those rows transformed (N, F_used), and
    with the cache their keys and values (then the rows are dropped)."""

    transform: object
    x_train: torch.Tensor | None
    encoded: Context | None = None


class ContextStrategy:
    """What every strategy shares; subclasses plan the contexts and route the test rows."""

    name = ""
    #: prepare (and with the cache encode) every context at fit, not when a predict reaches it
    prepare_at_fit = False

    def __init__(self, *, n_members: int, n_classes: int, temperature: float, cached: bool,
                 cache_dtype: torch.dtype | None, class_limit: int | None, official: bool, f_max: int):
        self.n_members = n_members
        self.n_classes = n_classes
        self.temperature = temperature
        self.cached = cached
        self.cache_dtype = cache_dtype
        self.class_limit = class_limit
        self.official = official
        self.f_max = f_max
        self.contexts: list[np.ndarray] | None = None
        self.last_summary: dict[str, float] | None = None  # how the last predict's rows were served

    # -- fit -------------------------------------------------------------------------------

    def training_rows(self, labels: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        """The training rows (positions) this strategy may use, chosen before any preprocessing."""
        return np.arange(len(labels))

    def fit(self, values: np.ndarray, labels: np.ndarray, category_counts: list[int], specs: list[MemberSpec],
            seed: int, saved: dict[str, np.ndarray] | None = None) -> ContextStrategy:
        """Plan the contexts over the encoded training rows ``values`` (N, F) with ``labels`` (N,);
        ``specs``: the members' preprocessing; ``seed``: of the clusters and codebooks. Given
        ``saved``, the :meth:`state_arrays` of a fit state (load_fit_state), the contexts are read
        from it instead of planned."""
        self.values, self.labels, self.category_counts = values, labels.astype(np.int64), category_counts
        self.specs, self.seed = specs, seed
        self.contexts = self._plan(values, self.labels) if saved is None else self._restore_contexts(saved)
        self.prepared: dict[int, list[PreparedRun]] = {}
        return self

    def prepare(self, runner: NetworkRunner) -> None:
        """At fit: prepare (and with the cache encode) every context, where the strategy does so then."""
        if self.prepare_at_fit:
            for index in range(len(self.contexts)):
                plan = self.plan_runs(index)
                if len(plan.present) > 1:
                    self._prepared_runs(index, plan, runner)

    def _plan(self, values: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
        """The contexts: each an array of training-row positions."""
        raise NotImplementedError

    def training_row_contexts(self) -> np.ndarray:
        """The context that serves each training row (N,): one context for all here."""
        return np.zeros(len(self.labels), dtype=np.int64)

    def route(self, values: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The encoded test rows ``values`` (M, F) by context: (context, its rows' positions) for
        each context that serves rows; each row's context depends on that row alone."""
        raise NotImplementedError

    # -- runs ------------------------------------------------------------------------------

    def plan_runs(self, index: int) -> RunPlan:
        """The runs of context ``index``: one per member (TabPFN*'s rotating the classes), or past
        TabPFN*'s class limit one per row of a seeded codebook (the members' transforms in turn)."""
        present, labels = np.unique(self.labels[self.contexts[index]], return_inverse=True)
        n_local = len(present)
        codebook = self._codebook(n_local)
        if codebook is None:
            shifts = [spec.class_shift % n_local for spec in self.specs]
            return RunPlan(present, [Run(spec, (labels + shift) % n_local, n_local, shift)
                                     for spec, shift in zip(self.specs, shifts)])
        runs, symbols = [], []
        for index_row, row in enumerate(codebook):
            symbol_present, symbol_labels = np.unique(row[labels], return_inverse=True)
            unshifted = replace(self.specs[index_row % len(self.specs)], class_shift=0)
            runs.append(Run(unshifted, symbol_labels, len(symbol_present)))
            symbols.append(symbol_present)
        return RunPlan(present, runs, codebook, symbols)

    def _codebook(self, n_local: int) -> np.ndarray | None:
        """The codebook (rows, n_local) of a context of ``n_local`` classes, seeded by them; None
        within the network's class limit."""
        if self.class_limit is None or n_local <= self.class_limit:
            return None
        rng = np.random.RandomState((self.seed + n_local) % 2**32)
        return best_codebook(n_local, self.class_limit, float(self.n_members), CODEBOOK_DRAWS, rng)

    def _run_classes(self, index: int) -> list[int]:
        """The classes of each run of context ``index`` (none for a one-class context): as
        :meth:`plan_runs`, without the members' preprocessing."""
        present, labels = np.unique(self.labels[self.contexts[index]], return_inverse=True)
        if len(present) < 2:
            return []
        codebook = self._codebook(len(present))
        if codebook is None:
            return [len(present)] * self.n_members
        return [len(np.unique(row[labels])) for row in codebook]

    def member_transform(self, spec: MemberSpec):
        """A new (unfitted) feature transform of the member ``spec``."""
        return OfficialTransform(self.f_max) if self.official else MemberTransform(spec, self.f_max)

    def _prepared_runs(self, index: int, plan: RunPlan, runner: NetworkRunner) -> list[PreparedRun]:
        """Context ``index``'s prepared runs: kept ones, else fitted now (and kept with the cache
        or where the strategy prepares at fit)."""
        prepared = self.prepared.get(index)
        if prepared is None:
            rows = self.values[self.contexts[index]]
            prepared = []
            for run in plan.runs:
                transform = self.member_transform(run.spec)
                prepared.append(PreparedRun(transform, transform.fit_transform(rows, self.category_counts)))
        if self.cached:
            for run, ready in zip(plan.runs, prepared):
                if ready.encoded is None:  # encoded once; the transformed rows are not needed after
                    ready.encoded = runner.encode(ready.x_train, torch.from_numpy(run.labels), run.n_classes,
                                                  self.cache_dtype)
                    ready.x_train = None
        if self.cached or self.prepare_at_fit:
            self.prepared[index] = prepared
        return prepared

    def _run_outputs(self, runner: NetworkRunner, plan: RunPlan, prepared: list[PreparedRun],
                     test_values: np.ndarray, embed: bool = False) -> list[torch.Tensor]:
        """Each run's logits for the test rows (m, F) against a context's ``prepared`` runs, float64
        (m, n) with its class rotation undone, or with ``embed`` the decoder's inputs."""
        outputs = []
        for run, ready in zip(plan.runs, prepared):
            x_test = ready.transform.transform(test_values)  # (m, F_used)
            train = None if ready.encoded is not None else (ready.x_train, torch.from_numpy(run.labels))
            out = runner.run(x_test, run.n_classes, train=train, context=ready.encoded, embed=embed)
            outputs.append(out if embed else torch.roll(out, -run.shift, dims=-1))
        return outputs

    # -- outputs ---------------------------------------------------------------------------

    def outputs(self, runner: NetworkRunner, values: np.ndarray) -> dict[str, np.ndarray]:
        """For the encoded test rows ``values`` (M, F), each (M, K) in ``classes_`` order: "proba",
        the average over runs of softmax(logits / temperature) (or the codebook's decoding);
        "log_proba", its logarithm computed in log space; "logits", the runs' average scaled
        logits. A class absent from a row's context has probability 0 and logit -inf."""
        n_rows = values.shape[0]
        result = {"proba": np.zeros((n_rows, self.n_classes)), "log_proba": np.full((n_rows, self.n_classes), -np.inf),
                  "logits": np.full((n_rows, self.n_classes), -np.inf)}
        routes = self.route(values)
        self.last_summary = self.summary(routes)
        with predict_progress(n_rows) as advance:
            for index, all_rows in routes:
                plan = self.plan_runs(index)
                prepared = self._prepared_runs(index, plan, runner) if len(plan.present) > 1 else []
                for start in range(0, len(all_rows), runner.batch_size):  # a batch at a time, for the progress
                    rows = all_rows[start : start + runner.batch_size]
                    for name, array in self._context_outputs(runner, plan, prepared, values[rows]).items():
                        result[name][np.ix_(rows, plan.present)] = array
                    advance(len(rows))
        return result

    def _context_outputs(self, runner: NetworkRunner, plan: RunPlan, prepared: list[PreparedRun],
                         test_values: np.ndarray) -> dict[str, np.ndarray]:
        if len(plan.present) == 1:  # one class in the context: it is the answer
            ones = np.ones((len(test_values), 1))
            return {"proba": ones, "log_proba": 0 * ones, "logits": 0 * ones}
        logits = self._run_outputs(runner, plan, prepared, test_values)
        if plan.codebook is None:
            return combine_members(logits, self.temperature)
        symbol_probas = [(symbols, torch.softmax(run_logits / self.temperature, -1).numpy())
                         for symbols, run_logits in zip(plan.symbols, logits)]
        scores = torch.from_numpy(decode(plan.codebook, symbol_probas, self.class_limit))
        return {"proba": torch.softmax(scores, dim=-1).numpy(), "log_proba": torch.log_softmax(scores, dim=-1).numpy(),
                "logits": scores.numpy()}

    def raw_logits(self, runner: NetworkRunner, values: np.ndarray) -> np.ndarray:
        """Each member's logits before the temperature, (n_members, M, K) in ``classes_`` order,
        -inf for the classes a row's context lacks (0 for the one class of a one-class context).
        A context that went through output codes has no member logits: refused."""
        raw = np.full((len(self.specs), values.shape[0], self.n_classes), -np.inf)
        for index, rows in self.route(values):
            plan = self.plan_runs(index)
            if len(plan.present) == 1:
                raw[:, rows, plan.present[0]] = 0.0
                continue
            if plan.codebook is not None:
                raise InvalidInputError(
                    f"a local context of {len(plan.present)} classes went through output codes (TabPFN* takes at most "
                    f"{self.class_limit}), so its rows have no per-member logits; use predict_logits or predict_proba, "
                    "or context='subsample'"
                )
            prepared = self._prepared_runs(index, plan, runner)
            for member, logits in enumerate(self._run_outputs(runner, plan, prepared, values[rows])):
                raw[np.ix_([member], rows, plan.present)] = logits.numpy()[None]
        return raw

    def embeddings(self, runner: NetworkRunner, values: np.ndarray) -> np.ndarray:
        """The decoder's inputs per member; only where every row shares one context with every class."""
        raise InvalidInputError(
            "get_embeddings needs one context for every row, but this classifier uses local contexts (each with its "
            "own classes): fit it with context='subsample' to get embeddings"
        )

    # -- what it holds and costs -------------------------------------------------------------

    def summary(self, routes: list[tuple[int, np.ndarray]], y_codes: np.ndarray | None = None) -> dict[str, float]:
        """How the contexts serve test rows as :meth:`route` sends them, without running the network:
        "groups" (contexts reached), the mean "rows" and "classes" per context reached and, given
        the rows' classes as positions in ``classes_`` (-1: a class unseen at fit),
        "true_class_absent": the fraction of rows whose class is not in their context. The last
        predict's, without ``y``, is ``last_summary``."""
        present = [np.unique(self.labels[self.contexts[index]]) for index, _ in routes]
        summary = {"groups": len(routes), "rows": float(np.mean([len(self.contexts[i]) for i, _ in routes])),
                   "classes": float(np.mean([len(classes) for classes in present]))}
        if y_codes is not None:
            absent = sum(int((~np.isin(y_codes[rows], classes)).sum()) for (_, rows), classes in zip(routes, present))
            summary["true_class_absent"] = absent / sum(len(rows) for _, rows in routes)
        return summary

    def cache_plan(self, model) -> tuple[int, int, str]:
        """The cache of every context and run in numbers, the largest context's working numbers
        while encoding it, and what the contexts are (for the memory check's message)."""
        total = building = 0
        for index, rows in enumerate(self.contexts):
            classes = self._run_classes(index)
            total += sum(model.context_numel(len(rows), n) for n in classes)
            building = max([building] + [model.building_numel(len(rows), n) for n in classes])
        return total, building, self._describe()

    def _describe(self) -> str:
        """The contexts in a few words, for the memory check's message."""
        raise NotImplementedError

    def to(self, device: torch.device) -> None:
        """Move the kept keys and values to ``device``."""
        for prepared in self.prepared.values():
            for ready in prepared:
                if ready.encoded is not None:
                    ready.encoded = ready.encoded.to(device)

    def cached_contexts(self) -> list[Context]:
        """The keys and values kept so far (``fit_mode="fit_with_cache"``)."""
        return [ready.encoded for prepared in self.prepared.values() for ready in prepared if ready.encoded is not None]

    def __getstate__(self):
        state = dict(self.__dict__)  # the caches are rebuilt on first use; prepared rows kept where made at fit
        state["prepared"] = {index: [PreparedRun(ready.transform, ready.x_train) for ready in prepared]
                              for index, prepared in self.prepared.items() if self.prepare_at_fit
                              and all(ready.x_train is not None for ready in prepared)}
        return state

    # -- the fit state ---------------------------------------------------------------------

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The arrays that define this strategy's contexts (save_fit_state)."""
        return {"values": self.values, "labels": self.labels}

    def _restore_contexts(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The contexts saved in ``arrays``; planned again here (a strategy whose plan is costly reads them)."""
        return self._plan(self.values, self.labels)


class SharedContext(ContextStrategy):
    """One context for every test row: all training rows up to ``max_rows``, a stratified random
    subsample of ``max_rows`` above it (None: every row)."""

    name = "subsample"
    prepare_at_fit = True

    def __init__(self, *, max_rows: int | None, **common):
        super().__init__(**common)
        self.max_rows = max_rows

    def training_rows(self, labels: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        rows = stratified_subsample(labels, len(labels) if self.max_rows is None else self.max_rows, rng)
        self.contexts = [np.arange(len(rows))]  # planned already: the cache's size is known before preprocessing
        self.labels = labels[rows].astype(np.int64)
        return rows

    def _plan(self, values: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
        return [np.arange(len(labels))]

    def route(self, values: np.ndarray) -> list[tuple[int, np.ndarray]]:
        return [(0, np.arange(values.shape[0]))]

    def _describe(self) -> str:
        return f"{len(self.contexts[0])} context rows"

    def embeddings(self, runner: NetworkRunner, values: np.ndarray) -> np.ndarray:
        """(n_members, M, 1+K, d) for EquiTabPFN (whose members never rotate the classes: slot 1+k
        is ``classes_[k]``), (n_members, M, d) for TabPFN* (one token per row)."""
        plan = self.plan_runs(0)
        return torch.stack(self._run_outputs(runner, plan, self._prepared_runs(0, plan, runner), values,
                                             embed=True)).numpy()
