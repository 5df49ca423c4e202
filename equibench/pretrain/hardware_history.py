"""Which hardware trained which steps of a run.

A history is a list of segments, oldest first, kept in the training state and the model card::

    [{"hardware": "1 x NVIDIA H200 (CUDA)", "first_step": 16301, "last_step": 25949}, ...]

``"hardware": None`` marks steps whose hardware was not recorded (those of a source checkpoint
whose card has no history).
"""

from __future__ import annotations

NOT_RECORDED = "hardware not recorded"


def extended(history: list[dict], hardware: str | None, first_step: int, last_step: int) -> list[dict]:
    """``history`` with steps ``first_step..last_step`` trained on ``hardware``; a segment that
    continues the last one on the same hardware lengthens it."""
    if last_step < first_step:
        return list(history)
    if history and history[-1]["hardware"] == hardware and history[-1]["last_step"] == first_step - 1:
        return [*history[:-1], {**history[-1], "last_step": last_step}]
    return [*history, {"hardware": hardware, "first_step": first_step, "last_step": last_step}]


def continued(earlier: list[dict], later: list[dict], offset: int) -> list[dict]:
    """``earlier`` followed by ``later`` renumbered to count on from step ``offset`` (a run
    continued from another's checkpoint)."""
    history = list(earlier)
    for segment in later:
        history = extended(history, segment["hardware"], segment["first_step"] + offset, segment["last_step"] + offset)
    return history


def summary(history: list[dict]) -> str:
    """One line naming each hardware (in order of first use) with its step ranges."""
    ranges: dict[str | None, list[str]] = {}
    for segment in history:
        first, last = segment["first_step"], segment["last_step"]
        ranges.setdefault(segment["hardware"], []).append(str(first) if first == last else f"{first}-{last}")
    return "; ".join(f"{hardware or NOT_RECORDED} (steps {', '.join(spans)})" for hardware, spans in ranges.items())
