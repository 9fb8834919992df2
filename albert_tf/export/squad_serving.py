"""SQuAD answers from raw text in a SavedModel: `export_question_answerer`.

The served graph does what `build_features` + the model + `v1_predictions` / `v2_predictions`
do in Python, with TensorFlow and tensorflow-text ops only:

1. the question: `preprocess_text`, SentencePiece ids (digit-comma rule), cut to
   `max_query_length`;
2. the context: SentencePiece pieces with their CHARACTER spans in the raw context
   (`graph_offsets.pieces_with_offsets`, the in-graph twin of `squad_alignment.align_pieces`);
3. windows of ``max_seq_length - len(question) - 3`` context pieces, `doc_stride` apart, packed
   as ``[CLS] question [SEP] context [SEP]`` (padded to max_seq_length), each piece marked
   in the window where it has its most context;
4. the float32 model; the original's span search: v1, the top `n_best_size` starts x ends per
   window; v2, the model's beam; a span is valid when start <= end are context pieces, at
   most `max_answer_length` pieces, its start has its most context in the window and its
   text is not only whitespace; the best span of a question over all its windows, ties to the
   earlier window, start and end, as the Python sort;
5. its text: the raw context between the span's character offsets, stripped of whitespace.

`serving_default(question, context: tf.string [B])` returns `answer` (string [B]), `score`
(float32 [B]: v1 the start + end logit; v2 the start + end log-probability of the beam),
`start`, `end` (int64 [B] character offsets, end exclusive: ``context[start:end] == answer``)
and, for `AlbertSquadV2Model`, `has_answer_probability` (float32 [B], sigmoid of minus the null
score, the lowest `cls_logits` over the question's windows). Without a valid span, or (v2)
when the null score is above `null_threshold` (`apply_null_threshold`), the answer is "" with
start = end = -1 (v1's score is then -2e6, the Python placeholder's).

The answers equal the Python path's except where `graph_offsets` and the Python LCS
alignment disagree (ligatures, standalone combining marks, Hangul, U+00A8-like characters;
a context the LCS cannot align, which the Python path skips, is answered here).

>>> path = export_question_answerer(model, "30k-clean.model", "/tmp/serving/squad",
...                                 FeatureSettings(384, 128, 64))  # doctest: +SKIP
>>> serve = tf.saved_model.load(path).signatures["serving_default"]  # doctest: +SKIP
>>> serve(question=tf.constant(["Where?"]), context=tf.constant(["In Paris."]))  # doctest: +SKIP
"""

import tensorflow as tf

from albert_tf.data.squad_features import EMPTY_SCORE, NO_WINDOW_NULL_SCORE, FeatureSettings
from albert_tf.export import saved_model
from albert_tf.export.serving_spec import SavedModelSpec
from albert_tf.text import graph_offsets
from albert_tf.text.preprocessing_layers import TextTokenizer, bucketed_length

_TEXT = tf.TensorSpec([None], tf.string)
#: The score of "" when no span is valid: the Python placeholder's start + end logit.
NO_SPAN_SCORE = 2 * EMPTY_SCORE
_BIG = tf.int64.max
WARMUP = (
    {"question": ["Where is it?"], "context": ["It is in Paris, France."]},
    {"question": ["Wer?", ""], "context": ["Grüße aus Köln! " * 60, ""]},
)


PAD_MULTIPLE = 8


def _ceil_div(a, b):
    return (a + b - 1) // b


def question_windows(question_ids, context_ids, settings, cls_id, sep_id, pad_to_longest=False):
    """Windows of [CLS] question [SEP] context [SEP] over ragged ids [B, (n)] (as int64).

    Returns a dict: model inputs `input_word_ids`, `input_mask`, `input_type_ids`, `p_mask`
    (int32 [N, S]: S is max_seq_length, or with `pad_to_longest` the longest window rounded up
    to a multiple of 8); `example` (int64 [N]); `piece` (int64 [N, S], the flat index
    of the context piece at each position, -1 elsewhere); `max_context` (bool [N, S]).

    >>> out = question_windows(tf.ragged.constant([[7]], tf.int64),
    ...     tf.ragged.constant([[10, 11, 12, 13, 14]], tf.int64), FeatureSettings(8, 2, 2), 2, 3)
    >>> out["input_word_ids"].numpy().tolist()  # windows of 4 context pieces, 2 apart
    [[2, 7, 3, 10, 11, 12, 13, 3], [2, 7, 3, 12, 13, 14, 3, 0]]
    >>> out["max_context"].numpy().astype(int).tolist()
    [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0]]
    """
    seq = settings.max_seq_length
    query = tf.cast(question_ids, tf.int64)
    num_pieces = context_ids.row_lengths()
    query_length = query.row_lengths()
    window_length = seq - query_length - 3
    stride = tf.minimum(window_length, settings.doc_stride)
    count = tf.where(
        num_pieces > 0, 1 + _ceil_div(tf.maximum(num_pieces - window_length, 0), stride), 0
    )
    example = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    within = tf.ragged.range(count).flat_values
    start = within * tf.gather(stride, example)
    length = tf.minimum(tf.gather(window_length, example), tf.gather(num_pieces, example) - start)
    base = tf.gather(context_ids.row_starts(), example) + start
    pieces = tf.ragged.range(base, base + length)  # [N, (length)] flat piece indices
    window = tf.cast(pieces.value_rowids(), tf.int64)
    offset = pieces.flat_values - tf.gather(base, window)
    score = 100 * tf.minimum(offset, tf.gather(length, window) - 1 - offset) + tf.gather(
        length, window
    )
    total = tf.size(context_ids.flat_values, out_type=tf.int64)
    best = tf.math.unsorted_segment_max(score, pieces.flat_values, total)
    first = tf.math.unsorted_segment_min(
        tf.where(tf.equal(score, tf.gather(best, pieces.flat_values)), window, _BIG),
        pieces.flat_values,
        total,
    )
    owner = pieces.with_flat_values(tf.equal(tf.gather(first, pieces.flat_values), window))
    n = tf.size(example, out_type=tf.int64)

    def column(value, dtype=tf.int64):
        return tf.RaggedTensor.from_tensor(tf.fill([n, 1], tf.constant(value, dtype)))

    query_rows = tf.gather(query, example)
    ids = tf.concat(
        [
            column(cls_id),
            query_rows,
            column(sep_id),
            pieces.with_flat_values(tf.gather(context_ids.flat_values, pieces.flat_values)),
            column(sep_id),
        ],
        axis=1,
    )
    ones = tf.ones_like(query_rows)
    shape = [None, seq]
    if pad_to_longest:  # a short context does not pay for max_seq_length positions
        longest = tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0))
        width = bucketed_length(longest, PAD_MULTIPLE, seq)
        shape = tf.stack([n, tf.cast(width, tf.int64)])
    before = tf.concat([column(1), ones, column(1)], axis=1)  # [CLS] question [SEP]
    p_mask = tf.concat([column(0), ones, column(1), tf.zeros_like(pieces), column(1)], axis=1)
    type_ids = tf.concat([0 * before, tf.ones_like(pieces), column(1)], axis=1)
    false = tf.cast(0 * before, tf.bool)
    max_context = tf.concat([false, owner, column(False, tf.bool)], axis=1)
    piece = tf.concat([before * 0 - 1, pieces, column(-1)], axis=1)

    def dense(values, default, dtype=tf.int32):
        return tf.cast(
            values.to_tensor(default_value=tf.cast(default, values.dtype), shape=shape), dtype
        )

    return {
        "input_word_ids": dense(ids, 0),
        "input_mask": dense(tf.ones_like(ids), 0),
        "input_type_ids": dense(type_ids, 0),
        "p_mask": dense(p_mask, 1),
        "example": example,
        "piece": dense(piece, -1, tf.int64),
        "max_context": dense(max_context, False, tf.bool),
    }


def _solid_counts(context):
    """Dense int64 [B, C + 1]: non-whitespace characters before each character offset of the
    raw context (padded with int64 max, so that each row stays sorted)."""
    cp = tf.strings.unicode_decode(context, "UTF-8", errors="replace")
    solid = tf.logical_not(graph_offsets.is_whitespace(cp.flat_values))
    solid = cp.with_flat_values(tf.cast(solid, tf.int64))
    counts = tf.concat([tf.zeros([cp.nrows(), 1], tf.int64), tf.cumsum(solid, axis=1)], axis=1)
    counts = counts.to_tensor(default_value=_BIG)
    # One more column: an empty batch keeps a non-zero row length (as searchsorted needs).
    return tf.concat([counts, tf.fill([cp.nrows(), 1], _BIG)], axis=1)


def model_outputs(model, inputs):
    """The SQuAD model's outputs on packed windows (`question_windows`' dict), floats float32."""
    outputs = model(
        {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
        | ({"p_mask": inputs["p_mask"]} if is_v2(model) else {}),
        training=False,
    )
    return {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v for k, v in outputs.items()}


def candidates(model, outputs, settings, n_best_size):
    """(starts, ends, scores [N, K] in the Python order, per-window null score or None) from
    `model_outputs`."""
    if is_v2(model):
        repeat = model.end_n_top
        starts = tf.repeat(outputs["start_top_index"], repeat, axis=1)
        scores = (
            tf.repeat(outputs["start_top_log_probs"], repeat, axis=1) + outputs["end_top_log_probs"]
        )
        return (
            tf.cast(starts, tf.int64),
            tf.cast(outputs["end_top_index"], tf.int64),
            scores,
            tf.reshape(outputs["cls_logits"], [-1]),
        )
    k = min(n_best_size, settings.max_seq_length)
    start_values, start_index = tf.math.top_k(outputs["start_logits"], k)
    end_values, end_index = tf.math.top_k(outputs["end_logits"], k)
    starts = tf.repeat(start_index, k, axis=1)
    ends = tf.tile(end_index, [1, k])
    scores = tf.repeat(start_values, k, axis=1) + tf.tile(end_values, [1, k])
    return tf.cast(starts, tf.int64), tf.cast(ends, tf.int64), scores, None


def valid_spans(is_context, max_context, starts, ends, max_answer_length):
    """bool [N, K]: the graph twin of `squad_predictions.valid_spans` for windows
    (`is_context`, `max_context`: bool [N, S]) and candidates (`starts`, `ends`: [N, K]); the
    SavedModel and LiteRT graphs add their own "not only whitespace" test."""

    def take(values, index):
        return tf.gather(values, index, batch_dims=1)

    return (
        take(is_context, starts)
        & take(is_context, ends)
        & (starts <= ends)
        & (ends - starts + 1 <= max_answer_length)
        & take(max_context, starts)
    )


def _at_pieces(values, piece):
    """values.flat_values at the pieces' flat indices (0 where piece is -1)."""
    flat = tf.concat([values.flat_values, [0]], axis=0)
    return tf.gather(flat, tf.where(piece >= 0, piece, tf.size(flat, out_type=tf.int64) - 1))


def _pick(values, chosen, found):
    """values.flat[chosen] where found, else 0 (also for an empty `values`)."""
    flat = tf.concat([tf.reshape(values, [-1]), [0]], axis=0)
    return tf.gather(flat, tf.where(found, chosen, tf.size(flat, out_type=tf.int64) - 1))


def is_v2(model):
    """Whether `model` is the v2 beam model (`AlbertSquadV2Model`)."""
    return hasattr(model, "start_n_top")


def answer_body(model, tokenizer, settings, n_best_size, max_answer_length, null_threshold):
    """serve(question, context: tf.string [B]) -> the serving_default outputs (see the module
    docstring) of `model` with `tokenizer` (a `TextTokenizer`) and `settings` (a
    `FeatureSettings`); also the SQuAD models' `predict` on raw text."""
    sentencepiece, lower = tokenizer.sentencepiece, tokenizer.lower_case
    cls_id = int(sentencepiece.string_to_id("[CLS]"))
    sep_id = int(sentencepiece.string_to_id("[SEP]"))

    def serve(question, context):
        batch = tf.size(context, out_type=tf.int64)
        query = tokenizer(question)[:, : settings.max_query_length]
        split = graph_offsets.pieces_with_offsets(
            context, sentencepiece, lower, tex_quotes=tokenizer.tex_quotes
        )
        ids = split["pieces"].with_flat_values(
            tf.cast(sentencepiece.string_to_id(split["pieces"].flat_values), tf.int64)
        )
        # v2's beam masks every non-context position, so padding to the longest window gives
        # the same answers; v1 keeps the original's n-best over all max_seq_length positions.
        inputs = question_windows(query, ids, settings, cls_id, sep_id, pad_to_longest=is_v2(model))
        starts, ends, scores, null = candidates(
            model, model_outputs(model, inputs), settings, n_best_size
        )
        example, piece = inputs["example"], inputs["piece"]
        is_context = piece >= 0
        take = lambda values, index: tf.gather(values, index, batch_dims=1)  # noqa: E731
        char_start = _at_pieces(split["start"], piece)
        char_end = _at_pieces(split["end"], piece)
        begin, finish = take(char_start, starts), take(char_end, ends)
        counts = _solid_counts(context)
        rows = tf.broadcast_to(example[:, None], tf.shape(begin, out_type=tf.int64))
        solid = tf.gather_nd(counts, tf.stack([rows, tf.maximum(finish, 0)], -1)) > tf.gather_nd(
            counts, tf.stack([rows, tf.maximum(begin, 0)], -1)
        )
        valid = (
            valid_spans(is_context, inputs["max_context"], starts, ends, max_answer_length) & solid
        )
        # The best candidate per question; ties to the first in (window, start, end) order.
        flat_valid = tf.reshape(valid, [-1])
        flat_scores = tf.where(flat_valid, tf.reshape(scores, [-1]), -float("inf"))
        owner = tf.reshape(rows, [-1])
        best = tf.math.unsorted_segment_max(flat_scores, owner, batch)
        index = tf.range(tf.size(flat_scores, out_type=tf.int64))
        chosen = tf.math.unsorted_segment_min(
            tf.where(flat_valid & tf.equal(flat_scores, tf.gather(best, owner)), index, _BIG),
            owner,
            batch,
        )
        found = chosen < _BIG
        a, b = _pick(begin, chosen, found), _pick(finish, chosen, found)

        # Strip the span: its first and last non-whitespace characters.
        def solid_before(offsets):
            return tf.gather(counts, offsets[:, None], batch_dims=1)

        first = tf.searchsorted(counts, solid_before(a) + 1)[:, 0] - 1
        last = tf.searchsorted(counts, solid_before(b))[:, 0]
        outputs = {"score": tf.where(found, best, NO_SPAN_SCORE)}
        if null is not None:
            null_score = tf.minimum(
                tf.math.unsorted_segment_min(null, example, batch), NO_WINDOW_NULL_SCORE
            )
            outputs["has_answer_probability"] = tf.sigmoid(-null_score)
            found = found & (null_score <= null_threshold)
        start = tf.where(found, tf.cast(first, tf.int64), -1)
        end = tf.where(found, tf.cast(last, tf.int64), -1)
        answer = tf.strings.substr(
            context, tf.maximum(start, 0), tf.maximum(end - start, 0), unit="UTF8_CHAR"
        )
        outputs.update(answer=tf.where(found, answer, ""), start=start, end=end)
        return outputs

    return serve


def _text_tokenizer(spm_model, settings):
    tokenizer = spm_model
    if isinstance(tokenizer, TextTokenizer):
        model = tokenizer.model_proto
    elif hasattr(tokenizer, "model_proto"):  # SentencePieceTokenizer, AlbertPreprocessor, ...
        model = tokenizer.model_proto
    else:
        model = tokenizer
    for name in ("lower_case", "tex_quotes"):
        value = getattr(tokenizer, name, getattr(settings, name))
        if value != getattr(settings, name):
            raise ValueError(
                f"the tokenizer's {name}={value} differs from "
                f"settings.{name}={getattr(settings, name)}"
            )
    return TextTokenizer(model, lower_case=settings.lower_case, tex_quotes=settings.tex_quotes)


def export_question_answerer(
    model,
    spm_model,
    export_dir,
    settings=FeatureSettings(),
    n_best_size=20,
    max_answer_length=30,
    null_threshold=0.0,
    version=None,
    write_warmup="auto",
    compute_dtype="float32",
):
    """Exports an `AlbertQuestionAnswerer` or `AlbertSquadV2Model` answering raw questions on
    raw contexts (see the module docstring); returns EXPORT_DIR/<version>.

    Args:
        model: the trained model (served as a copy in `compute_dtype`).
        spm_model: the SentencePiece model (path or bytes), or a tokenizer holding it
            (`SentencePieceTokenizer`, `TextTokenizer`, `AlbertPreprocessor`).
        export_dir: base directory (local or gs://); versions are integer subdirectories.
        settings: the `FeatureSettings` of training (window length, stride, question length,
            casing, TeX quotes).
        n_best_size: v1: starts and ends kept per window (the original's flag).
        max_answer_length: longest answer in pieces.
        null_threshold: v2: a question whose null score is above it gets "".
        version: integer version (default: one more than the highest existing).
        write_warmup: True, False, or "auto" (when tensorflow-serving-api is installed).
        compute_dtype: "float32" or "bfloat16" (as `saved_model.export_classifier`).
    """
    spec = question_answerer_spec(
        model, spm_model, settings, n_best_size, max_answer_length, null_threshold, compute_dtype
    )
    return saved_model.build(spec, export_dir, version, write_warmup)


def question_answerer_spec(
    model,
    spm_model,
    settings=FeatureSettings(),
    n_best_size=20,
    max_answer_length=30,
    null_threshold=0.0,
    compute_dtype="float32",
):
    """The `SavedModelSpec` of `export_question_answerer` (arguments as there)."""
    if not isinstance(settings, FeatureSettings):
        raise TypeError(f"settings must be a FeatureSettings, got {type(settings).__name__}")
    max_positions = model.backbone.config.max_position_embeddings
    if settings.max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={settings.max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions}"
        )
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(
            f"n_best_size ({n_best_size}) and max_answer_length "
            f"({max_answer_length}) must be positive"
        )
    served = saved_model.served_copy(model, compute_dtype)
    tokenizer = _text_tokenizer(spm_model, settings)
    body = answer_body(
        served, tokenizer, settings, n_best_size, max_answer_length, float(null_threshold)
    )
    v2 = is_v2(served)
    outputs = ["answer", "score", "start", "end"] + (["has_answer_probability"] if v2 else [])
    description = {
        "kind": "question_answerer_v2" if v2 else "question_answerer",
        "compute_dtype": compute_dtype,
        "signatures": ["serving_default"],
        "inputs": ["question", "context"],
        "outputs": outputs,
        "max_seq_length": settings.max_seq_length,
        "doc_stride": settings.doc_stride,
        "max_query_length": settings.max_query_length,
        "lower_case": settings.lower_case,
        "tex_quotes": tokenizer.tex_quotes,
        "n_best_size": int(n_best_size),
        "max_answer_length": int(max_answer_length),
        "null_threshold": float(null_threshold) if v2 else None,
    }
    endpoints = {"serving_default": (body, [_TEXT, _TEXT])}
    return SavedModelSpec((served, tokenizer), endpoints, description, WARMUP)
