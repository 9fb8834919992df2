"""The command-line side of fine-tuning scripts: flags generated from the settings dataclasses
and one run from them. Errors and exit codes: `albert_tf.cli`.

A script is a few lines (see scripts/run_classifier.py):

    define_finetune_flags(ClassificationData, CLASSIFIER)
    def main(argv):
        return run_from_flags(argv, ClassificationData, SentenceClassificationTask, CLASSIFIER)
    cli.run(main)

With an `original` table (`albert_tf.finetune.original_flags`), the original google-research
script's flags are accepted too, with its meaning, or refused naming what to use instead.
"""

import sys

from absl import flags

from albert_tf.finetune import original_flags
from albert_tf.finetune.params import FinetuneParams
from albert_tf.settings import define_flags, from_flags


def define_finetune_flags(data_cls, original=None):
    """Declares the flags of `FinetuneParams` and of the task's data settings `data_cls` (and
    those of the `original` script's table that are not ours)."""
    define_flags(FinetuneParams)
    define_flags(data_cls)
    if original is not None:
        original_flags.define_original_flags(original)


def run_from_flags(argv, data_cls, task_cls, original=None):
    """Applies the `original` script's flags (the table given to `define_finetune_flags`),
    builds the params and the task from the parsed flags, runs `run_finetuning` and prints
    where the outputs are."""
    del argv  # albert_tf.cli.run refuses positional arguments
    from albert_tf.finetune.runner import run_finetuning

    if original is not None:
        original_flags.apply_original_flags(original, flags.FLAGS)
    params = from_flags(FinetuneParams)
    task = task_cls(from_flags(data_cls), seed=params.seed)
    result = run_finetuning(params, task)
    best, verdict = result["best"], result.get("baseline_verdict")
    for warning in result.get("warnings", []):
        print(f"WARNING: {warning}", file=sys.stderr)
    print(
        f"done at step {result['global_step']}: "
        + (
            f"best {best['metric']} {best['value']:.4f} at step {best['step']}"
            + (
                f" (strongest simple baseline {verdict['baseline_value']:.4f}: "
                f"{verdict['baseline']})"
                if verdict
                else ""
            )
            if best
            else "no evaluation"
        )
        + f"; outputs in {params.output_dir}"
        + (f"; SavedModel {result['export']}" if result.get("export") else "")
    )
    return 0
