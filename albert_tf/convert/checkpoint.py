"""One call for scripts/convert_checkpoint.py: read a model in one format, write it in another.

>>> from albert_tf.convert.checkpoint import convert_checkpoint
>>> convert_checkpoint("original", "albert_base/model.ckpt-best", "albert_base_tf2",
...                    spm_model="albert_base/30k-clean.model")  # doctest: +SKIP

Fine-tuned heads (`AlbertClassifier`, `AlbertTokenClassifier`, `AlbertQuestionAnswerer`,
`AlbertMultipleChoice`) convert between a Hugging Face AlbertForSequenceClassification /
AlbertForTokenClassification / AlbertForQuestionAnswering / AlbertForMultipleChoice directory and
an albert_tf head directory: `model.keras` (the whole model, as the fine-tuning runner saves it)
beside the backbone directory that `albert_tf.models.model_dir.save` writes (config.json,
backbone.weights.h5, optionally spm.model), so `AlbertClassifier.from_pretrained(directory)` can
also start from it. Fine-tuned SQuAD heads (`AlbertQuestionAnswerer`, `AlbertSquadV2Model`) also
convert to and from the original's TF1 checkpoints (run_squad_v1.py / run_squad_v2.py).

A keras-hub preset directory (`save_to_preset` of an AlbertBackbone, AlbertMaskedLM or
AlbertTextClassifier; `albert_tf.convert.keras_hub`) converts both ways: into an AlbertPretrainer
or, from an AlbertTextClassifier, an AlbertClassifier; an AlbertPretrainer or AlbertClassifier
is written as a preset that keras-hub loads unchanged, with the model's SentencePiece model as
its tokenizer.

An albert_tf directory records the text settings its ids follow (text.json, see
`albert_tf.models.model_dir`): tex_quotes=True when converted from Hugging Face (its
`AlbertTokenizer` replaces `` and '' by "), False from the original's checkpoints; lower_case and
albert_rules False from a keras-hub preset (its tokenizer feeds the text to SentencePiece as it
is), see `source_text_settings`.
"""

import os

from absl import logging

SOURCE_FORMATS = ("original", "huggingface", "albert_tf", "keras_hub", "tfhub")
TARGET_FORMATS = ("albert_tf", "huggingface", "original", "keras_hub")
# Formats that carry the SentencePiece model (spm_model), and so the model's text settings.
VOCABULARY_FORMATS = ("albert_tf", "keras_hub", "tfhub")
HEAD_MODEL_FILE = "model.keras"  # = albert_tf.models.model_dir.HEAD_MODEL_FILE, the name the
# fine-tuning runner saves too (kept here: this module imports without TensorFlow)


def head_model_file(path):
    """The `.keras` file of a saved head model at `path` (the file or its directory), or None."""
    import tensorflow as tf

    if path.endswith(".keras"):
        return path if tf.io.gfile.exists(path) else None
    candidate = f"{path.rstrip('/')}/{HEAD_MODEL_FILE}"
    return candidate if tf.io.gfile.exists(candidate) else None


def load_head_model(path, dtype=None):
    """The fine-tuned head model (an `AlbertHeadModel`) saved at `path` (a .keras file or a
    directory holding model.keras), uncompiled, computing in `dtype` (default: the global Keras
    policy, float32 unless set; `head_model.load_fine_tuned`)."""
    # Imported to register the head model classes for deserialization.
    from albert_tf.models import classifier, multiple_choice, question_answering, token_classifier  # noqa: F401
    from albert_tf.models.head_model import AlbertHeadModel, load_fine_tuned

    keras_file = head_model_file(path)
    if keras_file is None:
        raise FileNotFoundError(f"No {HEAD_MODEL_FILE} at {path}")
    model = load_fine_tuned(keras_file, dtype)
    if not isinstance(model, AlbertHeadModel):
        raise ValueError(
            f"{path}: {HEAD_MODEL_FILE} holds a {type(model).__name__}, not a "
            f"fine-tuned head model (AlbertHeadModel)"
        )
    return model


def save_head_model(
    model, directory, spm_model=None, tex_quotes=False, lower_case=None, albert_rules=True
):
    """Writes a head model as `directory/model.keras` plus its backbone directory, as one
    directory written whole (`model_dir.save`, which records the text settings)."""
    from albert_tf.models import model_dir

    model_dir.save(
        model.backbone,
        directory,
        spm_model=spm_model,
        extra_files={HEAD_MODEL_FILE: model.save},
        tex_quotes=tex_quotes,
        lower_case=lower_case,
        albert_rules=albert_rules,
    )
    logging.info(
        "Saved %s (%s and its backbone) to %s", type(model).__name__, HEAD_MODEL_FILE, directory
    )


def _is_huggingface_head(path, ignore_variables):
    """Whether `path` is an HF fine-tuned head to keep (its classifier is not ignored)."""
    import re

    from albert_tf.convert.huggingface import (
        HEAD_ARCHITECTURES,
        head_weight,
        huggingface_architecture,
    )

    architecture = huggingface_architecture(path)
    if architecture not in HEAD_ARCHITECTURES:
        return False
    return not any(re.search(p, head_weight(architecture)) for p in ignore_variables)


def _is_original_head(path, ignore_variables):
    """Whether the TF1 checkpoint at `path` holds a fine-tuned SQuAD head to keep."""
    import re

    from albert_tf.convert.original import (
        read_original_checkpoint,
        resolve_checkpoint_prefix,
        squad_head,
    )

    checkpoint = read_original_checkpoint(resolve_checkpoint_prefix(path))
    return squad_head(checkpoint, [re.compile(p) for p in ignore_variables]) is not None


def source_text_settings(source_format, path=None):
    """The text settings (`albert_tf.models.model_dir.text_settings` keys) a model read from
    `source_format` at `path` follows: Hugging Face's tokenizer replaces TeX quotes; keras-hub's
    applies no rule of its own (`albert_tf.convert.keras_hub.TEXT_SETTINGS`); an albert_tf
    directory records its own; the original's are the defaults."""
    if source_format == "huggingface":
        return {"tex_quotes": True}
    if source_format == "keras_hub":
        from albert_tf.convert.keras_hub import TEXT_SETTINGS

        return dict(TEXT_SETTINGS)
    if source_format == "tfhub":
        from albert_tf.convert.tfhub import TEXT_SETTINGS

        return dict(TEXT_SETTINGS)
    if source_format == "albert_tf" and path is not None:
        from albert_tf.models import model_dir

        directory = os.path.dirname(path) if path.endswith(".keras") else path
        return model_dir.text_settings(directory)
    return {"tex_quotes": False}


def read_model(source_format, path, config_file=None, ignore_variables=()):
    """The model in an original TF1 checkpoint, an HF directory, a keras-hub preset or an
    albert_tf directory.

    An AlbertPretrainer, or for fine-tuned heads (an HF head architecture or an original SQuAD
    checkpoint whose head is not ignored, a keras-hub AlbertTextClassifier preset, an albert_tf
    directory or file with model.keras) the head model (AlbertClassifier,
    AlbertTokenClassifier, AlbertQuestionAnswerer, AlbertSquadV2Model, AlbertMultipleChoice).
    """
    from albert_tf.convert.huggingface import from_huggingface, head_model_from_huggingface
    from albert_tf.convert.original import from_original, head_model_from_original

    if source_format == "original":
        if _is_original_head(path, ignore_variables):
            return head_model_from_original(path, config_file, ignore_variables=ignore_variables)
        return from_original(path, config_file, ignore_variables=ignore_variables)
    if config_file is not None:
        raise ValueError(
            f"A config file is read from the {source_format} directory itself; "
            f"config_file applies to source_format='original' only"
        )
    if source_format == "huggingface":
        if _is_huggingface_head(path, ignore_variables):
            return head_model_from_huggingface(path, ignore_variables=ignore_variables)
        return from_huggingface(path, ignore_variables=ignore_variables)
    if source_format == "keras_hub":
        from albert_tf.convert.keras_hub import from_keras_hub

        return from_keras_hub(path, ignore_variables=ignore_variables)
    if source_format == "tfhub":
        from albert_tf.convert.tfhub import from_tfhub

        return from_tfhub(path, ignore_variables=ignore_variables)
    if source_format == "albert_tf":
        if ignore_variables:
            raise ValueError(
                "ignore_variables applies to original, huggingface, keras_hub and tfhub sources "
                "only"
            )
        if head_model_file(path) is not None:
            return load_head_model(path)
        from albert_tf.models import model_dir

        return model_dir.load(path)
    raise ValueError(f"Unknown source format {source_format!r}; expected one of {SOURCE_FORMATS}")


def write_model(
    model,
    target_format,
    output_dir,
    spm_model=None,
    tex_quotes=False,
    lower_case=None,
    albert_rules=True,
):
    """Writes `model` (a pretrainer or a head model) as an albert_tf directory (recording the
    text settings `tex_quotes`, `lower_case`, `albert_rules`, see
    `albert_tf.models.model_dir.save`), an HF directory, (pretrainers and SQuAD models) an
    original TF1 checkpoint or (pretrainers and AlbertClassifier) a keras-hub preset (its
    tokenizer `spm_model` with the text settings folded in, `albert_tf.convert.keras_hub`)."""
    from albert_tf.convert.huggingface import head_model_to_huggingface, to_huggingface
    from albert_tf.convert.original import head_model_to_original, to_original
    from albert_tf.models.head_model import AlbertHeadModel
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    if target_format not in TARGET_FORMATS:
        raise ValueError(
            f"Unknown target format {target_format!r}; expected one of {TARGET_FORMATS}"
        )
    if spm_model is not None and target_format not in VOCABULARY_FORMATS:
        raise ValueError(
            f"spm_model is stored with target_format {' or '.join(VOCABULARY_FORMATS)} only"
        )
    text = dict(tex_quotes=tex_quotes, lower_case=lower_case, albert_rules=albert_rules)
    if target_format == "keras_hub":
        from albert_tf.convert.keras_hub import to_keras_hub

        to_keras_hub(model, output_dir, spm_model, **text)
        return
    if isinstance(model, AlbertHeadModel):
        if target_format == "albert_tf":
            save_head_model(model, output_dir, spm_model, **text)
        elif target_format == "huggingface":
            head_model_to_huggingface(model, output_dir)
        elif isinstance(model, (AlbertQuestionAnswerer, AlbertSquadV2Model)):
            head_model_to_original(model, output_dir)
        else:
            raise ValueError(
                f"A fine-tuned {type(model).__name__} cannot be written as an "
                f"original TF1 checkpoint (pretraining models only); convert it to "
                f"albert_tf or huggingface"
            )
    elif target_format == "albert_tf":
        from albert_tf.models import model_dir

        model_dir.save(model, output_dir, spm_model=spm_model, **text)
    elif target_format == "huggingface":
        to_huggingface(model, output_dir)
    else:
        to_original(model, output_dir)


def convert_checkpoint(
    source_format,
    input_path,
    output_dir,
    target_format="albert_tf",
    config_file=None,
    spm_model=None,
    ignore_variables=(),
):
    """Reads `input_path` in `source_format`, writes `output_dir` in `target_format`, returns the
    model (an AlbertPretrainer or a fine-tuned head model).

    The text settings the model follows (`source_text_settings`) are recorded (albert_tf) or
    folded into the tokenizer (keras_hub); between those two formats the SentencePiece model
    travels too (the albert_tf directory's spm.model, the preset's vocabulary.spm) unless
    `spm_model` names another."""
    if source_format == target_format:
        raise ValueError(f"source and target format are both {source_format!r}: nothing to convert")
    model = read_model(source_format, input_path, config_file, ignore_variables)
    if spm_model is None and target_format in VOCABULARY_FORMATS:
        spm_model = _own_vocabulary(source_format, input_path)
    if spm_model is not None:
        from albert_tf.text.vocab_check import check_vocabulary_matches

        check_vocabulary_matches(
            spm_model,
            model.backbone.config,
            flag="--spm_model_file",
            model=config_file or input_path,
        )
    text = source_text_settings(source_format, input_path)
    write_model(model, target_format, output_dir, spm_model, **text)
    logging.info(
        "Converted %s (%s) to %s (%s)", input_path, source_format, output_dir, target_format
    )
    return model


def _own_vocabulary(source_format, path):
    """The SentencePiece model that comes with the model at `path`, or None."""
    if source_format == "keras_hub":
        from albert_tf.convert.keras_hub import vocabulary_path

        return vocabulary_path(path)
    if source_format == "tfhub":
        from albert_tf.convert.tfhub import spm_model_path

        return spm_model_path(path)
    if source_format == "albert_tf":
        from albert_tf.models import model_dir

        return model_dir.spm_model_path(os.path.dirname(path) if path.endswith(".keras") else path)
    return None
