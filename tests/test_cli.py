"""Every job answers a config mistake the same way: one `error:` line with Hydra's hint, exit 2, no traceback."""

from __future__ import annotations

import pytest

from lean_pool import check
from pipelines import autoformalize, evaluate, export, index, mine, report

GROUP_MISTAKES = [("preset=dmo", "Available options in 'preset': demo, none"),
                  ("llm=foo", "Available options in 'llm': openai, sim, vllm")]
ANY_MISTAKES = [("nonexistent_key=1", "nonexistent_key: no such key"),
                ("nonsense", "Error parsing override 'nonsense'")]
# Jobs with the preset and llm groups get those mistakes too; report, export and index have neither group.
CASES = [(main, *mistake) for main in (mine.main, autoformalize.main, evaluate.main) for mistake in GROUP_MISTAKES]
CASES += [(main, *mistake) for main in (mine.main, autoformalize.main, evaluate.main, report.main, export.main,
                                        index.main) for mistake in ANY_MISTAKES]


@pytest.mark.parametrize(("main", "override", "hint"), CASES)
def test_a_config_mistake_is_one_error_line_with_the_hint(main, override, hint, capsys):
    assert main([override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and hint in err, err


def test_the_check_cli_answers_a_config_mistake_the_same_way(tmp_path, capsys):
    assert check.main([str(tmp_path), "lean=simm"]) == 2
    err = capsys.readouterr().err
    assert err == "error: In 'check': Could not find 'lean/simm'; Available options in 'lean': kimina, repl, sim\n"
