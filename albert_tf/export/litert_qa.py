"""LiteRT (TFLite) SQuAD answerers: raw question and context in, the best answer out.

`export_litert_qa` writes a `.tflite` file whose `serving_default` signature takes `question`
and `context` (UTF-8 strings [B]) and returns, per question:

- `answer` (string [B]): the answer's bytes of the raw context ("" when there is none);
- `start_byte`, `end_byte` (int32 [B]): its UTF-8 byte offsets in the context (end exclusive,
  -1 when there is none): ``context.encode()[start_byte:end_byte] == answer``;
- `start_piece`, `end_piece` (int32 [B]): the span's first and last context pieces (indices
  into the context's SentencePiece ids, -1 when there is none);
- `score` (float32 [B]): v1 the start + end logit, v2 the start + end log-probability of the
  beam (-2e6 without a valid span), as the SavedModel (`export.squad_serving`);
- `num_windows` (int32 [B]) and `truncated` (bool [B]: the context had more pieces than
  `max_windows` windows hold; its end was not read);
- v2 (`AlbertSquadV2Model`): `has_answer` (bool [B]: a valid span and a null score, the lowest
  `cls_logits` over the windows, <= `null_threshold`) and `has_answer_probability` (sigmoid of
  minus the null score).

Static shapes: every question is packed into exactly `max_windows` windows of
`settings.max_seq_length` positions, ``[CLS] question [SEP] context [SEP]``, the question cut
to `max_query_length` pieces, windows `doc_stride` pieces apart (as `question_windows`); the
model always runs on B x max_windows windows (unused ones are masked out of the answer). A
context longer than the windows cover, ``(max_windows - 1) * stride + window`` pieces, is
truncated (`truncated` is True): its answer comes from its first part.

The span search is the SavedModel's (`model_outputs`, `candidates`: v1 the top `n_best_size`
starts x ends per window, v2 the model's beam; start <= end context pieces, at most
`max_answer_length`, the start in its max-context window, not only whitespace; the best
score, ties to the earlier window, start, end).

Text: each whitespace-separated word of the context is tokenized on its own with
`LiteTextInputs.tokenize` (the pieces of the whole context: pieces never cross whitespace).
A piece's bytes in the raw context come from its word's byte offsets
(`WhitespaceTokenizeWithOffsetsV2`) and a table of each vocabulary piece's UTF-8 length
(`piece_bytes`), when the word's pieces spell exactly its bytes (no [unk], no piece starting
inside a UTF-8 character, the normalizer changed no length: ASCII, most cased text); otherwise
every piece of the word spans the whole word. `ByteSplitByOffsets` cuts the answer out of the
raw context (tensorflow-text's `FastSentencepieceDetokenize` is TFLite-registered but crashes
the interpreter; it would also give normalized text). Answers therefore equal the SavedModel's
except where the tokenizations differ (see `litert.LiteTextInputs`) or a span starts or ends
inside a word that is not spelled exactly (the answer then holds the whole word).

>>> from albert_tf.data.squad_features import FeatureSettings
>>> export_litert_qa(model, "30k-clean.model", "qa.tflite",
...                  FeatureSettings(384, 128, 64), max_windows=4)  # doctest: +SKIP
>>> answer = litert.interpreter("qa.tflite").get_signature_runner()  # doctest: +SKIP
>>> out = answer(question=np.array([b"Where?"]), context=np.array([b"In Paris."]))  # doctest: +SKIP
"""

import tensorflow as tf
import tensorflow_text as tft

from albert_tf.data.squad_features import NO_WINDOW_NULL_SCORE
from albert_tf.export import dense, litert, litert_quiet
from albert_tf.export.squad_serving import (
    NO_SPAN_SCORE,
    candidates,
    is_v2,
    model_outputs,
    valid_spans,
)

_BIG = 2**31 - 1
UNKNOWN_BYTES = 255  # `piece_bytes` of [unk]: its text in the context is unknown
_TEXTS = [tf.TensorSpec([None], tf.string, name="question")]
_TEXTS.append(tf.TensorSpec([None], tf.string, name="context"))
#: Model inputs of a window (the v1 model ignores p_mask).
WINDOW_KEYS = ("input_word_ids", "input_mask", "input_type_ids", "p_mask")


def piece_bytes(spm_model):
    """uint8 [vocab]: UTF-8 bytes of each piece's text ("\u2581" dropped; control pieces 0,
    byte pieces 1, [unk] `UNKNOWN_BYTES`)."""
    import numpy as np

    from albert_tf.text.tokenizer import load_processor

    _, sp = load_processor(spm_model)
    lengths = np.zeros([sp.GetPieceSize()], np.uint8)
    for i in range(len(lengths)):
        if sp.IsUnknown(i):
            lengths[i] = UNKNOWN_BYTES
        elif sp.IsByte(i):
            lengths[i] = 1
        elif not sp.IsControl(i):
            lengths[i] = min(len(sp.IdToPiece(i).replace("\u2581", "").encode("utf-8")), 254)
    return lengths


def question_windows(q_ids, q_splits, ids, splits, settings, max_windows, cls_id, sep_id, pad_id):
    """`max_windows` windows of [CLS] question [SEP] context [SEP] per question, dense: the
    LiteRT twin of `squad_serving.question_windows` (and of the Python
    `squad_features.window_spans` + `squad_features.max_context_windows`).

    Args:
        q_ids, q_splits: the questions' piece ids (int32 [Q]) and row_splits (int32 [B + 1]).
        ids, splits: the contexts' piece ids and row_splits.
        settings: a `FeatureSettings` (max_seq_length, doc_stride, max_query_length).
        max_windows: windows per question (fixed; a longer context is truncated).
        cls_id, sep_id, pad_id: the special pieces.

    Returns a dict: model inputs (`WINDOW_KEYS`, int32 [B, W, S]); per position `piece` (the
    context piece index in its context, -1 elsewhere), `flat` (its index in `ids`),
    `is_context`, `max_context` (bool [B, W, S]); per question `num_windows` (int32 [B]) and
    `truncated` (bool [B]).
    """
    s = settings
    seq, windows = s.max_seq_length, max_windows
    q_length = tf.minimum(q_splits[1:] - q_splits[:-1], s.max_query_length)
    num_pieces = splits[1:] - splits[:-1]
    window_length = seq - q_length - 3
    stride = tf.minimum(window_length, s.doc_stride)
    needed = tf.maximum(num_pieces - window_length, 0)
    count = tf.where(num_pieces > 0, 1 + (needed + stride - 1) // stride, 0)
    used = tf.minimum(count, windows)
    w = tf.range(windows)[tf.newaxis, :]  # [1, W]
    start = w * stride[:, tf.newaxis]  # [B, W]
    length = tf.where(
        w < used[:, tf.newaxis],
        tf.minimum(window_length[:, tf.newaxis], num_pieces[:, tf.newaxis] - start),
        0,
    )
    zeros = tf.zeros_like(start)[:, :, tf.newaxis] + tf.zeros([1, 1, seq], tf.int32)
    position = tf.range(seq)[tf.newaxis, tf.newaxis, :] + zeros  # [B, W, S]
    q_end = q_length[:, tf.newaxis, tf.newaxis] + zeros  # last question position
    local = position - q_end - 2  # position in the window's context
    window_end = length[:, :, tf.newaxis] + zeros
    is_context = (local >= 0) & (local < window_end)
    piece = start[:, :, tf.newaxis] + local  # index among the example's pieces
    flat = tf.clip_by_value(splits[:-1, tf.newaxis, tf.newaxis] + piece, 0, tf.size(ids))
    q_flat = tf.clip_by_value(
        q_splits[:-1, tf.newaxis, tf.newaxis] + position - 1, 0, tf.size(q_ids)
    )
    word_ids = tf.where(
        is_context,
        tf.gather(tf.concat([ids, [pad_id]], 0), flat),
        tf.where(tf.equal(local, window_end), sep_id, pad_id),
    )
    word_ids = tf.where(tf.equal(position, q_end + 1), sep_id, word_ids)
    is_question = (position >= 1) & (position <= q_end)
    word_ids = tf.where(is_question, tf.gather(tf.concat([q_ids, [pad_id]], 0), q_flat), word_ids)
    word_ids = tf.where(tf.equal(position, 0), cls_id, word_ids)
    # Max context (question_windows' rule): piece k's score in every window w'.
    k = piece[..., tf.newaxis]  # [B, W, S, 1]
    offset = k - start[:, tf.newaxis, tf.newaxis, :]
    others = length[:, tf.newaxis, tf.newaxis, :]
    score = tf.where(
        (offset >= 0) & (offset < others),
        100 * tf.minimum(offset, others - 1 - offset) + others,
        -1,
    )
    best = tf.reduce_max(score, axis=-1, keepdims=True)
    first = tf.reduce_min(tf.where(tf.equal(score, best), tf.range(windows), windows), -1)
    owner = tf.equal(first, tf.range(windows)[tf.newaxis, :, tf.newaxis])
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(position < q_end + 3 + window_end, tf.int32),
        "input_type_ids": tf.cast((local >= 0) & (local <= window_end), tf.int32),
        "p_mask": 1 - tf.cast(tf.equal(position, 0) | is_context, tf.int32),
        "piece": tf.where(is_context, piece, -1),
        "is_context": is_context,
        "max_context": is_context & owner,
        "flat": flat,
        "num_windows": used,
        "truncated": count > windows,
    }


class LiteQuestionWindows:
    """Raw questions and contexts -> `max_windows` windows each, with TFLite-supported ops only.

    Args:
        preprocessor: an `AlbertPreprocessor` (vocabulary, casing) for `litert.LiteTextInputs`.
        settings: the `FeatureSettings` of training (max_seq_length, doc_stride,
            max_query_length).
        max_windows: windows per question (fixed).

    >>> from albert_tf.data.squad_features import FeatureSettings
    >>> from albert_tf.models.preprocessor import AlbertPreprocessor
    >>> windows = LiteQuestionWindows(AlbertPreprocessor("30k-clean.model"),
    ...                               FeatureSettings(12, 4, 4), max_windows=3)
    >>> out = windows(tf.constant(["Where?"]), tf.constant(["It is in Paris, France."]))
    >>> out["input_word_ids"].shape, out["num_windows"].numpy(), out["truncated"].numpy()
    (TensorShape([1, 3, 12]), array([3], dtype=int32), array([False]))
    """

    def __init__(self, preprocessor, settings, max_windows):
        if max_windows < 1:
            raise ValueError(f"max_windows must be >= 1, got {max_windows}")
        self.text = litert.LiteTextInputs(preprocessor, settings.max_seq_length)
        self.settings = settings
        self.max_windows = int(max_windows)
        self.piece_bytes = tf.constant(piece_bytes(preprocessor.model_proto))

    def context_pieces(self, context):
        """Piece ids of the raw contexts (tf.string [B]) with their UTF-8 byte spans: ids,
        begin, end (int32 [P]) and row_splits (int32 [B + 1])."""
        words, word_begin, word_end = tft.WhitespaceTokenizer().tokenize_with_offsets(context)
        word_splits = tf.cast(words.row_splits, tf.int32)
        word_begin = tf.cast(word_begin.flat_values, tf.int32)
        word_end = tf.cast(word_end.flat_values, tf.int32)
        ids, splits = self.text.tokenize(words.flat_values)
        word = dense.row_ids(splits, tf.size(ids))  # the word of each piece
        length = tf.cast(tf.gather(self.piece_bytes, ids), tf.int32)
        cumulative = tf.concat([[0], tf.cumsum(length)], axis=0)
        first = tf.gather(word_begin, word)
        begin = first + cumulative[:-1] - tf.gather(cumulative, tf.gather(splits, word))
        # A piece is misplaced when it is [unk] or starts inside a UTF-8 character.
        raw = tft.ByteSplitter().split(context)
        raw_bytes = tf.concat([tf.cast(raw.flat_values, tf.int32), [0]], axis=0)
        example = tf.gather(dense.row_ids(word_splits, tf.size(word_begin)), word)
        at = tf.gather(tf.cast(raw.row_splits, tf.int32), example) + begin
        byte = tf.gather(raw_bytes, tf.minimum(at, tf.size(raw_bytes) - 1))
        misplaced = (length == UNKNOWN_BYTES) | ((byte >= 0x80) & (byte < 0xC0))
        misplaced = tf.concat([[0], tf.cumsum(tf.cast(misplaced, tf.int32))], axis=0)
        spelled = tf.equal(
            dense.span_sums(splits[:-1], splits[1:], cumulative), word_end - word_begin
        )
        spelled &= tf.equal(dense.span_sums(splits[:-1], splits[1:], misplaced), 0)
        spelled = tf.gather(spelled, word)
        begin = tf.where(spelled, begin, first)
        end = tf.where(spelled, begin + length, tf.gather(word_end, word))
        # A span ends where its last non-empty piece does (a "\u2581" piece is empty): the
        # answer is stripped of whitespace, as the SavedModel's.
        filled = tf.cumsum(tf.cast(end > begin, tf.int32))
        last = tf.gather(
            tf.concat([tf.cast(tf.where(end > begin)[:, 0], tf.int32), [0]], 0),
            tf.maximum(filled - 1, 0),
        )
        same = (filled > 0) & tf.equal(tf.gather(example, last), example)
        return {
            "ids": ids,
            "begin": begin,
            "end": tf.where(same, tf.gather(end, last), 0),
            "row_splits": tf.gather(splits, word_splits),
        }

    def __call__(self, question, context):
        """tf.string [B] each -> dict: model inputs (`WINDOW_KEYS`, int32 [B, W, S]); per
        position `piece` (the context piece index, int32 [B, W, S]), `is_context`,
        `max_context` (bool [B, W, S]), `begin` / `end` (the piece's bytes); per question
        `num_windows` (int32 [B]) and `truncated` (bool [B])."""
        text = self.text
        q_ids, q_splits = text.tokenize(question)
        pieces = self.context_pieces(context)
        special = (text.cls_id, text.sep_id, text.pad_id)
        windows = question_windows(
            q_ids,
            q_splits,
            pieces["ids"],
            pieces["row_splits"],
            self.settings,
            self.max_windows,
            *special,
        )
        flat, is_context = windows.pop("flat"), windows["is_context"]
        for key in ("begin", "end"):
            values = tf.gather(tf.concat([pieces[key], [0]], 0), flat)
            windows[key] = tf.where(is_context, values, 0)
        return windows


def serving_function(
    model,
    preprocessor,
    settings,
    max_windows=4,
    n_best_size=20,
    max_answer_length=30,
    null_threshold=0.0,
    details=False,
):
    """The `tf.function` (question, context: tf.string [B]) that `export_litert_qa` converts,
    for a float32 copy of `model` (`AlbertQuestionAnswerer` or `AlbertSquadV2Model`); see the
    module docstring for its outputs. `details` adds the packed windows (`WINDOW_KEYS`, int32
    [B, W, S]) and the model's outputs per window ([B, W, ...]). Runs in TensorFlow too."""
    from albert_tf.export.saved_model import float32_copy

    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError(
            f"n_best_size ({n_best_size}) and max_answer_length ({max_answer_length}) must be "
            "positive"
        )
    from albert_tf.models.question_answering import AlbertQuestionAnswerer, AlbertSquadV2Model

    if not isinstance(model, (AlbertQuestionAnswerer, AlbertSquadV2Model)):
        raise TypeError(
            f"expected an AlbertQuestionAnswerer or AlbertSquadV2Model, got {type(model).__name__}"
        )
    max_positions = model.backbone.config.max_position_embeddings
    if settings.max_seq_length > max_positions:
        raise ValueError(
            f"max_seq_length={settings.max_seq_length} exceeds the model's "
            f"max_position_embeddings={max_positions}"
        )
    windows = LiteQuestionWindows(preprocessor, settings, max_windows)
    model = float32_copy(model)
    seq, count = settings.max_seq_length, windows.max_windows
    v2 = is_v2(model)

    def serve(question, context):
        packed = windows(question, context)
        batch = tf.shape(packed["input_word_ids"])[0]
        flat = {k: tf.reshape(v, [-1, seq]) for k, v in packed.items() if v.shape.rank == 3}
        outputs = model_outputs(model, flat)
        starts, ends, scores, null = candidates(model, outputs, settings, n_best_size)
        starts, ends = tf.cast(starts, tf.int32), tf.cast(ends, tf.int32)

        def take(key, index):  # the value of `key` at each candidate position: [B, W * K]
            return tf.reshape(tf.gather(flat[key], index, batch_dims=1), [batch, -1])

        begin, end = take("begin", starts), take("end", ends)
        spans = valid_spans(
            flat["is_context"], flat["max_context"], starts, ends, max_answer_length
        )
        valid = tf.reshape(spans, [batch, -1]) & (begin < end)
        scores = tf.where(valid, tf.reshape(scores, [batch, -1]), -float("inf"))
        best = tf.reduce_max(scores, axis=1)
        index = tf.range(tf.shape(scores)[1])[tf.newaxis, :]
        chosen = tf.reduce_min(
            tf.where(valid & tf.equal(scores, best[:, tf.newaxis]), index, _BIG), axis=1
        )
        found = chosen < _BIG
        chosen = tf.where(found, chosen, 0)[:, tf.newaxis]

        def pick(values):
            return tf.gather(values, chosen, batch_dims=1)[:, 0]

        answered = found
        result = {"score": tf.where(found, best, NO_SPAN_SCORE)}
        if v2:
            active = tf.range(count)[tf.newaxis, :] < packed["num_windows"][:, tf.newaxis]
            per_window = tf.where(active, tf.reshape(null, [batch, count]), NO_WINDOW_NULL_SCORE)
            null_score = tf.minimum(tf.reduce_min(per_window, axis=1), NO_WINDOW_NULL_SCORE)
            answered = found & (null_score <= null_threshold)
            result["has_answer"] = answered
            result["has_answer_probability"] = tf.sigmoid(-null_score)
        start_byte = tf.where(answered, pick(begin), -1)
        end_byte = tf.where(answered, pick(end), -1)
        rows = tf.range(tf.cast(batch, tf.int64) + 1)  # one span per context

        def offsets(values):
            values = tf.maximum(values, 0)
            return tf.RaggedTensor.from_row_splits(values, rows, validate=False)

        cut = tft.ByteSplitter().split_by_offsets(context, offsets(start_byte), offsets(end_byte))
        result.update(
            answer=cut.flat_values,
            start_byte=start_byte,
            end_byte=end_byte,
            start_piece=tf.where(answered, pick(take("piece", starts)), -1),
            end_piece=tf.where(answered, pick(take("piece", ends)), -1),
            num_windows=packed["num_windows"],
            truncated=packed["truncated"],
        )
        if details:
            for key in WINDOW_KEYS:
                result[key] = packed[key]
            for key, value in outputs.items():
                result[key] = tf.reshape(value, tf.concat([[batch, count], tf.shape(value)[1:]], 0))
        return result

    return tf.function(serve, input_signature=_TEXTS, autograph=False)


def squad_preprocessor(spm_model, settings):
    """An `AlbertPreprocessor` of `spm_model` (path or bytes) with `settings`' casing and
    length; `spm_model` itself when it is already an `AlbertPreprocessor`."""
    from albert_tf.models.preprocessor import AlbertPreprocessor

    if isinstance(spm_model, AlbertPreprocessor):
        return spm_model
    return AlbertPreprocessor(
        spm_model,
        lower_case=settings.lower_case,
        max_seq_length=settings.max_seq_length,
        tex_quotes=settings.tex_quotes,
    )


@litert_quiet.quiet()
def export_litert_qa(
    model,
    spm_model,
    path,
    settings,
    variant="float32",
    max_windows=4,
    n_best_size=20,
    max_answer_length=30,
    null_threshold=0.0,
    representative_texts=None,
):
    """Writes a SQuAD model answering raw questions on raw contexts to the `.tflite` file
    `path` (atomically); returns its size in bytes.

    Args:
        model: the trained `AlbertQuestionAnswerer` or `AlbertSquadV2Model` (float32 copy).
        spm_model: the SentencePiece model (path or bytes) or an `AlbertPreprocessor`.
        path: output file (local or gs://).
        settings: the `FeatureSettings` of training.
        variant: one of `litert.VARIANTS`.
        max_windows: doc-stride windows per question (fixed; longer contexts are truncated).
        n_best_size, max_answer_length, null_threshold: as `export_question_answerer`.
        representative_texts: "int8" calibration batches of [questions, contexts].
    """
    from albert_tf import files

    fn = serving_function(
        model,
        squad_preprocessor(spm_model, settings),
        settings,
        max_windows,
        n_best_size,
        max_answer_length,
        null_threshold,
    )
    data = litert.convert(fn, variant, representative_texts)
    files.write_atomic(path, data)
    return len(data)


def _decoded(outputs):
    """Outputs as NumPy with the answers decoded (invalid UTF-8 replaced)."""
    import numpy as np

    result = {k: np.asarray(v) for k, v in outputs.items()}
    result["answer"] = np.array(
        [a.decode("utf-8", "replace") if isinstance(a, bytes) else a for a in result["answer"]],
        object,
    )
    return result


def _batches(questions, contexts, batch_size):
    for start in range(0, len(questions), batch_size):
        end = start + batch_size
        yield questions[start:end], contexts[start:end]


def _concatenated(parts):
    import numpy as np

    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


def run_file(path, questions, contexts, batch_size=16):
    """Runs the `.tflite` file on raw questions and contexts (lists of str) in batches; returns
    its outputs as NumPy arrays (`answer` decoded to str)."""
    import numpy as np

    runner = litert.interpreter(path).get_signature_runner()
    parts = []
    for q, c in _batches(questions, contexts, batch_size):
        encoded = [np.array([t.encode("utf-8") for t in x], object) for x in (q, c)]
        parts.append(_decoded(runner(question=encoded[0], context=encoded[1])))
    return _concatenated(parts)


def saved_model_answers(export_path, questions, contexts, batch_size=64):
    """The `serving_default` outputs of a SavedModel written by `export_question_answerer`
    on raw questions and contexts, as NumPy arrays (`answer` decoded to str)."""
    serve = tf.saved_model.load(export_path).signatures["serving_default"]
    parts = []
    for q, c in _batches(questions, contexts, batch_size):
        result = serve(question=tf.constant(q, tf.string), context=tf.constant(c, tf.string))
        parts.append(_decoded({k: v.numpy() for k, v in result.items()}))
    return _concatenated(parts)


def litert_spec(
    model,
    preprocessor,
    settings,
    examples,
    name,
    saved_model_spec,
    scores,
    n_best_size=20,
    max_answer_length=30,
    null_threshold=0.0,
    max_eval_examples=None,
    max_windows=4,
):
    """The `LiteRTSpec` of a SQuAD model (`serving_function`), measured against its float32
    SavedModel (`saved_model_spec()`, written to a temporary directory): the rate of equal
    answers, and the task's `scores` of both against the gold answers.

    Args:
        model, preprocessor, settings, max_windows, n_best_size, max_answer_length,
            null_threshold: as `serving_function`.
        examples: (split, limit) -> the `SquadExample`s of "train" (the "int8" calibration
            questions) and "dev".
        name: the task's, for the report.
        saved_model_spec: () -> the reference's `SavedModelSpec`.
        scores: (examples, answers) -> {"exact_match", "f1"} (the task's SQuAD metric).
        max_eval_examples: dev questions measured on (default: all).
    """
    import tempfile

    import numpy as np

    from albert_tf.export import saved_model
    from albert_tf.export.serving_spec import LiteRTSpec

    fn = serving_function(
        model,
        preprocessor,
        settings,
        max_windows,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        null_threshold=null_threshold,
    )
    dev = examples("dev", max_eval_examples)

    def reference(inputs):
        with tempfile.TemporaryDirectory() as tmp:
            path = saved_model.build(saved_model_spec(), tmp, write_warmup=False)
            return saved_model_answers(path, inputs["question"], inputs["context"])

    def header(reference):
        return {
            "kind": "squad",
            "task": name,
            "seq_length": settings.max_seq_length,
            "doc_stride": settings.doc_stride,
            "max_query_length": settings.max_query_length,
            "max_windows": int(max_windows),
            "lower_case": settings.lower_case,
            "tex_quotes": settings.tex_quotes,
            "null_threshold": null_threshold if is_v2(model) else None,
            "eval_examples": len(dev),
            "reference": "the float32 SavedModel QA export, export_question_answerer",
            "reference_scores": scores(dev, reference["answer"]),
        }

    def calibration(count, batch_size):
        train = examples("train", count)
        questions = [e.question_text for e in train]
        return [list(b) for b in _batches(questions, [e.context_text for e in train], batch_size)]

    def score(outputs, reference):
        same = outputs["answer"] == reference["answer"]
        entry = {
            "answer_agreement": float(np.mean(same)) if len(dev) else 1.0,
            "truncated": float(np.mean(outputs["truncated"])) if len(dev) else 0.0,
        }
        entry.update(scores(dev, outputs["answer"]))
        return entry

    def run(path, inputs, batch_size):
        return run_file(path, inputs["question"], inputs["context"], batch_size)

    return LiteRTSpec(
        function=fn,
        inputs={
            "question": [e.question_text for e in dev],
            "context": [e.context_text for e in dev],
        },
        calibration=calibration,
        run=run,
        reference=reference,
        header=header,
        score=score,
        format_report=format_report,
        unit="questions",
    )


def format_report(report):
    """The SQuAD report as a text table (one line per variant)."""
    variants = report["variants"]
    truncated = next(iter(variants.values()), {}).get("truncated", 0.0)
    lines = [
        f"{report['task']} ({report['kind']}), max_seq_length {report['seq_length']}, "
        f"{report['max_windows']} windows of doc_stride {report['doc_stride']}, "
        f"{report['eval_examples']} dev questions ({100 * truncated:.1f}% of contexts "
        "truncated)" + litert.passes_note(report),
        f"{'variant':<13}{'bytes':>11}{'x f32':>7}{'model x':>8}{'answer agr':>11}"
        f"{'EM':>8}{'F1':>8}{'passes':>8}",
    ]
    for name, e in variants.items():
        lines.append(
            f"{name:<13}{e['bytes']:>11,}{litert.ratio_column(e, 'size_ratio'):>7}"
            f"{litert.ratio_column(e, 'model_size_ratio'):>8}{e['answer_agreement']:>11.4f}"
            f"{e['exact_match']:>8.2f}{e['f1']:>8.2f}{litert.passes_column(e):>8}"
        )
    ref = report["reference_scores"]
    lines.append(
        f"reference ({report['reference']}) EM {ref['exact_match']:.2f} F1 {ref['f1']:.2f}"
    )
    return "\n".join(lines)
