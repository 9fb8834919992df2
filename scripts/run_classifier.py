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
(training) and albert_tf.finetune.classification.ClassificationData (data).
"""

from absl import app

from albert_tf.finetune import cli
from albert_tf.finetune.classification import ClassificationData, SentenceClassificationTask

cli.define_finetune_flags(ClassificationData)


def main(argv):
    return cli.run_from_flags(argv, ClassificationData, SentenceClassificationTask)


if __name__ == "__main__":
    app.run(main, flags_parser=cli.parse_flags_or_fail)
