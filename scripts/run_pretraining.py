"""Pretrains ALBERT (masked-LM + sentence-order prediction) with LAMB under any tf.distribute
strategy.

Flags keep the original run_pretraining.py names. Restarting the same command resumes from the
newest checkpoint in --output_dir. Examples:

  # the tiny CPU demo recipe
  python scripts/run_pretraining.py --flagfile=flags/pretrain_tiny_cpu.flags \
      --input_file=demo_output/data/train-*.tfrecord --output_dir=demo_output/pretrain

  # ALBERT-base as in the paper, on a Cloud TPU VM
  python scripts/run_pretraining.py --flagfile=flags/pretrain_albert_base_v2.flags \
      --input_file=gs://bucket/data/train-* --output_dir=gs://bucket/albert_base --tpu=local
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli, settings  # noqa: E402
from albert_tf.train.params import PretrainingParams, validate_params  # noqa: E402

# One flag per PretrainingParams field: names, defaults, help texts and choices live there.
settings.define_flags(PretrainingParams)
flags.adopt_module_key_flags(settings)  # listed by --help as this script's own flags


def params_from_flags():
    """PretrainingParams from the parsed flags; --seed=-1 (any negative seed) means unseeded."""
    seed = flags.FLAGS.seed
    return settings.from_flags(PretrainingParams, seed=None if seed < 0 else seed)


def main(argv):
    del argv  # cli.run refuses positional arguments
    params = params_from_flags()
    validate_params(params)  # before TensorFlow loads: input paths included
    cli.load_tensorflow()
    from albert_tf.train import runner

    result = runner.run_pretraining(params)  # errors and exit codes: albert_tf.cli
    logging.info(
        "Done at step %d. Checkpoints: %s  TensorBoard: %s%s",
        result["global_step"],
        os.path.dirname(result["checkpoint"] or params.output_dir),
        result["summaries"],
        f"  Export: {result['export']}" if "export" in result else "",
    )


if __name__ == "__main__":
    cli.run(main)
