"""Fine-tunes ALBERT on a GLUE task or any labelled text file with keras.Model.fit.

The paper's recipes are in flags/glue_<task>.flags (Table 14):

    python scripts/run_classifier.py --flagfile=flags/glue_mrpc.flags \\
        --init_checkpoint=pretrained/ --data_dir=glue_data --output_dir=out/mrpc

Any CSV/TSV/JSONL file with named columns:

    python scripts/run_classifier.py --task_name=reviews --train_file=train.csv \\
        --dev_file=dev.csv --text_column=review --label_column=stars --init_checkpoint=pretrained/

Every --save_checkpoints_steps steps the dev set is scored with the task's metrics
(eval_results.json) and a checkpoint is saved; the best weights by the task's main metric are
kept, saved as model.keras and, with --export_dir, exported for TF Serving. Re-running the same
command after an interruption resumes where it stopped. Flags: albert_tf.finetune.params
(training) and albert_tf.finetune.task_data.ClassificationData (data).
The original google-research/albert script's flags work too, with their meaning, or are refused
naming what to use instead (albert_tf/finetune/original_flags.py; docs/finetune.md).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, settings  # noqa: E402
from albert_tf.finetune.cli import define_finetune_flags, run_from_flags  # noqa: E402
from albert_tf.finetune.original_flags import CLASSIFIER  # noqa: E402
from albert_tf.finetune.task_data import ClassificationData  # noqa: E402

define_finetune_flags(ClassificationData, CLASSIFIER)
flags.adopt_module_key_flags(settings)  # listed by --help as this script's own flags


def main(argv):
    return run_from_flags(argv, ClassificationData, "classification", CLASSIFIER)


if __name__ == "__main__":
    cli.run(main)
