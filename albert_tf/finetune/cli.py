"""The command-line side of fine-tuning scripts: flags generated from the settings dataclasses
and one run from them. Errors and exit codes: `albert_tf.cli`.

A script is a few lines (see scripts/run_classifier.py):

    define_finetune_flags(ClassificationData, CLASSIFIER)
    def main(argv):
        return run_from_flags(argv, ClassificationData, "classification", CLASSIFIER)
    cli.run(main)

With an `original` table (`albert_tf.finetune.original_flags`), the original google-research
script's flags are accepted too, with its meaning, or refused naming what to use instead.

The settings are validated and their local input paths checked before TensorFlow loads
(`settings_from_flags`; this module imports none of it), so a bad flag or a missing file is
reported within a second.
"""

import sys

from absl import flags

from albert_tf import input_paths, sources
from albert_tf.cli import load_tensorflow
from albert_tf.finetune import original_flags
from albert_tf.finetune.params import FinetuneParams, validate
from albert_tf.finetune.task import task_class
from albert_tf.finetune.task_data import INPUT_PATHS
from albert_tf.settings import InvalidFlagError, define_flags, from_flags


def define_finetune_flags(data_cls, original=None):
    """Declares the flags of `FinetuneParams` and of the task's data settings `data_cls` (and
    those of the `original` script's table that are not ours)."""
    define_flags(FinetuneParams)
    define_flags(data_cls)
    if original is not None:
        original_flags.define_original_flags(original)


def settings_from_flags(data_cls, original=None):
    """(FinetuneParams, `data_cls` settings) from the parsed flags, after the `original` script's
    flags are applied; raises InvalidFlagError naming a flag with an invalid value or an input
    path that does not exist."""
    if original is not None:
        original_flags.apply_original_flags(original, flags.FLAGS)
    params = from_flags(FinetuneParams)
    validate(params)
    data = from_flags(data_cls)
    if params.init_checkpoint:  # a name, address or handle is fetched once TensorFlow loads
        sources.check_spec("init_checkpoint", params.init_checkpoint, checkpoint=True)
    input_paths.check_fields(params, ("spm_model_file",))
    input_paths.check_fields(data, INPUT_PATHS)
    if params.preset and not params.spm_model_file:  # as the runner would, before TensorFlow
        raise InvalidFlagError("--spm_model_file is required: a preset has no spm.model")
    return params, data


def run_from_flags(argv, data_cls, kind, original=None):
    """`settings_from_flags` (before TensorFlow loads), then builds the task of `kind` (a key of
    `albert_tf.finetune.task.TASK_KINDS`), runs `run_finetuning` and prints where the outputs
    are."""
    del argv  # albert_tf.cli.run refuses positional arguments
    params, data = settings_from_flags(data_cls, original)
    load_tensorflow()
    from albert_tf.finetune.runner import run_finetuning

    task = task_class(kind)(data, seed=params.seed)
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
