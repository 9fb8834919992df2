"""Fine-tunes ALBERT to tag words (NER, chunking, POS) with keras.Model.fit.

CoNLL-2003 column files (word first, the tag in --tag_column, blank lines between sentences;
IOB1, IOB2 and IOBES tags are converted to IOB2) or JSON lines {"tokens": [...], "tags": [...]}:

    python scripts/run_token_classifier.py --train_file=conll/eng.train \\
        --dev_file=conll/eng.testa --init_checkpoint=pretrained/ --output_dir=out/ner \\
        --max_seq_length=128 --learning_rate=5e-5 --num_train_steps=3000 --export_dir=/models/ner

Every --save_checkpoints_steps steps the dev set is scored (entity precision, recall and F1 as
the CoNLL evaluation counts them, per type, and token accuracy) and a checkpoint is saved; the
best weights by entity F1 are kept, saved as model.keras and, with --export_dir, exported for
TF Serving (raw text in, entities with character offsets out; or pre-split words in, through
the `words` signature). Raw text is split into words as the training words were: on whitespace,
and punctuation off words when that gives back 99% of the training words (--word_split
overrides it; albert_tf.data.word_convention); the export's tags are compared with the dev
predictions. Re-running the same command after an interruption resumes where it stopped.
Flags: albert_tf.finetune.params (training) and albert_tf.finetune.task_data.TaggingData (data).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli, settings  # noqa: E402
from albert_tf.finetune.cli import define_finetune_flags, run_from_flags  # noqa: E402
from albert_tf.finetune.task_data import TaggingData  # noqa: E402

define_finetune_flags(TaggingData)
flags.adopt_module_key_flags(settings)  # listed by --help as this script's own flags


def main(argv):
    return run_from_flags(argv, TaggingData, "token_classification")


if __name__ == "__main__":
    cli.run(main)
