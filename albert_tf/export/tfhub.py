"""TF Hub reusable SavedModels: an encoder and its preprocessor, as TF Hub's BERT and ALBERT
models are published (the pair `albert_en_base/3` + `albert_en_preprocess/3`), so pipelines and
tutorials written for those take an albert_tf model unchanged.

`export_tfhub(model, preprocessor, export_dir)` writes two SavedModels:

EXPORT_DIR/encoder/ (TF Hub's "text embeddings with Transformer encoders" encoder):
- `encoder(inputs, training=False)`: inputs {"input_word_ids", "input_mask", "input_type_ids"},
  int32 [batch, seq] (any batch size and length up to max_position_embeddings) ->
  {"pooled_output" [B, H], "sequence_output" [B, S, H], "encoder_outputs" (a list of one
  [B, S, H] per transformer block), "default" (= pooled_output)}, float32. `training=True`
  applies the config's dropout.
- `variables`, `trainable_variables` (the backbone's: what `hub.KerasLayer(trainable=True)`
  fine-tunes), `regularization_losses` (empty).
- `serve(inputs)` and `call_training(inputs)`: the same as `encoder(inputs)` with
  training False and True, for `keras.layers.TFSMLayer(path, call_endpoint="serve",
  call_training_endpoint="call_training")`.
- signature `serving_default` (input_word_ids, input_mask, input_type_ids) -> pooled_output,
  sequence_output, default (not encoder_outputs: one [B, S, H] tensor per block is rarely
  wanted from a server).
- `encoder.mlm` (from an `AlbertPretrainer`): `mlm(inputs, training=False)` with
  "masked_lm_positions" int32 [B, P] added to the inputs returns the encoder's outputs and
  "mlm_logits" [B, P, vocab_size]; its own `variables`, `trainable_variables` (backbone and
  masked-LM head) and `regularization_losses`.
The encoder needs no SentencePiece model and no tensorflow_text.

EXPORT_DIR/preprocessor/ (its preprocessor; tensorflow_text ops, no variables):
- `preprocessor(texts)`: tf.string [B] -> the three int32 inputs [B, seq_length] (one segment).
- `preprocessor.tokenize(texts)`: tf.string [B] -> int32 RaggedTensor [B, (tokens)]: SentencePiece
  ids with no grouping by words, as TF Hub's ALBERT preprocessor (and Model Garden's
  SentencePiece tokenizer behind it) returns; the BERT ones add a (words) level for WordPiece.
- `preprocessor.tokenize.get_special_tokens_dict()`: int32 scalars `vocab_size`,
  `start_of_sequence_id` ([CLS]), `end_of_segment_id` ([SEP]), `padding_id` (<pad>), `mask_id`.
- `preprocessor.bert_pack_inputs(segments, seq_length=seq_length)`: a list of 1 or 2 tokenized
  segments (int32 RaggedTensors [B, (tokens)] or [B, (words), (tokens)]) ->
  `[CLS] a [SEP] (b [SEP])` inputs padded to `seq_length`; pairs that do not fit are trimmed by
  the preprocessor's truncation (round robin by default: tensorflow_text's RoundRobinTrimmer).
- `preprocessor.sp_model_file`: the SentencePiece model as an asset (assets/spm.model), for
  users who tokenize outside TensorFlow.
The text is normalized and tokenized in the graph by the given `AlbertPreprocessor`'s own
layers, so the ids equal its ids (its casing, accent stripping, TeX quotes, digit-comma rule).

Both are written under a hidden temporary name beside EXPORT_DIR and renamed into place at the
end, so a failed export leaves no EXPORT_DIR; an existing EXPORT_DIR is never overwritten. On an
object store (gs://) the rename moves one object at a time, the two saved_model.pb last and
preprocessor/saved_model.pb the very last: an EXPORT_DIR without it is the remains of an
interrupted export, removed by the next export to it. A TF Hub export is not versioned (no
EXPORT_DIR/<version>/): serve EXPORT_DIR/encoder with TF Serving by copying it into a version
directory.

Load them with `tf.saved_model.load` (import tensorflow_text first for the preprocessor), with
`keras.layers.TFSMLayer` (Keras 3), or with `tensorflow_hub.KerasLayer` (tensorflow_hub needs
tf-keras, Keras 2: run it with TF_USE_LEGACY_KERAS=1):

>>> export_tfhub(pretrainer, preprocessor, "/tmp/albert_hub")  # doctest: +SKIP
>>> import tensorflow_hub as hub, tensorflow_text  # doctest: +SKIP
>>> preprocess = hub.KerasLayer("/tmp/albert_hub/preprocessor")  # doctest: +SKIP
>>> encoder = hub.KerasLayer("/tmp/albert_hub/encoder", trainable=True)  # doctest: +SKIP
>>> encoder(preprocess(tf.constant(["A sentence."])))["pooled_output"].shape  # doctest: +SKIP
TensorShape([1, 768])
"""

import contextlib
import os
import tempfile

import tensorflow as tf
from absl import logging

from albert_tf import files
from albert_tf.errors import UserError
from albert_tf.export import versions
from albert_tf.models.backbone import INPUT_KEYS, AlbertModel
from albert_tf.models.pretrainer import AlbertPretrainer

ENCODER_DIR = "encoder"
PREPROCESSOR_DIR = "preprocessor"
DEFAULT_SEQ_LENGTH = 128
SPM_ASSET = "spm.model"
# The object moved last into EXPORT_DIR on an object store: EXPORT_DIR is complete with it.
LAST_FILE = f"{PREPROCESSOR_DIR}/{versions.SAVED_MODEL_FILE}"

_IDS = tf.TensorSpec([None, None], tf.int32)
_TEXT = tf.TensorSpec([None], tf.string)
INPUT_SPECS = {key: _IDS for key in INPUT_KEYS}
MLM_INPUT_SPECS = {**INPUT_SPECS, "masked_lm_positions": _IDS}


class TFHubExportError(UserError, ValueError):
    """The model or its preprocessing cannot be written as TF Hub SavedModels; the message says
    why."""


def hub_copies(model):
    """(backbone, pretrainer or None): float32 copies of `model` (an `AlbertModel` or
    `AlbertPretrainer`) with the same weights, the backbone returning every block's output."""
    if isinstance(model, AlbertPretrainer):
        backbone = model.backbone
    elif isinstance(model, AlbertModel):
        backbone = model
    else:
        raise TypeError(
            f"export_tfhub needs an AlbertModel or AlbertPretrainer, got {type(model).__name__}"
        )
    if backbone.encoder.serving_layout:
        raise TFHubExportError(
            "the model keeps its weights in the serving layout (inference only); export the "
            "trained model instead"
        )
    config = dict(
        backbone.get_config(), dtype="float32", output_encoder_outputs=True, recompute=False
    )
    copy = AlbertModel.from_config(config)
    copy.encoder.written_gradient = False  # trainable after loading (see AlbertEncoder)
    if not isinstance(model, AlbertPretrainer):
        copy.set_weights(backbone.get_weights())
        return copy, None
    pretrainer = AlbertPretrainer(copy, name=model.name)
    pretrainer.set_weights(model.get_weights())
    return copy, pretrainer


def _encoder_outputs(backbone, inputs, training):
    outputs = backbone({key: inputs[key] for key in INPUT_KEYS}, training=training)
    config = backbone.config
    pooled = tf.cast(outputs["pooled_output"], tf.float32)
    blocks = tf.cast(outputs["encoder_outputs"], tf.float32)
    return {
        "pooled_output": pooled,
        "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        "encoder_outputs": tf.unstack(
            blocks, num=config.num_hidden_layers * config.inner_group_num, axis=0
        ),
        "default": tf.identity(pooled),
    }


def _reusable(call, variables, trainable_variables, specs):
    """A Reusable SavedModel object: `__call__` (traced for training False and True on
    `specs`), `variables`, `trainable_variables`, `regularization_losses`."""
    obj = tf.train.Checkpoint()
    obj.__call__ = call
    for training in (False, True):
        call.get_concrete_function(specs, training=training)
    obj.variables = list(variables)
    obj.trainable_variables = list(trainable_variables)
    obj.regularization_losses = []
    return obj


def encoder_module(backbone, pretrainer=None):
    """The encoder SavedModel's root object (see the module docstring); `backbone` returns
    encoder_outputs (`hub_copies`). Every endpoint calls the one traced `__call__`."""

    @tf.function(autograph=False)
    def call(inputs, training=False):
        return _encoder_outputs(backbone, inputs, training)

    root = _reusable(call, backbone.variables, backbone.trainable_variables, INPUT_SPECS)
    root.serve = tf.function(
        lambda inputs: call(inputs, training=False),
        input_signature=[INPUT_SPECS],
        autograph=False,
    )
    root.call_training = tf.function(
        lambda inputs: call(inputs, training=True),
        input_signature=[INPUT_SPECS],
        autograph=False,
    )

    @tf.function(input_signature=[_IDS, _IDS, _IDS], autograph=False)
    def serving_default(input_word_ids, input_mask, input_type_ids):
        outputs = call(dict(zip(INPUT_KEYS, (input_word_ids, input_mask, input_type_ids))))
        return {key: outputs[key] for key in ("pooled_output", "sequence_output", "default")}

    root.serving_default = serving_default
    if pretrainer is not None:
        root.mlm = _mlm_module(pretrainer, call)
    return root


def _mlm_module(pretrainer, encoder_call):
    backbone, head = pretrainer.backbone, pretrainer.masked_lm

    @tf.function(autograph=False)
    def call(inputs, training=False):
        outputs = encoder_call({key: inputs[key] for key in INPUT_KEYS}, training=training)
        logits = head(
            outputs["sequence_output"],
            tf.cast(inputs["masked_lm_positions"], tf.int32),
            backbone.get_embedding_table(),
        )
        return {**outputs, "mlm_logits": tf.cast(logits, tf.float32)}

    return _reusable(
        call,
        backbone.variables + head.variables,
        backbone.trainable_variables + head.trainable_variables,
        MLM_INPUT_SPECS,
    )


def special_tokens(preprocessor):
    """{name: int}: what `tokenize.get_special_tokens_dict()` returns, from an
    `AlbertPreprocessor`."""
    ids = preprocessor.special_ids
    return {
        "vocab_size": int(preprocessor.vocab_size),
        "start_of_sequence_id": ids["cls_id"],
        "end_of_segment_id": ids["sep_id"],
        "padding_id": ids["pad_id"],
        "mask_id": ids["mask_id"],
    }


def preprocessor_module(preprocessor, seq_length, spm_asset_path):
    """The preprocessor SavedModel's root object (see the module docstring) for an
    `AlbertPreprocessor`; `spm_asset_path` is a local file holding its SentencePiece model."""
    fixed = preprocessor.with_padding(False, max_seq_length=seq_length)
    tokenizer, packer = fixed.tokenizer, fixed.packer
    tokens = special_tokens(fixed)

    tokenize = tf.train.Checkpoint()
    tokenize.__call__ = tokenize_texts = tf.function(
        lambda texts: tf.cast(tokenizer(texts), tf.int32),
        input_signature=[_TEXT],
        autograph=False,
    )
    tokenize.get_special_tokens_dict = tf.function(
        lambda: {name: tf.constant(value, tf.int32) for name, value in tokens.items()},
        input_signature=[],
        autograph=False,
    )
    # The tensorflow_text tokenizer owns the SentencePiece resource the functions use.
    tokenize.sentencepiece = tokenizer.sentencepiece

    @tf.function(autograph=False)
    def pack(inputs, seq_length=seq_length):
        return packer(list(inputs), max_seq_length=seq_length)

    for ragged_rank in (1, 2):
        spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
        for count in (1, 2):
            pack.get_concrete_function([spec] * count, seq_length=tf.TensorSpec([], tf.int32))
    bert_pack_inputs = tf.train.Checkpoint()
    bert_pack_inputs.__call__ = pack

    root = tf.train.Checkpoint()
    root.__call__ = tf.function(
        lambda texts: pack([tokenize_texts(texts)]), input_signature=[_TEXT], autograph=False
    )
    root.tokenize = tokenize
    root.bert_pack_inputs = bert_pack_inputs
    root.sp_model_file = tf.saved_model.Asset(spm_asset_path)
    return root


def _check(model, preprocessor, seq_length):
    from albert_tf.text.vocab_check import check_vocabulary_matches

    if not hasattr(preprocessor, "with_padding"):
        raise TFHubExportError(
            "a TF Hub export needs its preprocessor (an AlbertPreprocessor with the model's "
            f"SentencePiece model), got {type(preprocessor).__name__}"
        )
    config = getattr(model, "config", None)
    max_length = config.max_position_embeddings if config is not None else None
    if not isinstance(seq_length, int) or not 3 <= seq_length <= (max_length or seq_length):
        raise TFHubExportError(
            f"seq_length must be an integer in [3, {max_length}] (max_position_embeddings), "
            f"got {seq_length!r}"
        )
    if config is not None:
        check_vocabulary_matches(preprocessor, config, model=f"the exported {type(model).__name__}")


def export_tfhub(model, preprocessor, export_dir, seq_length=DEFAULT_SEQ_LENGTH):
    """Writes EXPORT_DIR/encoder and EXPORT_DIR/preprocessor (see the module docstring);
    returns `export_dir`.

    Args:
        model: an `AlbertPretrainer` (the encoder gets `.mlm`) or an `AlbertModel`; exported
            in float32 whatever its dtype policy.
        preprocessor: the model's `AlbertPreprocessor` (its SentencePiece model, casing,
            TeX-quote setting and truncation are exported; its padding is not: the
            preprocessor pads to `seq_length`).
        export_dir: the directory to create (local or gs://); it must not exist (an empty local
            directory is replaced).
        seq_length: the preprocessor's default sequence length (`bert_pack_inputs` takes
            another as `seq_length=`).
    """
    _check(model, preprocessor, seq_length)
    with _publish(export_dir) as staging, tempfile.TemporaryDirectory() as local:
        backbone, pretrainer = hub_copies(model)
        write_saved_model(encoder_module(backbone, pretrainer), f"{staging}/{ENCODER_DIR}")
        spm_path = os.path.join(local, SPM_ASSET)
        with open(spm_path, "wb") as f:
            f.write(preprocessor.model_proto)
        write_saved_model(
            preprocessor_module(preprocessor, seq_length, spm_path),
            f"{staging}/{PREPROCESSOR_DIR}",
        )
    logging.info(
        "Exported TF Hub SavedModels %s/{%s,%s}", export_dir, ENCODER_DIR, PREPROCESSOR_DIR
    )
    return export_dir


def write_saved_model(root, path):
    """tf.saved_model.save of a root object built here, with its `serving_default` (the
    encoder's) or its `__call__` (the preprocessor's) as the serving_default signature."""
    serving = getattr(root, "serving_default", None) or root.__call__
    tf.saved_model.save(root, path, signatures={"serving_default": serving})


def _complete(export_dir):
    return tf.io.gfile.exists(f"{export_dir}/{LAST_FILE}")


def _clear_target(target):
    """Refuses an existing `target`, except an empty local directory (removed) and, on an
    object store, the incomplete remains of an interrupted export (removed)."""
    if not tf.io.gfile.exists(target):
        return
    if "://" in target and not _complete(target):
        logging.info("Removing %s: an interrupted export left it incomplete", target)
        tf.io.gfile.rmtree(target)
    elif tf.io.gfile.isdir(target) and not tf.io.gfile.listdir(target):
        tf.io.gfile.rmtree(target)
    else:
        raise FileExistsError(
            f"{target} already exists; a TF Hub export is never overwritten (remove it or "
            "export to a new directory)"
        )


@contextlib.contextmanager
def _publish(export_dir):
    """Yields a staging directory beside `export_dir`, renamed to it at the end of the block
    (`versions.move_into_place`) and removed if the block raises."""
    target = export_dir.rstrip("/") or export_dir
    _clear_target(target)
    parent = os.path.dirname(target)
    if parent:
        tf.io.gfile.makedirs(parent)
    files.remove_stale_temporaries(target)
    staging = files.temporary_path(target)
    tf.io.gfile.makedirs(staging)
    try:
        yield staging
        versions.move_into_place(staging, target)
    except BaseException:
        if tf.io.gfile.exists(staging):
            tf.io.gfile.rmtree(staging)
        raise


def export_pretrained(
    directory, export_dir, spm_model=None, lower_case=None, seq_length=DEFAULT_SEQ_LENGTH
):
    """`export_tfhub` of a model directory (written by `albert_tf.save` or
    convert_checkpoint.py, or a model by name as `albert_tf.sources` resolves it): its
    pretrainer with the MLM head (`encoder.mlm`) when the directory has one, else its backbone;
    its spm.model (or `spm_model`) and the text settings it records for the preprocessor
    (`lower_case`, when not None, overrides the recorded one). Returns `export_dir`."""
    from albert_tf.models import model_dir
    from albert_tf.models.preprocessor import AlbertPreprocessor

    directory = model_dir.local_directory(directory)
    if not (spm_model or model_dir.spm_model_path(directory)):
        raise TFHubExportError(
            f"{directory} has no {model_dir.SPM_FILE}: a TF Hub export needs the SentencePiece "
            "model for its preprocessor (pass spm_model: --spm_model_file)"
        )
    options = {} if lower_case is None else {"lower_case": lower_case}
    preprocessor = AlbertPreprocessor.from_pretrained(
        directory, spm_model, max_seq_length=seq_length, **options
    )
    with_heads = tf.io.gfile.exists(os.path.join(directory, model_dir.PRETRAINER_WEIGHTS))
    model = model_dir.load(directory) if with_heads else model_dir.load_backbone(directory)
    return export_tfhub(model, preprocessor, export_dir, seq_length=seq_length)
