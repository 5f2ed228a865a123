"""`specviz bench endpoint` refuses bad input with one line saying what to change, before any
request is sent."""

from __future__ import annotations

import pytest

from specviz.cli import main

DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--endpoint", "127.0.0.1:8000"], "http(s) URL"),
        (["--endpoint", DOWN, "--draft", "x"], "--draft sets up local models"),
        (["--endpoint", DOWN, "--drafters", "ngram"], "--drafters sets up local models"),
        (["--baseline-result", "x.json"], "add it"),
        (["--endpoint", DOWN, "--baseline-result", "missing.json"], "no such file"),
        (["--endpoint", DOWN, "--baseline-endpoint", DOWN, "--baseline-result", "x"], "once"),
        (["--endpoint", DOWN, "--concurrency", "0,2"], "--concurrency must be"),
        (["--endpoint", DOWN, "--warmup", "0"], "--warmup must be"),
        (["--endpoint", DOWN, "--request-fields", "[1]"], "JSON object"),
        (["--endpoint", DOWN, "--request-fields", "{bad"], "not JSON"),
        (["--endpoint", DOWN], "is the server up"),
    ],
)
def test_bad_flags_exit_2_with_a_message(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    argv = ["bench", "endpoint", "--out", "/dev/null", "--html", "/dev/null", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1
