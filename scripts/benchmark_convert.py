"""Wall time of the checkpoint converters: to_original, from_original, to_huggingface and
from_huggingface on a randomly initialised model of each preset in --presets (no download, no
torch), each call --repeats times (the median is reported). The `from_*` times include building
the model. The checkpoints go to a temporary directory, deleted at the end.

    python scripts/benchmark_convert.py --presets=albert_base_v2,albert_large_v2
    python scripts/benchmark_convert.py --presets=albert_tiny     # a smoke run
"""

import os
import platform
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list(
    "presets", ["albert_base_v2", "albert_large_v2"], "AlbertConfig presets to convert."
)
flags.DEFINE_integer("repeats", 1, "Runs of each call per preset (the median is reported).", 1)


def main(argv):
    del argv
    from albert_tf.config import list_presets

    unknown = [p for p in FLAGS.presets if p not in list_presets()]
    if unknown or not FLAGS.presets:
        cli.fail(f"--presets: expected some of {', '.join(list_presets())}, got {unknown}")
    import tensorflow as tf

    from albert_tf.benchmarks import conversion

    results = []
    for preset in FLAGS.presets:
        with tempfile.TemporaryDirectory() as directory:
            results.append(conversion.measure(preset, directory, FLAGS.repeats))
    print(
        f"Converter wall time, median of {FLAGS.repeats} run(s); TF {tf.__version__}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}\n"
    )
    print(conversion.table(results))


if __name__ == "__main__":
    cli.run(main)
