"""scripts/benchmark_convert.py: the table behind docs/convert.md's conversion speed figures,
here on the tiny preset (seconds). test_fail_fast.py checks its flag errors."""

import re

from script_support import run


def test_tiny_run_prints_one_row_with_a_time_per_converter():
    result = run("benchmark_convert.py", "--presets=albert_tiny", "--repeats=2")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "median of 2 run(s)" in lines[0]
    header = "| preset (params incl. heads) | to_original | from_original | to_huggingface | "
    assert lines[2] == header + "from_huggingface |"
    rows = [line for line in lines if line.startswith("| albert_tiny")]
    assert len(rows) == 1, result.stdout
    assert re.fullmatch(r"\| albert_tiny \([\d.]+M\)( \| [\d.]+ s){4} \|", rows[0]), rows[0]
