"""SavedModel for TF Serving of an `AlbertMultipleChoice` (RACE) that takes raw text.

`export_multiple_choice` writes EXPORT_DIR/<version>/ with two signatures:

- serving_default: article tf.string [B], question tf.string [B], options tf.string [B, 4] ->
  probabilities float32 [B, 4], answer int64 [B] (the index of the best option);
- predict_ids: input_word_ids, input_mask, input_type_ids int32 [B, 4, S] -> the same.

The input building of `albert_tf.data.race` runs in the graph with TensorFlow and TensorFlow
Text ops only (`pack_choices`): normalization, the "_" rule, SentencePiece, the qa cut to its
last `max_qa_length` pieces, the article cut to fit, `[CLS] article [SEP] qa [SEP]`. Each
request batch is padded to its longest choice (a multiple of 8, at most `max_seq_length`). As in
`albert_tf.export.saved_model`, the model serves as a float32 copy, `assets.extra/albert_tf.json`
describes the export and warmup requests are written when tensorflow-serving-api is installed.

>>> path = export_multiple_choice(model, preprocessor, "/tmp/serving/race")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> serve = tf.saved_model.load(path).signatures["serving_default"]  # doctest: +SKIP
>>> serve(article=tf.constant(["Tom has a cat."]), question=tf.constant(["Tom has a _ ."]),
...       options=tf.constant([["cat", "dog", "car", "hat"]]))["answer"]  # doctest: +SKIP
"""

import tensorflow as tf
import tensorflow_text as tft

from albert_tf.data.race import NUM_CHOICES, check_lengths
from albert_tf.export import saved_model
from albert_tf.export.saved_model import float32_copy
from albert_tf.export.serving_spec import SavedModelSpec
from albert_tf.text import graph_ops
from albert_tf.text.preprocessing_layers import TextTokenizer

_TEXT = tf.TensorSpec([None], tf.string)
_OPTIONS = tf.TensorSpec([None, NUM_CHOICES], tf.string)
_IDS = tf.TensorSpec([None, NUM_CHOICES, None], tf.int32)
BUCKET = 8
_LONG = "The students walked to the old library after class. " * 60
WARMUP_BATCHES = (
    {
        "article": ["Tom has a small cat."],
        "question": ["What does Tom have?"],
        "options": [["A cat.", "A dog.", "A car.", "A hat."]],
    },
    {
        "article": [_LONG, ""],
        "question": ["They walked to the _ .", ""],
        "options": [["library", "park", "school", "shop"], ["Grüße", "", "東京", "x"]],
    },
)


def qa_texts(question, options):
    """The "_" rule on tf.string question [B] and options [B, 4] -> qa texts [B, 4]: each option
    replaces every "_" of its question, else "question option".

    >>> out = qa_texts(tf.constant(["a _ b", "why?"]), tf.constant([["1", "2", "3", "4"]] * 2))
    >>> [x.decode() for x in out.numpy()[:, 1]]
    ['a 2 b', 'why? 2']
    """
    options = tf.convert_to_tensor(options, tf.string)
    rows = tf.repeat(tf.range(tf.shape(question, out_type=tf.int64)[0]), NUM_CHOICES)
    flat_options = tf.reshape(options, [-1])
    parts = tf.gather(tf.strings.split(question, "_"), rows)  # [B*4, (parts)]
    part_row = parts.value_rowids()
    last = tf.equal(
        tf.range(tf.size(parts.flat_values, out_type=tf.int64)),
        tf.gather(parts.row_limits(), part_row) - 1,
    )
    filled = tf.where(
        last,
        parts.flat_values,
        tf.strings.join([parts.flat_values, tf.gather(flat_options, part_row)]),
    )
    cloze = tf.strings.reduce_join(parts.with_flat_values(filled), axis=1)
    joined = tf.strings.join([tf.gather(question, rows), flat_options], separator=" ")
    qa = tf.where(parts.row_lengths() > 1, cloze, joined)
    return tf.reshape(qa, [-1, NUM_CHOICES])


def _keep(ids, keep_from, keep_to):
    """The ids of each row at positions [keep_from, keep_to) (per-row int64 bounds)."""
    positions = tf.ragged.range(ids.row_lengths())
    starts = tf.expand_dims(keep_from, 1)
    ends = tf.expand_dims(keep_to, 1)
    return tf.ragged.boolean_mask(ids, (positions >= starts) & (positions < ends))


def pack_choices(
    tokenizer,
    article,
    question,
    options,
    max_seq_length,
    max_qa_length,
    cls_id,
    sep_id,
    pad_id=0,
    lower_case=True,
    bucket=BUCKET,
):
    """Raw article [B], question [B], options [B, 4] -> the model's int32 inputs [B, 4, L]
    (`albert_tf.data.race.build_inputs` in the graph; L = the longest choice rounded up to
    `bucket`, at most `max_seq_length`). `tokenizer` is a `TextTokenizer`.

    >>> inputs = pack_choices(TextTokenizer("30k-clean.model"), article, question, options,
    ...                       512, 128, cls_id=2, sep_id=3)  # doctest: +SKIP
    """
    check_lengths(max_seq_length, max_qa_length)
    article = tf.convert_to_tensor(article, tf.string)
    question = tf.convert_to_tensor(question, tf.string)
    options = tf.convert_to_tensor(options, tf.string)
    batch = tf.shape(question, out_type=tf.int64)[0]
    checks = [
        tf.debugging.assert_equal(
            tf.shape(x, out_type=tf.int64)[0],
            batch,
            message=("article, question and options must have the same batch size"),
        )
        for x in (article, options)
    ]
    with tf.control_dependencies(checks):
        article, options = tf.identity(article), tf.identity(options)
    # One normalization and one tokenizer call each (their graphs are large): [questions;
    # options] are normalized before the "_" rule, as the original; [articles; qas] tokenized.
    normalized = graph_ops.normalize(
        tf.concat([question, tf.reshape(options, [-1])], 0),
        lower=lower_case,
        albert_rules=tokenizer.albert_rules,
    )
    qa = tf.reshape(
        qa_texts(normalized[:batch], tf.reshape(normalized[batch:], [-1, NUM_CHOICES])), [-1]
    )
    ids = tf.cast(tokenizer(tf.concat([article, qa], 0)), tf.int64)
    qa_ids = ids[batch:]
    qa_lengths = qa_ids.row_lengths()
    qa_ids = _keep(qa_ids, tf.maximum(qa_lengths - max_qa_length, 0), qa_lengths)
    article_ids = tf.gather(ids[:batch], tf.repeat(tf.range(batch), NUM_CHOICES))
    budget = max_seq_length - 3 - qa_ids.row_lengths()
    article_ids = _keep(article_ids, tf.zeros_like(budget), budget)
    ids, type_ids = tft.combine_segments(
        [article_ids, qa_ids], start_of_sequence_id=cls_id, end_of_segment_id=sep_id
    )
    longest = tf.reduce_max(tf.concat([ids.row_lengths(), [3]], axis=0))
    length = tf.minimum((longest + bucket - 1) // bucket * bucket, max_seq_length)
    shape = tf.stack([ids.nrows(), length])

    def dense(values, default):
        return tf.reshape(
            tf.cast(values.to_tensor(default_value=default, shape=shape), tf.int32),
            [-1, NUM_CHOICES, length],
        )

    return {
        "input_word_ids": dense(ids, pad_id),
        "input_mask": dense(tf.ones_like(ids), 0),
        "input_type_ids": dense(type_ids, 0),
    }


def choice_head(model):
    """body(ids dict [B, 4, S]) -> {"probabilities" [B, 4], "answer" int64 [B]} (predict_ids)."""

    def body(inputs):
        logits = tf.cast(model(inputs, training=False), tf.float32)
        return {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "answer": tf.argmax(logits, axis=-1, output_type=tf.int64),
        }

    return body


def choices_body(model, tokenizer, special_ids, lower_case, max_seq_length, max_qa_length):
    """serve(article [B], question [B], options [B, 4]) -> the serving_default outputs:
    `pack_choices` with `tokenizer` (a `TextTokenizer`) and `special_ids` (an
    `AlbertPreprocessor`'s), then `choice_head`; also `AlbertMultipleChoice.predict` on raw
    text."""
    head = choice_head(model)

    def serve(article, question, options):
        return head(
            pack_choices(
                tokenizer,
                article,
                question,
                options,
                max_seq_length,
                max_qa_length,
                special_ids["cls_id"],
                special_ids["sep_id"],
                special_ids["pad_id"],
                lower_case,
            )
        )

    return serve


def export_multiple_choice(
    model,
    preprocessor,
    export_dir,
    max_qa_length=128,
    max_seq_length=None,
    version=None,
    write_warmup="auto",
):
    """Exports an `AlbertMultipleChoice` with a raw-text signature; returns EXPORT_DIR/<version>.

    Args:
        model: a trained `AlbertMultipleChoice` (4 choices).
        preprocessor: the task's `AlbertPreprocessor` (vocabulary, casing, special ids and, by
            default, max_seq_length).
        export_dir: base directory (local or gs://); versions are integer subdirectories.
        max_qa_length: pieces kept from the end of each question + option.
        max_seq_length: the longest packed choice (default: the preprocessor's).
        version: integer version (default: one more than the highest existing).
        write_warmup: True, False, or "auto" (write when tensorflow-serving-api is installed).
    """
    spec = multiple_choice_spec(model, preprocessor, max_qa_length, max_seq_length)
    return saved_model.build(spec, export_dir, version, write_warmup)


def multiple_choice_spec(model, preprocessor, max_qa_length=128, max_seq_length=None):
    """The `SavedModelSpec` of `export_multiple_choice` (arguments as there)."""
    if getattr(model, "num_choices", None) != NUM_CHOICES:
        raise ValueError(
            f"export_multiple_choice needs an AlbertMultipleChoice with "
            f"{NUM_CHOICES} choices, got {type(model).__name__}"
        )
    max_seq_length = int(max_seq_length or preprocessor.max_seq_length)
    check_lengths(max_seq_length, max_qa_length)
    max_positions = model.backbone.config.max_position_embeddings
    if max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions}"
        )
    model = float32_copy(model)
    tokenizer = TextTokenizer(
        preprocessor.model_proto,
        lower_case=preprocessor.lower_case,
        tex_quotes=preprocessor.tex_quotes,
        albert_rules=preprocessor.albert_rules,
        name="race_tokenizer",
    )
    head = choice_head(model)
    serve = choices_body(
        model,
        tokenizer,
        preprocessor.special_ids,
        preprocessor.lower_case,
        max_seq_length,
        max_qa_length,
    )

    def predict_ids(input_word_ids, input_mask, input_type_ids):
        return head(
            {
                "input_word_ids": input_word_ids,
                "input_mask": input_mask,
                "input_type_ids": input_type_ids,
            }
        )

    endpoints = {
        "serving_default": (serve, [_TEXT, _TEXT, _OPTIONS]),
        "predict_ids": (predict_ids, [_IDS, _IDS, _IDS]),
    }
    description = {
        "kind": "multiple_choice",
        "signatures": ["serving_default", "predict_ids"],
        "num_choices": NUM_CHOICES,
        "seq_length": max_seq_length,
        "max_qa_length": max_qa_length,
        "lower_case": preprocessor.lower_case,
        "albert_rules": preprocessor.albert_rules,
        "bucket": BUCKET,
    }
    return SavedModelSpec((model, tokenizer), endpoints, description, WARMUP_BATCHES)
