"""Fine-tunes ALBERT for SQuAD v1.1 or v2.0 extractive question answering with keras.Model.fit.

The paper's recipes are in flags/squad_v1.flags and flags/squad_v2.flags (Table 14):

    python scripts/run_squad.py --flagfile=flags/squad_v1.flags --init_checkpoint=pretrained/ \\
        --train_file=squad/train-v1.1.json --predict_file=squad/dev-v1.1.json \\
        --output_dir=out/squad1 --export_dir=/models/squad1

Every --save_checkpoints_steps steps the --predict_file questions are answered and scored with
the official metrics (exact match and F1; for v2.0 also HasAns/NoAns and the best null-score
threshold); the best weights by F1 are kept, saved as model.keras, used to write
predictions.json, nbest_predictions.json (and null_odds.json) and, with --export_dir, exported
for TF Serving (raw question and context in, answer and character offsets out). Features are
cached as TFRecords keyed by the settings (--feature_cache_dir). Re-running the same command
after an interruption resumes where it stopped. Flags: albert_tf.finetune.params (training) and
albert_tf.finetune.task_data.SquadData (data).
The original google-research/albert script's flags work too, with their meaning, or are refused
naming what to use instead (albert_tf/finetune/original_flags.py; docs/finetune.md).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, settings  # noqa: E402
from albert_tf.finetune.cli import define_finetune_flags, run_from_flags  # noqa: E402
from albert_tf.finetune.original_flags import SQUAD  # noqa: E402
from albert_tf.finetune.task_data import SquadData  # noqa: E402

define_finetune_flags(SquadData, SQUAD)
flags.adopt_module_key_flags(settings)  # listed by --help as this script's own flags


def main(argv):
    return run_from_flags(argv, SquadData, "squad", SQUAD)


if __name__ == "__main__":
    cli.run(main)
