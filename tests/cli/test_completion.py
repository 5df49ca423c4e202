"""Shell completion of ``--suite``, ``--methods``, ``--contexts`` and ``--weights`` values: the
callbacks, and the app wiring them to the options the shell asks about."""

from __future__ import annotations

from typer.testing import CliRunner

from equibench.baselines.registry import FAST_METHODS, METHODS, weights_methods
from equibench.classifier.context_rules import CONTEXTS
from equibench.cli import app
from equibench.cli.completion import complete_contexts, complete_methods, complete_suite, complete_weights


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


def test_methods_completion_offers_all_first_only_and_nothing_fast_holds_after_fast():
    """`knn,all` runs every method: `all` is offered as the whole value only; after `all`
    nothing, after `fast` none of the methods it holds."""
    after_knn = [value for value, _ in complete_methods("knn,")]
    assert "knn,all" not in after_knn and "knn,fast" in after_knn and "knn,mlp" in after_knn
    assert complete_methods("knn,a") == [] and complete_methods("all,") == []
    after_fast = [value.removeprefix("fast,") for value, _ in complete_methods("fast,")]
    assert after_fast == [name for name in METHODS if name not in FAST_METHODS]


def test_contexts_completion_completes_the_last_strategy_of_the_list():
    assert [value for value, _ in complete_contexts("")] == list(CONTEXTS)
    assert [value for value, _ in complete_contexts("auto,")] == ["auto,subsample", "auto,local"]
    assert complete_contexts("auto,su")[0][0] == "auto,subsample" and complete_contexts("auto,au") == []


def test_weights_completion_offers_the_methods_then_their_files_or_folders(tmp_path, monkeypatch):
    (tmp_path / "tabicl.ckpt").write_bytes(b"")
    (tmp_path / "v2").mkdir()
    monkeypatch.chdir(tmp_path)
    assert [value for value, _ in complete_weights("")] == [f"{name}=" for name in weights_methods()]
    assert complete_weights("tabi") == [("tabicl=", METHODS["tabicl"].weights.what)]
    assert complete_weights("knn") == [] and complete_weights("knn=") == []  # takes no weights
    assert complete_weights("tabicl=") == [("tabicl=tabicl.ckpt", "file"), ("tabicl=v2/", "folder")]
    assert complete_weights("tabicl=t") == [("tabicl=tabicl.ckpt", "file")]
    assert complete_weights("tabpfn-v2=") == [("tabpfn-v2=v2/", "folder")]  # a folder: no files


def test_the_shell_gets_the_values_of_suite_and_methods():
    runner = CliRunner()
    env = {"_EQUIBENCH_COMPLETE": "complete_bash", "COMP_WORDS": "equibench evaluate --suite g", "COMP_CWORD": "3"}
    result = runner.invoke(app, [], prog_name="equibench", env=env)
    assert result.stdout.split() == ["gt10"]
    env.update(COMP_WORDS="equibench download --suite le", COMP_CWORD="3")
    assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["le10"]
    env.update(COMP_WORDS="equibench evaluate --methods knn,xg", COMP_CWORD="3")
    assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["knn,xgboost"]
    env.update(COMP_WORDS="equibench evaluate --contexts auto,l", COMP_CWORD="3")
    assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["auto,local"]
    for command in ("evaluate", "boundaries", "equivariance"):
        env.update(COMP_WORDS=f"equibench {command} --weights tabic", COMP_CWORD="3")
        assert runner.invoke(app, [], prog_name="equibench", env=env).stdout.split() == ["tabicl="], command
