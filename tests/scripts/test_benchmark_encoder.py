"""scripts/benchmark_encoder.py: its table, and the per-round ratio column that shows the noise.

The script is the measurement behind the loop-against-unrolled figures in docs/model.md; these
runs use a tiny model (seconds), not the benchmark's sizes.
"""

import json
import os
import re
import textwrap

from script_support import REPO, run, run_python


def test_per_round_ratio_is_the_median_and_range_of_paired_steps():
    # Rounds of (wall, cpu): 1.0/1.0, 0.9/1.0, 2.8/2.0 -> ratios 1.0, 0.9, 1.4 (mean 1.1).
    code = textwrap.dedent("""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("benchmark_encoder", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(module._paired([(1.0, 5.0), (0.9, 5.0), (2.8, 5.0)], [(1.0, 1), (1.0, 1), (2.0, 1)]))
    """)
    result = run_python("-c", code, os.path.join(REPO, "scripts", "benchmark_encoder.py"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "1.000x (0.90-1.40x)"


def test_tiny_run_prints_one_row_per_mode_with_its_paired_ratio():
    result = run(
        "benchmark_encoder.py",
        "--preset=albert_tiny",
        "--layers=2",
        "--batch_size=2",
        "--seq_length=16",
        "--steps=2",
        "--xla=off",
        "--recompute",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 2 |")]
    cells = {row.split("|")[3].strip(): [c.strip() for c in row.split("|")[1:-1]] for row in rows}
    assert sorted(cells) == ["unrolled", "while_loop", "while_loop+recompute"], json.dumps(rows)
    assert cells["unrolled"][-1] == "1.000x (1.00-1.00x)"
    for mode in ("while_loop", "while_loop+recompute"):
        median, low, high = map(
            float, re.fullmatch(r"([\d.]+)x \(([\d.]+)-([\d.]+)x\)", cells[mode][-1]).groups()
        )
        assert low - 0.005 <= median <= high + 0.005, cells[mode]
