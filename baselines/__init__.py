"""Baseline methods for `equibench evaluate` (added with the evaluate command)."""
