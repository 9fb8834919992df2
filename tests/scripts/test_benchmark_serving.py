"""scripts/benchmark_serving.py on the tiny preset: the JSON it prints holds the compute bound,
the per-op profile, the concurrency sweep with and without server batching (HF rows are
skipped without torch). test_fail_fast.py checks its flag errors."""

import json

from script_support import run


def test_tiny_run_reports_bound_profile_and_concurrency(spm_model_file, tmp_path):
    result = run(
        "benchmark_serving.py",
        f"--spm_model_file={spm_model_file}",
        "--preset=albert_tiny",
        "--measure=peers,profile,concurrency",
        "--latency_reps=5",
        "--throughput_batches=1",
        "--profile_calls=3",
        "--clients=1,4",
        "--client_seconds=0.3",
        "--batching=4:1000:1",
        f"--work_dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout[result.stdout.index("\n{") :])
    for dtype in ("float32", "bfloat16"):
        assert out[f"serving_albert_tf_{dtype}"]["p50_ms"] > 0
        bound = out["compute_bound"][dtype]
        assert bound["matmul_gflop_per_s"] > 0 and bound["p50_over_bound"] > 1
        profile = out[f"profile_{dtype}"]
        assert profile["categories"]["matmul"] > 0 and profile["wall_ms"] > 0
        for label in ("no batching", "batching 4:1000:1"):
            figures = out[f"concurrency_{dtype}_{label}_4_clients"]
            assert figures["requests"] > 0 and figures["rejected"] == 0
            assert figures["p99_ms"] >= figures["p50_ms"] > 0
    assert out["compute_bound"]["tokens"] > 2
    assert out["bfloat16_agreement_with_float32"]["top1_agreement"] >= 0.9
