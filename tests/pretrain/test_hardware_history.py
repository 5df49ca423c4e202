"""The hardware history of a run: segments merge only when the same hardware continues."""

from __future__ import annotations

from equibench.pretrain.hardware_history import continued, extended, summary


def test_segments_merge_only_when_the_same_hardware_continues():
    history = extended([], "cpu", 1, 10)
    history = extended(history, "cpu", 11, 12)
    assert history == [{"hardware": "cpu", "first_step": 1, "last_step": 12}]
    history = extended(history, "gpu", 13, 20)
    history = extended(history, "cpu", 21, 21)
    history = extended(history, "cpu", 23, 24)  # a gap: steps 22 were trained elsewhere
    assert [(s["hardware"], s["first_step"], s["last_step"]) for s in history] == [
        ("cpu", 1, 12), ("gpu", 13, 20), ("cpu", 21, 21), ("cpu", 23, 24)]
    assert extended(history, "gpu", 25, 24) == history  # no step trained: unchanged
    assert summary(history) == "cpu (steps 1-12, 21, 23-24); gpu (steps 13-20)"


def test_unrecorded_steps_and_a_continued_history():
    earlier = extended(extended([], None, 1, 5), "gpu", 6, 9)
    assert summary(earlier) == "hardware not recorded (steps 1-5); gpu (steps 6-9)"
    later = extended(extended([], "gpu", 1, 2), "cpu", 3, 3)
    assert summary(continued(earlier, later, 9)) == (
        "hardware not recorded (steps 1-5); gpu (steps 6-11); cpu (steps 12)")
    assert summary([]) == ""
