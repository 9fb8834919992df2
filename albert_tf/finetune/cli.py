"""The command-line side of fine-tuning scripts: flags generated from the settings dataclasses,
and expected errors as one line on stderr with exit code 1 (no traceback).

A script is three lines (see scripts/run_classifier.py):

    define_finetune_flags(ClassificationData)
    def main(argv): return run_from_flags(argv, ClassificationData, SentenceClassificationTask)
    app.run(main)

Exit codes: 0 done, 1 bad flags or data (the message names the flag, file or line), 143 stopped
by SIGTERM or Ctrl-C after saving a checkpoint (re-run the same command to resume).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up noise

from absl import flags, logging  # noqa: E402

from albert_tf.finetune.params import FinetuneParams  # noqa: E402
from albert_tf.settings import InvalidFlagError, define_flags, from_flags  # noqa: E402

PREEMPTED_EXIT_CODE = 143


def define_finetune_flags(data_cls):
    """Declares the flags of `FinetuneParams` and of the task's data settings `data_cls`."""
    define_flags(FinetuneParams)
    define_flags(data_cls)


def fail(message):
    """Prints `script: error: message` on stderr and exits with code 1."""
    print(f"{os.path.basename(sys.argv[0])}: error: {message}", file=sys.stderr)
    sys.exit(1)


def expected_errors():
    """The exception types that are the user's to fix (reported in one line)."""
    from albert_tf.data.task_spec import DataError
    from albert_tf.train.strategy import StrategyError

    return (InvalidFlagError, DataError, FileNotFoundError, StrategyError, PermissionError)


def run_from_flags(argv, data_cls, task_cls):
    """Builds the params and the task from the parsed flags and runs `run_finetuning`."""
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    from albert_tf.finetune.runner import Preempted, run_finetuning

    params = from_flags(FinetuneParams)
    task = task_cls(from_flags(data_cls), seed=params.seed)
    try:
        result = run_finetuning(params, task)
    except Preempted as e:
        logging.warning("%s; re-run the same command to resume", e)
        sys.exit(PREEMPTED_EXIT_CODE)
    except expected_errors() as e:
        fail(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    best = result["best"]
    print(f"done at step {result['global_step']}: "
          + (f"best {best['metric']} {best['value']:.4f} at step {best['step']}"
             if best else "no evaluation") + f"; outputs in {params.output_dir}"
          + (f"; SavedModel {result['export']}" if result.get("export") else ""))
    return 0


def parse_flags_or_fail(argv):
    """absl's flag parser, with a bad flag reported first and in one line (no help dump)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        fail(str(e))
