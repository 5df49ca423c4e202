"""The rules of a PFN's context that the classifiers and the evaluation settings share, in a
module light enough for both (no numpy, no torch)."""

#: The PFN context cap of the protocol: local contexts above it (context "auto"), or with
#: context "subsample" a stratified random subsample of this many rows.
MAX_TRAIN_ROWS = 3000
#: The PFN methods' context strategies (the classifiers' ``context``); "auto" is the default
#: variant (named by its ensemble size alone), the others add their name: ``n1-subsample``.
CONTEXTS = ("auto", "subsample", "local")
