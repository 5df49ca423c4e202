"""Shell completion of ``--suite`` and ``--methods`` values: the callbacks, and the app wiring
them to the options the shell asks about."""

from __future__ import annotations

from typer.testing import CliRunner

from equibench.baselines.registry import METHODS
from equibench.cli import app
from equibench.cli.completion import complete_methods, complete_suite


def test_suite_completion_offers_the_builtin_suites_and_suite_files(tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text("tasks = [5]\n")
    (tmp_path / "mine.csv").write_text("a,b\n")
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "other.yaml").write_text("tasks: [5]\n")
    monkeypatch.chdir(tmp_path)
    assert [value for value, _ in complete_suite("")] == ["gt10", "le10", "demo", "large", "mine.toml"]
    assert complete_suite("le")[0] == ("le10", "76 tasks")
    assert [value for value, _ in complete_suite("m")] == ["mine.toml"]  # not the table file
    assert [value for value, _ in complete_suite("s")] == ["suites/"]
    assert [value for value, _ in complete_suite("suites/")] == ["suites/other.yaml"]
    assert complete_suite(str(tmp_path / "nowhere" / "x")) == []


def test_methods_completion_completes_the_last_name_of_the_list():
    names = [value for value, _ in complete_methods("")]
    assert names == ["all", "fast", *METHODS]
    assert ("knn", "KNN") in complete_methods("kn")
    completed = [value for value, _ in complete_methods("knn,tabpfn-")]
    assert completed and all(value.startswith("knn,tabpfn-") for value in completed)
    assert "knn,tabpfn-star" in completed
    assert [value for value, _ in complete_methods("knn,kn")] == []  # no repeats


def test_the_shell_gets_the_values_of_suite_and_methods():
    runner = CliRunner()
    env = {"_EQUIBENCH_COMPLETE": "complete_bash", "COMP_WORDS": "equibench evaluate --suite g", "COMP_CWORD": "3"}
    result = runner.invoke(app, [], prog_name="equibench", env=env)
    assert result.stdout.split() == ["gt10"]
    env.update(COMP_WORDS="equibench download --suite le", COMP_CWORD="3")
    assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["le10"]
    env.update(COMP_WORDS="equibench evaluate --methods knn,xg", COMP_CWORD="3")
    assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["knn,xgboost"]
