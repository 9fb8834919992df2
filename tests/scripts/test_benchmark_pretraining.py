"""scripts/benchmark_pretraining.py: the goal ratios it reports, and its one-line errors.

The measurement itself is not run here (TensorFlow start-up and ALBERT-base steps take
minutes; its smoke command is in the script's docstring).
"""

import os
import textwrap

from script_support import REPO, run, run_python


def test_goal_ratios_compare_the_default_with_the_best_peer_and_the_original():
    code = textwrap.dedent("""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("benchmark_pretraining", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        results = {
            "albert_tf default": {"first": 9.0, "steps": [1.0, 9.0, 1.0]},
            "albert_tf float32": {"first": 9.0, "steps": [2.5]},
            "HF torch float32": {"first": 1.0, "steps": [3.0]},
            "HF torch bf16 autocast": {"first": 1.0, "steps": [2.0]},
            "original float32": {"first": 1.0, "steps": [4.0, 4.0]},
        }
        print("\\n".join(module._goal_lines(results)))
        del results["original float32"]
        print("\\n".join(module._goal_lines(results)))
    """)
    result = run_python("-c", code, os.path.join(REPO, "scripts", "benchmark_pretraining.py"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == [
        "- albert_tf default / best peer: 0.50x (goal <= 0.7x: met)",
        "- albert_tf default / original float32: 0.25x (goal <= 0.5x: met)",
        "- albert_tf float32 / original float32: 0.62x (goal <= 0.8x: met)",
        "- albert_tf default / best peer: 0.50x (goal <= 0.7x: met)",
        "- albert_tf default / original float32: not measured (goal <= 0.5x)",
        "- albert_tf float32 / original float32: not measured (goal <= 0.8x)",
    ]


def test_bad_settings_are_one_line_errors(tmp_path):
    missing = str(tmp_path / "albert")
    cases = [
        (["--libraries=albert_tf,bogus"], "--libraries=albert_tf,bogus: expected some of"),
        ([f"--original_code_dir={missing}"], f"--original_code_dir={missing!r}: not found"),
        (
            ["--mode=throughput", "--train_batch_size=6", "--accumulation_steps=1,4"],
            "--train_batch_size=6 is not divisible by --accumulation_steps=4",
        ),
        (
            ["--mode=throughput", "--max_seq_lengths=128,1024"],
            "sequence length 1024 is above albert_base_v2's max_position_embeddings (512)",
        ),
    ]
    for args, says in cases:
        result = run("benchmark_pretraining.py", *args)
        assert result.returncode == 1, result.stderr[-3000:]
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmark_pretraining.py: error: "), lines
        assert says in lines[0], lines
