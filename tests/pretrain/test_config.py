"""TrainConfig's checks, the rows curriculum, and which settings a resume may change."""

from __future__ import annotations

import pytest

from equibench.pretrain import pretrain
from equibench.prior import PriorConfig

from .common import PRIOR, log_records, step_losses, tiny_config


@pytest.mark.parametrize(
    "changes, message",
    [({"arch": "gpt"}, "arch"), ({"size": "huge"}, "size"), ({"steps": 0}, "steps"), ({"lr": 0.0}, "lr"),
     ({"model_overrides": {"d_model": 33}}, "divisible"), ({"schedule": "linear"}, "`schedule` must be one of"),
     ({"adam_beta2": 1.0}, "adam_beta2"), ({"decay_fraction": 0.0}, "decay_fraction"),
     ({"rows_curriculum": ((5, 64), (3, 96))}, "increasing steps"), ({"rows_curriculum": ((0, 64),)}, "positive")],
)
def test_train_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**changes)


def test_rows_curriculum_changes_the_rows_at_the_given_steps(tmp_path):
    pretrain(tiny_config(rows_curriculum=((3, 48), (5, 64))), PRIOR, tmp_path / "run", progress=False)
    assert [r["rows"] for r in log_records(tmp_path / "run") if r["kind"] == "step"] == [96, 96, 48, 48, 64, 64]


def test_resume_refuses_changed_settings_but_not_bookkeeping(tmp_path):
    pretrain(tiny_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"train\.lr"):
        pretrain(tiny_config(steps=1, checkpoint_every=1, lr=5e-4), PRIOR, tmp_path / "run", resume=True, progress=False)
    with pytest.raises(ValueError, match=r"prior\.rows"):
        pretrain(tiny_config(steps=1, checkpoint_every=1), PriorConfig(rows=128), tmp_path / "run", resume=True,
                 progress=False)
    # bookkeeping settings (checkpoint and validation cadence, device) may change on resume
    pretrain(tiny_config(steps=1, checkpoint_every=5, validate_every=7), PRIOR, tmp_path / "run", resume=True,
             progress=False)


@pytest.mark.parametrize("schedule, first_steps, extended, allowed", [
    ("schedule-free", 4, 8, True),  # no horizon: extendable at any step
    pytest.param("wsd", 10, 20, True, marks=pytest.mark.slow),  # 4 steps done, before the cool-down at step 5 (of 10) and 10 (of 20)
    ("cosine", 4, 8, False),  # the cosine horizon moved: refused
])
def test_extending_a_run(tmp_path, schedule, first_steps, extended, allowed):
    changes = {"schedule": schedule, "decay_fraction": 0.5, "checkpoint_every": 2, "validate_every": 100}
    straight = tmp_path / "straight"
    pretrain(tiny_config(steps=extended, **changes), PRIOR, straight, progress=False)
    pretrain(tiny_config(steps=first_steps, **changes), PRIOR, tmp_path / "run", progress=False, time_limit_s=0)
    for _ in range(3):  # one step per invocation, as time-limited slices do
        pretrain(tiny_config(steps=first_steps, **changes), PRIOR, tmp_path / "run", resume=True, progress=False,
                 time_limit_s=0)
    if not allowed:
        with pytest.raises(ValueError, match=r"train\.steps"):
            pretrain(tiny_config(steps=extended, **changes), PRIOR, tmp_path / "run", resume=True, progress=False)
        return
    pretrain(tiny_config(steps=extended, **changes), PRIOR, tmp_path / "run", resume=True, progress=False)
    assert step_losses(tmp_path / "run") == step_losses(straight)


def test_resume_may_change_the_curriculum_of_the_steps_to_come_only(tmp_path):
    changes = {"schedule": "schedule-free", "checkpoint_every": 2, "validate_every": 100}
    later = ((5, 48),)  # steps 5 and 6 get 48 rows; steps 1-4 keep the prior's 96
    straight = tmp_path / "straight"
    pretrain(tiny_config(rows_curriculum=later, **changes), PRIOR, straight, progress=False)
    pretrain(tiny_config(steps=4, **changes), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"train\.rows_curriculum"):  # would rewrite steps 3 and 4
        pretrain(tiny_config(rows_curriculum=((3, 48),), **changes), PRIOR, tmp_path / "run", resume=True,
                 progress=False)
    pretrain(tiny_config(rows_curriculum=later, **changes), PRIOR, tmp_path / "run", resume=True, progress=False)
    assert step_losses(tmp_path / "run") == step_losses(straight)
    assert [r["rows"] for r in log_records(tmp_path / "run") if r["kind"] == "step"] == [96] * 4 + [48] * 2
