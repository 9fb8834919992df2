"""Fine-tunes ALBERT on RACE (4-way multiple-choice reading comprehension) with keras.Model.fit.

The paper's recipe is in flags/race.flags (Table 14):

    python scripts/run_race.py --flagfile=flags/race.flags --init_checkpoint=pretrained/ \\
        --data_dir=race_data --output_dir=out/race --do_predict --export_dir=/models/race

--data_dir holds the release as downloaded: RACE/{train,dev,test}/{middle,high}/*.txt (one JSON
article per file; the original code's all.txt per level is read too); --high_only or
--middle_only keep one level. Every --save_checkpoints_steps steps the dev set is scored
(accuracy overall, middle and high) and a checkpoint is saved; the best weights by accuracy are
kept, saved as model.keras, used for the test predictions (predict_results.json) and, with
--export_dir, exported for TF Serving (article, question, options in; probabilities and the
answer's index out). Re-running the same command after an interruption resumes where it stopped.
Flags: albert_tf.finetune.params (training) and albert_tf.finetune.task_data.RaceData (data).
The original google-research/albert script's flags work too, with their meaning, or are refused
naming what to use instead (albert_tf/finetune/original_flags.py; docs/finetune.md).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, settings  # noqa: E402
from albert_tf.finetune.cli import define_finetune_flags, run_from_flags  # noqa: E402
from albert_tf.finetune.original_flags import RACE  # noqa: E402
from albert_tf.finetune.task_data import RaceData  # noqa: E402

define_finetune_flags(RaceData, RACE)
flags.adopt_module_key_flags(settings)  # listed by --help as this script's own flags


def main(argv):
    return run_from_flags(argv, RaceData, "race", RACE)


if __name__ == "__main__":
    cli.run(main)
