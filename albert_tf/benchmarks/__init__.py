"""albert_tf.benchmarks: what the scripts/benchmark_*.py comparisons share (benchmark only).

`timing` measures first and steady steps alternating between libraries; `torch_peer` is the
Hugging Face / torch training step; `original_albert` runs the original google-research/albert
TF1 code (loaded from a checkout at run time, never shipped) as a peer; `conversion` times the
checkpoint converters. None of them imports torch, transformers or the original code before it
is used.
"""
