"""The commands under test, with tiny sizes: their inputs, their flags, and one uninterrupted
reference run each (a campaign job that every kill moment and fault of the command shares).

The helpers of the resume tests are reused (tests/train/train_support.py,
tests/finetune/finetune_support.py; tests/faults/conftest.py puts their folders on sys.path).
"""

import dataclasses
import json
from typing import Callable

from fault_support import REFERENCE_CPU, flag_list, run_script

TINY_CONFIG = {
    "vocab_size": 1000,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "hidden_act": "gelu",
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
FINETUNE_STEPS = 4  # a checkpoint and an evaluation every 2
PRETRAINING_STEPS = 6


@dataclasses.dataclass
class Reference:
    """An uninterrupted run of `script`: `args(output)` gives its flags for an output path."""

    script: str
    args: Callable
    output: str
    seconds: float
    cpu: float


def make_inputs(directory, corpus_file, spm_model_file):
    """Tiny inputs under `directory`: config, pretraining records, a pretrained model directory
    (with spm.model) and its Hugging Face copy, a model directory of another shape (without
    spm.model), TSV and CoNLL splits."""
    from finetune_support import write_tsv_splits
    from train_support import write_records

    from albert_tf.config import AlbertConfig
    from albert_tf.convert.huggingface import to_huggingface
    from albert_tf.models import model_dir
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    config_file = directory / "albert_config.json"
    config_file.write_text(json.dumps(TINY_CONFIG))
    pretrained = AlbertPretrainer(AlbertModel(AlbertConfig.from_dict(dict(TINY_CONFIG))))
    model_dir.save(pretrained, str(directory / "pretrained"), spm_model=spm_model_file)
    to_huggingface(pretrained, str(directory / "huggingface"))
    other = dict(TINY_CONFIG, hidden_size=48, intermediate_size=96)  # other shapes, no spm.model
    other_model = AlbertPretrainer(AlbertModel(AlbertConfig.from_dict(other)))
    model_dir.save(other_model, str(directory / "other"))
    records = [write_records(str(directory / f"train-{i}.tfrecord"), 64, seed=i) for i in (0, 1)]
    tsv, _ = write_tsv_splits(str(directory), corpus_file)
    return {
        "corpus": corpus_file,
        "spm": spm_model_file,
        "config": str(config_file),
        "records": ",".join(records),
        "eval_records": write_records(str(directory / "eval.tfrecord"), 32, seed=9),
        "pretrained": str(directory / "pretrained"),
        "other": str(directory / "other"),
        "huggingface": str(directory / "huggingface"),
        "tsv": tsv,
        "conll": _conll_splits(directory, corpus_file),
    }


def _conll_splits(directory, corpus_file, train=120, dev=40):
    """CoNLL train/dev files from corpus sentences: capitalised words are B-CAP, others O."""
    with open(corpus_file, encoding="utf-8") as f:
        sentences = [line.split() for line in f if 3 <= len(line.split()) <= 14]
    paths = {}
    for split, rows in (("train", sentences[:train]), ("dev", sentences[train : train + dev])):
        paths[split] = str(directory / f"{split}.conll")
        with open(paths[split], "w", encoding="utf-8") as f:
            f.write(
                "".join(
                    "".join(f"{w} {'B-CAP' if w[:1].isupper() else 'O'}\n" for w in s) + "\n"
                    for s in rows
                )
            )
    return paths


# ----------------------------------------------------------------------------- flags
def _create_pretraining_data(inputs):
    def args(output, seed=12345):
        return flag_list(
            input_file=inputs["corpus"],
            output_file=f"{output}/train",
            num_output_shards=2,
            spm_model_file=inputs["spm"],
            max_seq_length=32,
            max_predictions_per_seq=5,
            dupe_factor=3,
            random_seed=seed,
        )

    return args


def _run_pretraining(inputs):
    from train_support import PRED, SEQ, tiny_flags

    def args(output):
        records = {"config": inputs["config"], "train": inputs["records"]}
        return tiny_flags(
            records,
            str(output),
            num_train_steps=PRETRAINING_STEPS,
            save_checkpoints_steps=2,
            steps_per_loop=1,
            eval_input_files=inputs["eval_records"],
            eval_every_steps=2,
            max_eval_steps=2,
            export=True,
            jit_compile=False,
            max_seq_length=SEQ,
            max_predictions_per_seq=PRED,
        )

    return args


def _finetuning(inputs):
    return dict(
        init_checkpoint=inputs["pretrained"],
        num_train_steps=FINETUNE_STEPS,
        save_checkpoints_steps=2,
        train_batch_size=8,
        eval_batch_size=32,
        albert_dropout=0.1,
        classifier_dropout=0.1,
        verbose=0,
    )


def _run_classifier(inputs):
    from finetune_support import classifier_flags

    def args(output):
        return classifier_flags(
            inputs["tsv"], None, str(output), preset=None, **_finetuning(inputs)
        )

    return args


def _run_token_classifier(inputs):
    def args(output):
        return flag_list(
            train_file=inputs["conll"]["train"],
            dev_file=inputs["conll"]["dev"],
            max_seq_length=24,
            stride=8,
            learning_rate=1e-3,
            output_dir=output,
            **_finetuning(inputs),
        )

    return args


def _export_saved_model(inputs, campaign):
    model_dir = campaign.result(("run_classifier", "reference")).output

    def args(output):
        return flag_list(model_dir=model_dir, export_dir=output)

    return args


def _convert_checkpoint(inputs):
    def args(output):
        return flag_list(
            source_format="huggingface",
            input=inputs["huggingface"],
            output_dir=output,
            spm_model_file=inputs["spm"],
        )

    return args


COMMANDS = {  # command: (script, flags builder, output name, what it needs first)
    "create_pretraining_data": ("create_pretraining_data.py", _create_pretraining_data, "data", ()),
    "run_pretraining": ("run_pretraining.py", _run_pretraining, "run", ()),
    "run_classifier": ("run_classifier.py", _run_classifier, "run", ()),
    "run_token_classifier": ("run_token_classifier.py", _run_token_classifier, "run", ()),
    "export_saved_model": (
        "export_saved_model.py",
        _export_saved_model,
        "serving",
        ("run_classifier",),
    ),
    "convert_checkpoint": ("convert_checkpoint.py", _convert_checkpoint, "model", ()),
}


def add_reference(campaign, command, inputs):
    """Adds the reference run of `command` (and of what it needs) to the campaign."""
    needs = COMMANDS[command][3]
    for other in needs:
        add_reference(campaign, other, inputs)
    campaign.add((command, "reference"), _reference, campaign, command, inputs, reference=True)


def _reference(campaign, command, inputs):
    script, builder, name, needs = COMMANDS[command]
    args = builder(inputs, campaign) if needs else builder(inputs)
    output = str(campaign.mkdir(f"{command}_reference") / name)
    run = run_script(script, args(output))
    assert run.code == 0, f"the uninterrupted reference run failed: {run.describe()}"
    REFERENCE_CPU[command] = run.cpu
    return Reference(script, args, output, run.seconds, run.cpu)


def reference(campaign, command):
    """The finished reference run of `command` (waits for it)."""
    return campaign.result((command, "reference"))
