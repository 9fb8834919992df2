"""scripts/benchmark_encoder.py: its table, and the per-round ratio column that shows the noise.

The script is the measurement behind the loop-against-unrolled figures in docs/model.md; these
runs use a tiny model (seconds), not the benchmark's sizes.
"""

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


def test_tiny_run_prints_one_row_per_dropout_rate_and_mode_with_its_paired_ratio():
    result = run(
        "benchmark_encoder.py",
        "--preset=albert_tiny",
        "--layers=2",
        "--batch_size=2",
        "--max_seq_length=16",
        "--steps=2",
        "--xla=off",
        "--dropout=0,0.1",
        "--recompute",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 2 |")]
    cells = {}
    for row in rows:
        row_cells = [c.strip() for c in row.split("|")[1:-1]]
        cells[(row_cells[1], row_cells[3])] = row_cells
    modes = ["unrolled", "while_loop", "while_loop+recompute"]
    assert sorted(cells) == [(rate, mode) for rate in ("0", "0.1") for mode in modes], rows
    for (rate, mode), row_cells in cells.items():
        if mode == "unrolled":
            assert row_cells[-1] == "1.000x (1.00-1.00x)"
            continue
        median, low, high = map(
            float, re.fullmatch(r"([\d.]+)x \(([\d.]+)-([\d.]+)x\)", row_cells[-1]).groups()
        )
        assert low - 0.005 <= median <= high + 0.005, row_cells


def test_a_dropout_rate_outside_0_to_1_is_a_one_line_error():
    result = run("benchmark_encoder.py", "--dropout=0,1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "benchmark_encoder.py: error: --dropout must be a comma list of rates in [0, 1), got '0,1'"
    ]
