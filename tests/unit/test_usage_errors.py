"""A command line that click refuses is said in one line, naming the command's help, with
exit status 2 (click's own said it in four: usage, hint, blank line, error)."""

from __future__ import annotations

import pytest

from raydebug.cli.group import main


@pytest.mark.parametrize(("argv", "said"), [
    (["pause"], "raydebug: pause needs at least one SELECTOR term"),
    (["attach", "--bogus"], "raydebug: no such option '--bogus'"),
    (["nosuch"], "raydebug: no such command 'nosuch'"),
    (["ps", "--hubb", "x"], "raydebug: no such option '--hubb'"),
])
def test_a_refused_command_line_is_one_line_with_its_commands_help(
        argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["raydebug", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(said), err
    command = "raydebug" if argv == ["nosuch"] else f"raydebug {argv[0]}"
    assert err.rstrip().endswith(f"(`{command} --help` shows its usage)"), err
