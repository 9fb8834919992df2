"""The weight-name tables: one flat row per source variable, for each checkpoint format.

A row is `Rule(source, target, transform, part)`:
  source    the variable name in the foreign checkpoint. `{g}` and `{k}` stand for the group and
            inner-group index of a stacked encoder weight; the row then covers every (g, k) of
            the target's leading [groups, inner] axes. None: the format has no such variable
            (keras-hub has no SOP head); the part stays freshly initialised on import, with a
            warning, and is not written on export.
  target    our variable, as its `variable.path` without the model's name (docs/model.md), e.g.
            "encoder/attention/query_kernel" for `albert/encoder/attention/query_kernel`.
  transform how the foreign array becomes ours: NONE, or TRANSPOSE (a 2-D [out, in] PyTorch
            Linear weight or the original's [2, H] SOP matrix vs our [in, out] kernel). Both are
            their own inverse, so the same row serves import and export. Or a `Reshape(shape)`:
            the same values in row-major order, stored in `shape` (config field names, e.g.
            keras-hub's per-head attention kernels [hidden_size, num_attention_heads,
            head_size]); import reshapes to our shape, export to `shape`.
  part      which part of the model the row belongs to. The parts "embeddings" and "encoder" must
            be in every checkpoint; "projection" exists exactly when E != H; "pooler",
            "masked_lm" and "sentence_order" may be absent as a whole (they are then freshly
            initialised, with a warning), but never half present. "classifier" (the dense
            `logits` layer of a fine-tuning head model) and "squad_v2" (the SQuAD v2 head of
            `AlbertSquadV2Model`) are required.

Our targets and their shapes in config terms are listed once in TARGET_SHAPES (None: a size that
is not a config field: the head model's number of classes, or 2 * hidden_size for the SQuAD v2
layers that read two concatenated hidden states).
"""

import collections
import re

from albert_tf.layers.block_weights import BLOCK_WEIGHT_SHAPES

NONE = "none"
TRANSPOSE = "transpose"

Rule = collections.namedtuple("Rule", "source target transform part")
Reshape = collections.namedtuple("Reshape", "shape")

OPTIONAL_PARTS = ("pooler", "masked_lm", "sentence_order")

# Our variables (path without the model name) -> shape in AlbertConfig field names. "groups" is
# the variable's own leading axis (config.attention_groups or config.ffn_groups) and "inner" is
# inner_group_num; a target whose shape starts with them is stacked and filled per (g, k).
_ATTENTION_SHAPES = BLOCK_WEIGHT_SHAPES["attention"]
_FFN_SHAPES = BLOCK_WEIGHT_SHAPES["ffn"]
TARGET_SHAPES = {
    "embeddings/word_embeddings": ("vocab_size", "embedding_size"),
    "embeddings/position_embeddings": ("max_position_embeddings", "embedding_size"),
    "embeddings/token_type_embeddings": ("type_vocab_size", "embedding_size"),
    "embeddings/layer_norm/gamma": ("embedding_size",),
    "embeddings/layer_norm/beta": ("embedding_size",),
    "embeddings/embedding_projection/kernel": ("embedding_size", "hidden_size"),
    "embeddings/embedding_projection/bias": ("hidden_size",),
    **{f"encoder/attention/{n}": ("groups", "inner") + s for n, s in _ATTENTION_SHAPES.items()},
    **{f"encoder/ffn/{n}": ("groups", "inner") + s for n, s in _FFN_SHAPES.items()},
    "pooler/kernel": ("hidden_size", "hidden_size"),
    "pooler/bias": ("hidden_size",),
    "masked_lm/dense/kernel": ("hidden_size", "embedding_size"),
    "masked_lm/dense/bias": ("embedding_size",),
    "masked_lm/layer_norm/gamma": ("embedding_size",),
    "masked_lm/layer_norm/beta": ("embedding_size",),
    "masked_lm/output_bias": ("vocab_size",),
    "sentence_order/dense/kernel": ("hidden_size", 2),
    "sentence_order/dense/bias": (2,),
    # Every AlbertHeadModel (albert_tf.models.head_model): the `logits` layer (for
    # AlbertSquadV2Model the start-logit layer, H -> 1).
    "logits/kernel": ("hidden_size", None),
    "logits/bias": (None,),
    # AlbertSquadV2Model (albert_tf.models.question_answering): end logits and answerability.
    "end_dense_0/kernel": (None, "hidden_size"),
    "end_dense_0/bias": ("hidden_size",),
    "end_layer_norm/gamma": ("hidden_size",),
    "end_layer_norm/beta": ("hidden_size",),
    "end_dense_1/kernel": ("hidden_size", 1),
    "end_dense_1/bias": (1,),
    "answer_dense_0/kernel": (None, "hidden_size"),
    "answer_dense_0/bias": ("hidden_size",),
    "answer_dense_1/kernel": ("hidden_size", 1),
}
BACKBONE_PARTS = ("embeddings", "projection", "encoder", "pooler")


def is_stacked(target):
    return TARGET_SHAPES[target][:2] == ("groups", "inner")


def backbone_rules(table):
    """The rows of `table` that fill the backbone (what every head model shares)."""
    return tuple(rule for rule in table if rule.part in BACKBONE_PARTS)


# ------------------------------------------------------------ original TF1 (albert_original.md 3.3)
_BLOCK = "bert/encoder/transformer/group_{g}/inner_group_{k}"
ORIGINAL = (
    Rule("bert/embeddings/word_embeddings", "embeddings/word_embeddings", NONE, "embeddings"),
    Rule(
        "bert/embeddings/position_embeddings", "embeddings/position_embeddings", NONE, "embeddings"
    ),
    Rule(
        "bert/embeddings/token_type_embeddings",
        "embeddings/token_type_embeddings",
        NONE,
        "embeddings",
    ),
    Rule("bert/embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma", NONE, "embeddings"),
    Rule("bert/embeddings/LayerNorm/beta", "embeddings/layer_norm/beta", NONE, "embeddings"),
    Rule(
        "bert/encoder/embedding_hidden_mapping_in/kernel",
        "embeddings/embedding_projection/kernel",
        NONE,
        "projection",
    ),
    Rule(
        "bert/encoder/embedding_hidden_mapping_in/bias",
        "embeddings/embedding_projection/bias",
        NONE,
        "projection",
    ),
    Rule(
        f"{_BLOCK}/attention_1/self/query/kernel", "encoder/attention/query_kernel", NONE, "encoder"
    ),
    Rule(f"{_BLOCK}/attention_1/self/query/bias", "encoder/attention/query_bias", NONE, "encoder"),
    Rule(f"{_BLOCK}/attention_1/self/key/kernel", "encoder/attention/key_kernel", NONE, "encoder"),
    Rule(f"{_BLOCK}/attention_1/self/key/bias", "encoder/attention/key_bias", NONE, "encoder"),
    Rule(
        f"{_BLOCK}/attention_1/self/value/kernel", "encoder/attention/value_kernel", NONE, "encoder"
    ),
    Rule(f"{_BLOCK}/attention_1/self/value/bias", "encoder/attention/value_bias", NONE, "encoder"),
    Rule(
        f"{_BLOCK}/attention_1/output/dense/kernel",
        "encoder/attention/output_kernel",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_BLOCK}/attention_1/output/dense/bias", "encoder/attention/output_bias", NONE, "encoder"
    ),
    Rule(f"{_BLOCK}/LayerNorm/gamma", "encoder/attention/layer_norm_gamma", NONE, "encoder"),
    Rule(f"{_BLOCK}/LayerNorm/beta", "encoder/attention/layer_norm_beta", NONE, "encoder"),
    Rule(
        f"{_BLOCK}/ffn_1/intermediate/dense/kernel",
        "encoder/ffn/intermediate_kernel",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_BLOCK}/ffn_1/intermediate/dense/bias", "encoder/ffn/intermediate_bias", NONE, "encoder"
    ),
    Rule(
        f"{_BLOCK}/ffn_1/intermediate/output/dense/kernel",
        "encoder/ffn/output_kernel",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_BLOCK}/ffn_1/intermediate/output/dense/bias", "encoder/ffn/output_bias", NONE, "encoder"
    ),
    Rule(f"{_BLOCK}/LayerNorm_1/gamma", "encoder/ffn/layer_norm_gamma", NONE, "encoder"),
    Rule(f"{_BLOCK}/LayerNorm_1/beta", "encoder/ffn/layer_norm_beta", NONE, "encoder"),
    Rule("bert/pooler/dense/kernel", "pooler/kernel", NONE, "pooler"),
    Rule("bert/pooler/dense/bias", "pooler/bias", NONE, "pooler"),
    Rule("cls/predictions/transform/dense/kernel", "masked_lm/dense/kernel", NONE, "masked_lm"),
    Rule("cls/predictions/transform/dense/bias", "masked_lm/dense/bias", NONE, "masked_lm"),
    Rule(
        "cls/predictions/transform/LayerNorm/gamma", "masked_lm/layer_norm/gamma", NONE, "masked_lm"
    ),
    Rule(
        "cls/predictions/transform/LayerNorm/beta", "masked_lm/layer_norm/beta", NONE, "masked_lm"
    ),
    Rule("cls/predictions/output_bias", "masked_lm/output_bias", NONE, "masked_lm"),
    Rule(
        "cls/seq_relationship/output_weights",
        "sentence_order/dense/kernel",
        TRANSPOSE,
        "sentence_order",
    ),
    Rule("cls/seq_relationship/output_bias", "sentence_order/dense/bias", NONE, "sentence_order"),
)

# Fine-tuned SQuAD heads of the original run_squad_v1.py / run_squad_v2.py (albert_original.md
# 3.3 and 7): the backbone rows plus the head. tf.layers.dense kernels are [in, out] like ours;
# end_logits/dense_0 reads [h_i ; h_start] and answer_class/dense_0 [h_weighted ; h_CLS].
ORIGINAL_SQUAD = backbone_rules(ORIGINAL) + (
    Rule("cls/squad/output_weights", "logits/kernel", TRANSPOSE, "classifier"),
    Rule("cls/squad/output_bias", "logits/bias", NONE, "classifier"),
)
ORIGINAL_SQUAD_V2 = backbone_rules(ORIGINAL) + (
    Rule("start_logits/dense/kernel", "logits/kernel", NONE, "squad_v2"),
    Rule("start_logits/dense/bias", "logits/bias", NONE, "squad_v2"),
    Rule("end_logits/dense_0/kernel", "end_dense_0/kernel", NONE, "squad_v2"),
    Rule("end_logits/dense_0/bias", "end_dense_0/bias", NONE, "squad_v2"),
    Rule("end_logits/LayerNorm/gamma", "end_layer_norm/gamma", NONE, "squad_v2"),
    Rule("end_logits/LayerNorm/beta", "end_layer_norm/beta", NONE, "squad_v2"),
    Rule("end_logits/dense_1/kernel", "end_dense_1/kernel", NONE, "squad_v2"),
    Rule("end_logits/dense_1/bias", "end_dense_1/bias", NONE, "squad_v2"),
    Rule("answer_class/dense_0/kernel", "answer_dense_0/kernel", NONE, "squad_v2"),
    Rule("answer_class/dense_0/bias", "answer_dense_0/bias", NONE, "squad_v2"),
    Rule("answer_class/dense_1/kernel", "answer_dense_1/kernel", NONE, "squad_v2"),
)

# Training state in original checkpoints: never model weights, ignored explicitly (and logged).
ORIGINAL_IGNORED = (
    re.compile(r"(^|/)(adam_m|adam_v)$"),
    re.compile(r"(^|/)global_step$"),
    re.compile(r"(^|/)AdamWeightDecayOptimizer(_1)?$"),
    re.compile(r"(^|/)LAMBOptimizer(_1)?$"),
)

# ------------------------------------------------------------ Hugging Face AlbertForPreTraining
# Names as AlbertForPreTraining saves them; an AlbertModel checkpoint (no "albert." prefix) is
# renamed to this layout when read (huggingface.py).
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{k}"
HUGGINGFACE = (
    Rule(
        "albert.embeddings.word_embeddings.weight", "embeddings/word_embeddings", NONE, "embeddings"
    ),
    Rule(
        "albert.embeddings.position_embeddings.weight",
        "embeddings/position_embeddings",
        NONE,
        "embeddings",
    ),
    Rule(
        "albert.embeddings.token_type_embeddings.weight",
        "embeddings/token_type_embeddings",
        NONE,
        "embeddings",
    ),
    Rule("albert.embeddings.LayerNorm.weight", "embeddings/layer_norm/gamma", NONE, "embeddings"),
    Rule("albert.embeddings.LayerNorm.bias", "embeddings/layer_norm/beta", NONE, "embeddings"),
    Rule(
        "albert.encoder.embedding_hidden_mapping_in.weight",
        "embeddings/embedding_projection/kernel",
        TRANSPOSE,
        "projection",
    ),
    Rule(
        "albert.encoder.embedding_hidden_mapping_in.bias",
        "embeddings/embedding_projection/bias",
        NONE,
        "projection",
    ),
    Rule(
        f"{_LAYER}.attention.query.weight", "encoder/attention/query_kernel", TRANSPOSE, "encoder"
    ),
    Rule(f"{_LAYER}.attention.query.bias", "encoder/attention/query_bias", NONE, "encoder"),
    Rule(f"{_LAYER}.attention.key.weight", "encoder/attention/key_kernel", TRANSPOSE, "encoder"),
    Rule(f"{_LAYER}.attention.key.bias", "encoder/attention/key_bias", NONE, "encoder"),
    Rule(
        f"{_LAYER}.attention.value.weight", "encoder/attention/value_kernel", TRANSPOSE, "encoder"
    ),
    Rule(f"{_LAYER}.attention.value.bias", "encoder/attention/value_bias", NONE, "encoder"),
    Rule(
        f"{_LAYER}.attention.dense.weight", "encoder/attention/output_kernel", TRANSPOSE, "encoder"
    ),
    Rule(f"{_LAYER}.attention.dense.bias", "encoder/attention/output_bias", NONE, "encoder"),
    Rule(
        f"{_LAYER}.attention.LayerNorm.weight",
        "encoder/attention/layer_norm_gamma",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_LAYER}.attention.LayerNorm.bias", "encoder/attention/layer_norm_beta", NONE, "encoder"
    ),
    Rule(f"{_LAYER}.ffn.weight", "encoder/ffn/intermediate_kernel", TRANSPOSE, "encoder"),
    Rule(f"{_LAYER}.ffn.bias", "encoder/ffn/intermediate_bias", NONE, "encoder"),
    Rule(f"{_LAYER}.ffn_output.weight", "encoder/ffn/output_kernel", TRANSPOSE, "encoder"),
    Rule(f"{_LAYER}.ffn_output.bias", "encoder/ffn/output_bias", NONE, "encoder"),
    Rule(f"{_LAYER}.full_layer_layer_norm.weight", "encoder/ffn/layer_norm_gamma", NONE, "encoder"),
    Rule(f"{_LAYER}.full_layer_layer_norm.bias", "encoder/ffn/layer_norm_beta", NONE, "encoder"),
    Rule("albert.pooler.weight", "pooler/kernel", TRANSPOSE, "pooler"),
    Rule("albert.pooler.bias", "pooler/bias", NONE, "pooler"),
    Rule("predictions.dense.weight", "masked_lm/dense/kernel", TRANSPOSE, "masked_lm"),
    Rule("predictions.dense.bias", "masked_lm/dense/bias", NONE, "masked_lm"),
    Rule("predictions.LayerNorm.weight", "masked_lm/layer_norm/gamma", NONE, "masked_lm"),
    Rule("predictions.LayerNorm.bias", "masked_lm/layer_norm/beta", NONE, "masked_lm"),
    Rule("predictions.bias", "masked_lm/output_bias", NONE, "masked_lm"),
    Rule(
        "sop_classifier.classifier.weight",
        "sentence_order/dense/kernel",
        TRANSPOSE,
        "sentence_order",
    ),
    Rule("sop_classifier.classifier.bias", "sentence_order/dense/bias", NONE, "sentence_order"),
)

# AlbertForSequenceClassification / AlbertForTokenClassification / AlbertForMultipleChoice: the
# backbone rows above plus the dense `classifier` (torch [num_labels, H]; [1, H] for multiple
# choice). HF's token classifier has no pooler.
HUGGINGFACE_CLASSIFIER = backbone_rules(HUGGINGFACE) + (
    Rule("classifier.weight", "logits/kernel", TRANSPOSE, "classifier"),
    Rule("classifier.bias", "logits/bias", NONE, "classifier"),
)
# AlbertForQuestionAnswering (no pooler): `qa_outputs` [2, H], start and end.
HUGGINGFACE_QUESTION_ANSWERING = backbone_rules(HUGGINGFACE) + (
    Rule("qa_outputs.weight", "logits/kernel", TRANSPOSE, "classifier"),
    Rule("qa_outputs.bias", "logits/bias", NONE, "classifier"),
)

# Non-persistent buffers that older transformers versions saved; not weights.
HUGGINGFACE_IGNORED = (re.compile(r"^albert\.embeddings\.(position_ids|token_type_ids)$"),)

# ------------------------------------------------------------ keras-hub AlbertBackbone preset
# Names as `albert_tf.convert.keras_hub` reads a Keras 3 weights file (model.weights.h5, and
# task.weights.h5 of a task preset): the Keras layer names from the outer layer in, then the
# variable's index in its layer (Keras' order: 0 = kernel, gamma or embeddings, 1 = bias or
# beta; the MLM head's own 0 is its output bias). keras-hub splits the attention kernels per
# head: query/key/value [H, heads, head_size] with biases [heads, head_size], the output
# [heads, head_size, H]; the rows reshape them (row-major, as HF's heads are contiguous chunks).
_KERAS_HUB_BLOCK = "group_{g}_inner_layer_{k}"
_KERAS_HUB_ATTENTION = f"{_KERAS_HUB_BLOCK}/self_attention_layer"
_HEADS_IN = Reshape(("hidden_size", "num_attention_heads", "head_size"))
_HEADS_BIAS = Reshape(("num_attention_heads", "head_size"))
_HEADS_OUT = Reshape(("num_attention_heads", "head_size", "hidden_size"))
KERAS_HUB = (
    Rule("token_embedding/0", "embeddings/word_embeddings", NONE, "embeddings"),
    Rule("position_embedding/0", "embeddings/position_embeddings", NONE, "embeddings"),
    Rule("segment_embedding/0", "embeddings/token_type_embeddings", NONE, "embeddings"),
    Rule("embeddings_layer_norm/0", "embeddings/layer_norm/gamma", NONE, "embeddings"),
    Rule("embeddings_layer_norm/1", "embeddings/layer_norm/beta", NONE, "embeddings"),
    Rule("embedding_projection/0", "embeddings/embedding_projection/kernel", NONE, "projection"),
    Rule("embedding_projection/1", "embeddings/embedding_projection/bias", NONE, "projection"),
    Rule(f"{_KERAS_HUB_ATTENTION}/query/0", "encoder/attention/query_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_KERAS_HUB_ATTENTION}/query/1", "encoder/attention/query_bias", _HEADS_BIAS, "encoder"),
    Rule(f"{_KERAS_HUB_ATTENTION}/key/0", "encoder/attention/key_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_KERAS_HUB_ATTENTION}/key/1", "encoder/attention/key_bias", _HEADS_BIAS, "encoder"),
    Rule(f"{_KERAS_HUB_ATTENTION}/value/0", "encoder/attention/value_kernel", _HEADS_IN, "encoder"),
    Rule(f"{_KERAS_HUB_ATTENTION}/value/1", "encoder/attention/value_bias", _HEADS_BIAS, "encoder"),
    Rule(
        f"{_KERAS_HUB_ATTENTION}/attention_output/0",
        "encoder/attention/output_kernel",
        _HEADS_OUT,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_ATTENTION}/attention_output/1",
        "encoder/attention/output_bias",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/self_attention_layer_norm/0",
        "encoder/attention/layer_norm_gamma",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/self_attention_layer_norm/1",
        "encoder/attention/layer_norm_beta",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_intermediate_dense/0",
        "encoder/ffn/intermediate_kernel",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_intermediate_dense/1",
        "encoder/ffn/intermediate_bias",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_output_dense/0",
        "encoder/ffn/output_kernel",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_output_dense/1", "encoder/ffn/output_bias", NONE, "encoder"
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_layer_norm/0",
        "encoder/ffn/layer_norm_gamma",
        NONE,
        "encoder",
    ),
    Rule(
        f"{_KERAS_HUB_BLOCK}/feedforward_layer_norm/1",
        "encoder/ffn/layer_norm_beta",
        NONE,
        "encoder",
    ),
    Rule("pooled_dense/0", "pooler/kernel", NONE, "pooler"),
    Rule("pooled_dense/1", "pooler/bias", NONE, "pooler"),
    # task.weights.h5 of an AlbertMaskedLM preset (its MaskedLMHead, `mlm_head`).
    Rule("mlm_head/intermediate_dense/0", "masked_lm/dense/kernel", NONE, "masked_lm"),
    Rule("mlm_head/intermediate_dense/1", "masked_lm/dense/bias", NONE, "masked_lm"),
    Rule("mlm_head/intermediate_layer_norm/0", "masked_lm/layer_norm/gamma", NONE, "masked_lm"),
    Rule("mlm_head/intermediate_layer_norm/1", "masked_lm/layer_norm/beta", NONE, "masked_lm"),
    Rule("mlm_head/0", "masked_lm/output_bias", NONE, "masked_lm"),
    # keras-hub has no sentence-order head.
    Rule(None, "sentence_order/dense/kernel", NONE, "sentence_order"),
    Rule(None, "sentence_order/dense/bias", NONE, "sentence_order"),
)
# task.weights.h5 of an AlbertTextClassifier preset: pooled output -> output_dropout -> `logits`.
KERAS_HUB_CLASSIFIER = backbone_rules(KERAS_HUB) + (
    Rule("logits/0", "logits/kernel", NONE, "classifier"),
    Rule("logits/1", "logits/bias", NONE, "classifier"),
)
# Training state a task preset may carry: the optimizer's iteration count and learning rate.
KERAS_HUB_IGNORED = (re.compile(r"^optimizer/"),)
