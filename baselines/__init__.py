"""The methods ``equibench evaluate`` runs (``equibench methods`` lists them). A method is chosen
by its name (``EvaluateConfig.methods``, ``--methods``), never imported: nothing here is public
API (docs/API.md)."""

__all__: list[str] = []
