"""albert_tf.benchmarks: what the scripts/benchmark_*.py comparisons share (benchmark only).

`timing` measures first and steady steps alternating between libraries; `torch_peer` is the
Hugging Face / torch training step; `original_albert` runs the original google-research/albert
TF1 code (loaded from a checkout at run time, never shipped) as a peer; `conversion` times the
checkpoint converters; `op_profile` says where a TensorFlow function's time goes (its ops by
category, from the profiler's trace); `concurrency` runs closed-loop clients against a serving
predict and emulates TF Serving's server-side batching; `compute_bound` is a forward pass's
matmul FLOPs over this CPU's matmul rate. None of them imports torch, transformers or the
original code before it is used.
"""
