"""LiteRT (TFLite) files that take raw text: tokenization and packing run inside the model.

`export_litert` writes one `.tflite` file (atomically: a hidden temporary file renamed into
place) whose `serving_default` signature takes raw UTF-8 strings:

- classifier: text (+ text_pair) string [B] -> probabilities, logits float32 [B, C], label
  int64 [B] (regression: score [B]);
- token classifier: text string [B] -> probabilities float32 [B, W, C], tag_id int64 [B, W]
  (-1 as padding), word_start, word_end int64 [B, W] (UTF-8 byte offsets of each word in its
  text, end exclusive; -1 as padding), num_words int64 [B].

The file needs only TFLite builtin ops and tensorflow-text's TFLite ops (no Flex delegate).
Register the latter in the interpreter (see `interpreter`):

    from ai_edge_litert.interpreter import InterpreterWithCustomOps
    import tensorflow_text
    interpreter = InterpreterWithCustomOps(
        model_path="model.tflite",
        custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)
    interpreter.get_signature_runner()(text=np.array([b"Great!"]))

Text preprocessing (`LiteTextInputs`) gives `AlbertPreprocessor`'s ids with TFLite ops only
(`albert_tf.export.litert_text`): `FastSentencepieceTokenizer` runs a copy of the SentencePiece
model whose normalizer also does ALBERT's `preprocess_text` (whitespace, optionally TeX quotes, NFKD
without combining marks, lowercase), then a table built from the vocabulary applies the
digit-comma re-split ("9,000," -> "9", ",", "000", ",") to the ids. What still differs (a
capital sigma ending the text, a Hangul syllable + final jamo, invalid UTF-8, ties between
equal-score segmentations) is listed in `litert_text`; `token_agreement` measures it.

Packing: `[CLS] a [SEP]` (or `[CLS] a [SEP] b [SEP]`) in exactly `max_seq_length` positions (fixed
shape). Truncation keeps the first ids of each text: "round_robin" gives the budget
(`max_seq_length` - 2 or - 3) one id at a time to each text in turn (the first text gets the odd
one; the original ALBERT/BERT pair rule), "longest_first" cuts the longer text first (the
second gets the odd one); as `SegmentPacker`. The token classifier splits raw text into words
by its word convention (`albert_tf.data.word_convention`, recorded by the fine-tuning run):
"whitespace" (`WhitespaceTokenizer`) or "punctuation" (then each punctuation character is cut
out of the words on their UTF-8 bytes with builtin ops and a codepoint table, `byte_words`: the
same words as the SavedModel's `graph_words.split_words` except where ICU's whitespace differs
from Python's, e.g. U+001C-U+001F are not whitespace here). It tokenizes each word on its own,
keeps the words whose first piece fits in one window of `max_seq_length` - 2 pieces and tags
them (no sliding windows: the words past the window are not tagged). A fine-tuned tagger's
report holds "agreement_with_dev_predictions": the reference's tags on the dev sentences joined
by spaces against the runner's dev predictions (`dev_tagger_agreement`), with a WARNING below
99%.

Variants: "float32"; "float16" (weights stored as float16); "int8_dynamic" (dynamic-range:
int8 weights, float activations); "int8" (integer weights and activations calibrated on a
representative data set of raw texts; ops without an int8 kernel, such as the tokenizer and
the softmaxes of the while loop, stay float).

`build` writes the variants of any task's `serving_spec.LiteRTSpec` (`text_spec` here for
classifiers and token classifiers, `litert_qa.litert_spec` for SQuAD; `export_finetuned` takes
it from `task.serving_spec`), measures each against the spec's reference and marks it "passes"
when it agrees on at least `MIN_AGREEMENT` of the dev texts (top-1; SQuAD: the answer), else
logs a WARNING and records it in the report. `DEFAULT_VARIANTS` are the ones that pass on the models
measured (docs/litert.md): full-integer "int8" is not among them (the demo classifier: 38.7%
top-1 agreement with its float32 model, accuracy 70.7% -> 39.0%; "int8_dynamic" 100%), but
stays selectable.

>>> report = {"kind": "classification", "variants": {
...     "int8_dynamic": {"top1_agreement": 0.996, "rows": 500},
...     "int8": {"top1_agreement": 0.735, "rows": 500}}}
>>> judged = judge_variants(report, unit="texts")
>>> [(name, e["passes"]) for name, e in judged["variants"].items()]
[('int8_dynamic', True), ('int8', False)]
>>> print(report["variants"]["int8"]["warning"])  # doctest: +NORMALIZE_WHITESPACE
int8 agrees with the reference on 73.5% of 500 dev texts, below min_agreement=99%: not a
default variant; measure it on your data before shipping it
"""

import tensorflow as tf
import tensorflow_text as tft

from albert_tf.convert.weights import ConversionError
from albert_tf.errors import UserError
from albert_tf.export import dense, litert_quiet, litert_text
from albert_tf.export.saved_model import float32_copy
from albert_tf.text.graph_words import WORD_CONVENTIONS
from albert_tf.text.tokenizer import SentencePieceTokenizer

VARIANTS = ("float32", "float16", "int8_dynamic", "int8")
# The variants exported when none are named: those that pass MIN_AGREEMENT on the models
# measured (full-integer int8 does not: see the module docstring).
DEFAULT_VARIANTS = ("float32", "float16", "int8_dynamic")
# The least agreement with the reference (top-1, or SQuAD's answers) a variant passes with.
MIN_AGREEMENT = 0.99
# The report's agreement of each kind of model: top-1 (classifiers), equal answers (SQuAD).
_AGREEMENT_KEYS = ("top1_agreement", "answer_agreement")
# The custom ops tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS registers that we use.
TFTEXT_OPS = (
    "TFText>FastSentencepieceTokenize",
    "TFText>WhitespaceTokenize",
    "TFText>WhitespaceTokenizeWithOffsetsV2",
    # SQuAD (litert_qa): the context's bytes, the answer cut from it.
    "TFText>ByteSplitWithOffsets",
    "TFText>ByteSplitByOffsets",
)
_TEXT = tf.TensorSpec([None], tf.string, name="text")


class LiteTextInputs:
    """Raw text -> ALBERT model inputs with TFLite-supported ops only (see the module docstring).

    Args:
        preprocessor: the task's `AlbertPreprocessor` (vocabulary, casing, truncation, ids).
        max_seq_length: packed length (default: the preprocessor's).
    """

    def __init__(self, preprocessor, max_seq_length=None):
        self.max_seq_length = int(max_seq_length or preprocessor.max_seq_length)
        if self.max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {self.max_seq_length}")
        if not preprocessor.albert_rules:
            raise UserError(
                "LiteRT files tokenize with ALBERT's text rules (accent stripping, the "
                "digit-comma rule): this model's text.json says albert_rules=false (a keras-hub "
                "preset's): not supported in a LiteRT file; export a SavedModel instead"
            )
        self.lower_case = preprocessor.lower_case
        self.tex_quotes = preprocessor.tex_quotes
        self.truncation = preprocessor.truncation
        ids = preprocessor.special_ids
        self.cls_id, self.sep_id, self.pad_id = ids["cls_id"], ids["sep_id"], ids["pad_id"]
        self.sentencepiece = tft.FastSentencepieceTokenizer(
            litert_text.compose_model_proto(
                preprocessor.model_proto, self.lower_case, self.tex_quotes
            )
        )
        self.digit_comma = litert_text.DigitCommaTable(preprocessor.model_proto)
        self.unk_id = SentencePieceTokenizer(preprocessor.model_proto).unk_id

    def tokenize(self, texts):
        """tf.string [N] -> (values int32 [total], row_splits int32 [N + 1]): the ids of
        `AlbertPreprocessor`'s tokenizer."""
        ids = self.sentencepiece.tokenize(texts)
        values, row_splits = tf.cast(ids.flat_values, tf.int32), tf.cast(ids.row_splits, tf.int32)
        return self.digit_comma.expand(values, row_splits)

    def _kept(self, lengths):
        """Ids kept of each segment (int32 [B] each) under the truncation rule."""
        budget = self.max_seq_length - 1 - len(lengths)
        if len(lengths) == 1:
            return [tf.minimum(lengths[0], budget)]
        a, b = lengths
        half = (budget + 1) // 2  # the odd id goes to the first text (round_robin)
        if self.truncation == "round_robin":
            keep_a = tf.minimum(a, tf.maximum(budget - b, half))
            return [keep_a, tf.minimum(b, budget - keep_a)]
        keep_b = tf.minimum(b, tf.maximum(budget - a, half))
        return [tf.minimum(a, budget - keep_b), keep_b]

    def __call__(self, text, text_pair=None):
        """tf.string [B] (and [B]) -> dict of int32 [B, max_seq_length] model inputs."""
        segments = [self.tokenize(text)] + (
            [self.tokenize(text_pair)] if text_pair is not None else []
        )
        starts = [splits[:-1] for _, splits in segments]
        kept = self._kept([splits[1:] - splits[:-1] for _, splits in segments])
        position = tf.range(self.max_seq_length)[tf.newaxis, :]  # [1, S]
        word_ids = tf.zeros_like(position) + self.pad_id
        type_ids = tf.zeros_like(position)
        offset = tf.ones_like(kept[0])[:, tf.newaxis]  # after [CLS]: [B, 1]
        for type_id, ((values, _), start, keep) in enumerate(zip(segments, starts, kept)):
            keep = keep[:, tf.newaxis]
            local = position - offset
            inside = (local >= 0) & (local < keep)
            padded = tf.concat([values, [self.pad_id]], axis=0)  # never empty
            index = tf.clip_by_value(start[:, tf.newaxis] + local, 0, tf.size(values))
            pieces = tf.gather(padded, index)
            sep = tf.equal(local, keep)
            word_ids = tf.where(inside, pieces, tf.where(sep, self.sep_id, word_ids))
            type_ids = tf.where(inside | sep, type_id, type_ids)
            offset = offset + keep + 1
        word_ids = tf.where(tf.equal(position, 0), self.cls_id, word_ids)
        mask = tf.cast(position < offset, tf.int32)
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids}

    def words(self, text, convention="whitespace"):
        """Words of tf.string [B] under `convention` (`WORD_CONVENTIONS`): (words [N], row_splits
        int32 [B + 1], UTF-8 byte offsets of each word in its text: start, end int32 [N])."""
        if convention not in WORD_CONVENTIONS:
            raise ValueError(
                f"convention must be one of {', '.join(WORD_CONVENTIONS)}, got {convention!r}"
            )
        words, starts, _ = tft.WhitespaceTokenizer().tokenize_with_offsets(text)
        splits = tf.cast(words.row_splits, tf.int32)
        starts = tf.cast(starts.flat_values, tf.int32)
        return byte_words(text, words.flat_values, splits, starts, convention == "punctuation")

    def pack_words(self, text, convention="whitespace"):
        """Words of each text (`words`), each tokenized on its own ([unk] when it gives no
        piece), in one window: (model inputs [B, S], first-piece position int32 [N]
        (max_seq_length when the word does not fit), word row_splits int32 [B + 1], byte
        offsets start, end int32 [N])."""
        words, word_splits, word_starts, word_ends = self.words(text, convention)
        values, splits = self.tokenize(words)
        counts = splits[1:] - splits[:-1]
        lengths = tf.maximum(counts, 1)  # an empty word becomes [unk]
        ends = tf.cumsum(lengths)
        begins = ends - lengths  # global piece offset of each word
        bounds = tf.gather(tf.concat([[0], ends], axis=0), word_splits)  # [B + 1]
        row = dense.row_ids(word_splits, tf.size(lengths))
        first = 1 + begins - tf.gather(bounds, row)
        budget = self.max_seq_length - 2
        first = tf.where(first <= budget, first, self.max_seq_length)
        # Piece p (0-based) of text b is global piece bounds[b] + p, in word w = the last word
        # with begins[w] <= it.
        local = tf.range(budget)[tf.newaxis, :]
        target = tf.expand_dims(bounds[:-1], 1) + local  # [B, budget]
        inside = target < tf.expand_dims(bounds[1:], 1)
        word = (
            tf.reduce_sum(
                tf.cast(tf.expand_dims(target, 2) >= tf.reshape(begins, [1, 1, -1]), tf.int32),
                axis=2,
            )
            - 1
        )
        word = tf.maximum(word, 0)
        piece = target - tf.gather(begins, word)
        has_pieces = tf.gather(counts, word) > 0
        index = tf.clip_by_value(tf.gather(splits[:-1], word) + piece, 0, tf.size(values))
        ids = tf.where(
            has_pieces, tf.gather(tf.concat([values, [self.unk_id]], 0), index), self.unk_id
        )
        keep = tf.reduce_sum(tf.cast(inside, tf.int32), axis=1)
        ones = tf.ones_like(keep)[:, tf.newaxis]
        body = tf.where(
            inside, ids, tf.where(local == keep[:, tf.newaxis], self.sep_id, self.pad_id)
        )
        word_ids = tf.concat([ones * self.cls_id, body, ones * self.pad_id], axis=1)
        word_ids = tf.where(
            tf.equal(tf.range(self.max_seq_length)[tf.newaxis], keep[:, None] + 1),
            self.sep_id,
            word_ids,
        )
        mask = tf.cast(tf.range(self.max_seq_length)[tf.newaxis] < keep[:, None] + 2, tf.int32)
        inputs = {
            "input_word_ids": word_ids,
            "input_mask": mask,
            "input_type_ids": tf.zeros_like(word_ids),
        }
        return inputs, first, word_splits, word_starts, word_ends


def byte_words(text, words, splits, starts, punctuation=True):
    """Whitespace words (flat [N], their int32 row_splits [B + 1] and byte starts [N] in `text`
    [B]) -> the outputs of `LiteTextInputs.words`: with `punctuation`, each punctuation
    character (as `graph_words.PUNCTUATION_PATTERN`: ASCII symbols and Unicode P*, the table of
    `unicode_tables.punctuation_table`) is cut out as a word of its own. Either way, the first
    bytes of a multi-byte whitespace character that `WhitespaceTokenizer` leaves at the end of
    the word before it (U+00A0 between "a" and "b" gives the words b"a\\xc2", b"b") are
    dropped. TFLite builtin ops on the words' UTF-8 bytes, and `ByteSplit` /
    `ByteSplitByOffsets` (valid UTF-8 assumed)."""
    from albert_tf.text.unicode_tables import punctuation_table

    pieces = tft.ByteSplitter().split(words)  # [N, (bytes)]
    byte = tf.cast(pieces.flat_values, tf.int32)
    byte_splits = tf.cast(pieces.row_splits, tf.int32)
    total = tf.size(byte)
    position = tf.range(total)
    word = dense.row_ids(byte_splits, total)
    local = position - tf.gather(byte_splits, word)
    lead = (byte < 0x80) | (byte >= 0xC0)
    # Each byte's character (its lead byte) and whether the character is whole in its word.
    char = tf.maximum(tf.cumsum(tf.cast(lead, tf.int32)) - 1, 0)
    chars = tf.maximum(total, 1)
    size = tf.where(byte < 0xC0, 1, tf.where(byte < 0xE0, 2, tf.where(byte < 0xF0, 3, 4)))
    length = tf.gather(byte_splits[1:] - byte_splits[:-1], word)
    whole = tf.logical_not(lead) | (local + size <= length)
    keep = tf.gather(tf.math.unsorted_segment_min(tf.cast(whole, tf.int32), char, chars), char) > 0
    begins = keep & tf.equal(local, 0)
    if punctuation:
        padded = tf.concat([byte, tf.fill([3], 128)], axis=0)

        def following(k):  # the payload of the k-th byte after each byte
            return tf.gather(padded, position + k) - 128

        code = tf.where(
            byte < 0xE0,
            (byte - 0xC0) * 64 + following(1),
            tf.where(
                byte < 0xF0,
                (byte - 0xE0) * 4096 + following(1) * 64 + following(2),
                (byte - 0xF0) * 262144 + following(1) * 4096 + following(2) * 64 + following(3),
            ),
        )
        code = tf.where(byte < 0x80, byte, code)  # a lead byte's codepoint
        table = tf.constant(punctuation_table())
        known = lead & (code >= 0) & (code < table.shape[0])
        punct = known & tf.gather(table, tf.where(known, code, 0))
        in_punct = tf.math.unsorted_segment_max(tf.cast(punct, tf.int32), char, chars)
        after = tf.concat([[False], tf.gather(in_punct, char)[:-1] > 0], axis=0)
        # A word also starts at each punctuation character and right after one.
        begins = begins | (keep & (punct | (lead & after & (local > 0))))
    index = tf.cumsum(tf.cast(begins, tf.int32)) - 1  # the new word of each byte
    count = tf.reduce_sum(tf.cast(begins, tf.int32))
    index = tf.where(keep, index, count)  # dropped bytes: a segment cut off below
    absolute = tf.gather(starts, word) + local
    new_starts = tf.math.unsorted_segment_min(absolute, index, count + 1)[:count]
    new_ends = tf.math.unsorted_segment_max(absolute, index, count + 1)[:count] + 1
    # Each new word belongs to the text of its whitespace word.
    text_of_byte = tf.gather(dense.row_ids(splits, tf.size(words)), word)
    text_of_new = tf.math.unsorted_segment_max(text_of_byte, index, count + 1)[:count]
    per_text = tf.math.unsorted_segment_sum(
        tf.ones_like(new_starts), text_of_new, tf.size(splits) - 1
    )
    new_splits = tf.concat([[0], tf.cumsum(per_text)], axis=0)
    row_splits = tf.cast(new_splits, tf.int64)
    cut = tft.ByteSplitter().split_by_offsets(
        text,
        tf.RaggedTensor.from_row_splits(new_starts, row_splits, validate=False),
        tf.RaggedTensor.from_row_splits(new_ends, row_splits, validate=False),
    )
    return cut.flat_values, new_splits, new_starts, new_ends


def _classifier_fn(model, inputs, pair):
    def outputs(text, text_pair=None):
        logits = tf.cast(model(inputs(text, text_pair), training=False), tf.float32)
        if model.num_classes == 1:
            return {"score": logits[:, 0]}
        return {
            "probabilities": tf.nn.softmax(logits, axis=-1),
            "logits": logits,
            "label": tf.argmax(logits, axis=-1, output_type=tf.int64),
        }

    if pair:
        return tf.function(
            outputs,
            input_signature=[_TEXT, tf.TensorSpec([None], tf.string, name="text_pair")],
            autograph=False,
        )
    return tf.function(lambda text: outputs(text), input_signature=[_TEXT], autograph=False)


def _token_classifier_fn(model, inputs, convention="whitespace"):
    def outputs(text):
        packed, first, word_splits, starts, ends = inputs.pack_words(text, convention)
        logits = tf.cast(model(packed, training=False), tf.float32)  # [B, S, C]
        num_words = word_splits[1:] - word_splits[:-1]
        tagged = first < inputs.max_seq_length
        # Words per text that fit in the window (they are a prefix of the text's words).
        row = dense.row_ids(word_splits, tf.size(first))
        count = tf.math.unsorted_segment_sum(tf.cast(tagged, tf.int32), row, tf.size(num_words))
        width = tf.reduce_max(tf.concat([count, [0]], axis=0))
        k = tf.range(width)[tf.newaxis, :]
        valid = k < count[:, tf.newaxis]  # [B, W]
        flat = tf.clip_by_value(
            tf.expand_dims(word_splits[:-1], 1) + k, 0, tf.maximum(tf.size(first) - 1, 0)
        )
        position = tf.gather(tf.concat([first, [0]], 0), flat)
        position = tf.where(valid, position, 0)
        word_start = tf.where(valid, tf.gather(tf.concat([starts, [0]], 0), flat), -1)
        word_end = tf.where(valid, tf.gather(tf.concat([ends, [0]], 0), flat), -1)
        probabilities = tf.nn.softmax(tf.gather(logits, position, batch_dims=1), axis=-1)
        probabilities = tf.where(tf.expand_dims(valid, 2), probabilities, 0.0)
        return {
            "probabilities": probabilities,
            "tag_id": tf.where(valid, tf.argmax(probabilities, axis=-1), -1),
            "num_words": tf.cast(count, tf.int64),
            "word_start": tf.cast(word_start, tf.int64),
            "word_end": tf.cast(word_end, tf.int64),
        }

    return tf.function(outputs, input_signature=[_TEXT], autograph=False)


def serving_function(
    model, preprocessor, max_seq_length=None, pair=False, word_convention="whitespace"
):
    """The `tf.function` (raw text in) that `export_litert` converts, for a float32 copy of
    `model` (an `AlbertClassifier` or `AlbertTokenClassifier`, whose words are split by
    `word_convention`). Runs in TensorFlow too."""
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    inputs = LiteTextInputs(preprocessor, max_seq_length)
    model = float32_copy(model)
    if isinstance(model, AlbertTokenClassifier):
        if pair:
            raise ValueError("the token classifier takes one text")
        return _token_classifier_fn(model, inputs, word_convention)
    if not hasattr(model, "num_classes") or not hasattr(model, "is_regression"):
        raise TypeError(
            f"LiteRT export supports AlbertClassifier and AlbertTokenClassifier, "
            f"got {type(model).__name__}"
        )
    return _classifier_fn(model, inputs, pair)


def _frozen_module(fn):
    """A tf.Module whose signature is `fn` with every variable frozen into a constant."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    concrete = fn.get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    structure = concrete.structured_outputs
    specs = concrete.structured_input_signature[0]

    def call(*args):
        return tf.nest.pack_sequence_as(structure, frozen(*args))

    module = tf.Module()
    module.serve = tf.function(call, input_signature=list(specs), autograph=False)
    return module


def convert(fn, variant="float32", representative_texts=None):
    """The `.tflite` bytes of `serving_function`'s `fn` in one of `VARIANTS`.

    `representative_texts` (variant "int8"): a list of input batches, each a list of arrays
    in the signature's order (raw strings), used to calibrate the activations.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    import tempfile

    module = _frozen_module(fn)
    concrete = module.serve.get_concrete_function()
    # Through a SavedModel saved without custom gradients: the encoder's (tf.custom_gradient in
    # its while loop) cannot be saved, and from_concrete_functions then drops the signature.
    saved = tempfile.TemporaryDirectory()
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, saved.name, {"serving_default": concrete}, options=options)
    converter = tf.lite.TFLiteConverter.from_saved_model(saved.name)
    converter.allow_custom_ops = True  # tensorflow-text's TFLite ops (TFText>...)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if variant != "float32":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "int8":
        if not representative_texts:
            raise ValueError("variant 'int8' needs representative_texts")
        # Calibration runs the whole model, tokenizer included: register tf-text's kernels.
        converter.target_spec._experimental_custom_op_registerers = list(
            tft.tflite_registrar.SELECT_TFTEXT_OPS
        )
        names = [spec.name for spec in concrete.structured_input_signature[0]]

        def dataset():  # one text at a time: the calibrator does not resize its inputs
            for batch in representative_texts:
                for i in range(len(batch[0])):
                    yield dict(zip(names, [tf.constant(x[i : i + 1], tf.string) for x in batch]))

        converter.representative_dataset = dataset
    data = converter.convert()
    saved.cleanup()
    unknown = sorted(set(custom_ops(data)) - set(TFTEXT_OPS))
    if unknown:
        raise ConversionError(
            f"the {variant} model needs ops that neither TFLite builtins nor "
            f"tensorflow-text provide: {', '.join(unknown)}"
        )
    return data


def custom_ops(data):
    """Names of the custom (non-builtin) ops a `.tflite` flatbuffer uses."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(data, 0)
    codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
    return sorted({c.CustomCode().decode() for c in codes if c.CustomCode()})


@litert_quiet.quiet()
def export_litert(
    model,
    preprocessor,
    path,
    variant="float32",
    max_seq_length=None,
    pair=False,
    representative_texts=None,
    word_convention="whitespace",
):
    """Writes `model` (a trained `AlbertClassifier` or `AlbertTokenClassifier`) with raw-text
    preprocessing to the `.tflite` file `path` (atomically); returns the file's size in bytes.

    Args:
        model: the trained Keras model (converted as a float32 copy).
        preprocessor: the task's `AlbertPreprocessor`.
        path: output file (local or gs://).
        variant: one of `VARIANTS`.
        max_seq_length: fixed packed length (default: the preprocessor's).
        pair: the classifier's signature takes `text` and `text_pair`.
        representative_texts: calibration batches for "int8" (see `convert`).
        word_convention: the token classifier's word split ("whitespace" or "punctuation").
    """
    from albert_tf import files

    fn = serving_function(model, preprocessor, max_seq_length, pair, word_convention)
    data = convert(fn, variant, representative_texts)
    files.write_atomic(path, data)
    return len(data)


def interpreter(model_path=None, model_content=None):
    """An ai-edge-litert interpreter with tensorflow-text's TFLite ops registered (falls back to
    tf.lite's when ai-edge-litert is not installed)."""
    try:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
    except ImportError:
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
    return InterpreterWithCustomOps(
        model_path=model_path,
        model_content=model_content,
        custom_op_registerers=tft.tflite_registrar.SELECT_TFTEXT_OPS,
    )


def text_ops_bytes(data):
    """Bytes of the constant inputs of custom ops (the SentencePiece model with its composed
    normalizer, `litert_text`) in a `.tflite` flatbuffer: the tokenizer, the part of the file
    that quantization does not shrink (the digit-comma table, a few KB, is not counted)."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAsModel(data, 0)
    codes = [model.OperatorCodes(i).CustomCode() for i in range(model.OperatorCodesLength())]
    seen, total = set(), 0
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for o in range(graph.OperatorsLength()):
            op = graph.Operators(o)
            if not codes[op.OpcodeIndex()]:
                continue
            for t in op.InputsAsNumpy():
                buffer = graph.Tensors(int(t)).Buffer() if t >= 0 else 0
                if buffer and buffer not in seen:
                    seen.add(buffer)
                    b = model.Buffers(buffer)
                    total += b.DataLength() or int(b.Size())
    return total


def run_file(path, columns, batch_size=32):
    """Runs the `.tflite` file on texts (`columns`: {"text": [...], "text_pair": [...]}) in
    batches; returns its outputs concatenated over the batches (token classifier outputs as
    one row per tagged word: probabilities [M, C], plus num_words [N])."""
    import numpy as np

    runner = interpreter(path).get_signature_runner()
    outputs = {}
    count = len(next(iter(columns.values())))
    for start in range(0, count, batch_size):
        batch = {
            k: np.array([t.encode("utf-8") for t in v[start : start + batch_size]], object)
            for k, v in columns.items()
        }
        result = runner(**batch)
        for key, value in _rows(result).items():
            outputs.setdefault(key, []).append(value)
    return {k: np.concatenate(v) for k, v in outputs.items()}


def _rows(result):
    """Token classifier outputs [B, W, C] -> one row per tagged word; others unchanged."""
    import numpy as np

    result = {k: np.asarray(v) for k, v in result.items()}
    if "num_words" not in result:
        return result
    probabilities = result["probabilities"]
    rows = [probabilities[i, :n] for i, n in enumerate(result["num_words"])]
    width = probabilities.shape[-1]
    out = {
        "probabilities": np.concatenate(rows) if rows else np.zeros([0, width]),
        "num_words": result["num_words"],
    }
    for key in ("word_start", "word_end"):  # byte offsets of the tagged words
        if key in result:
            parts = [result[key][i, :n] for i, n in enumerate(result["num_words"])]
            out[key] = np.concatenate(parts) if parts else np.zeros([0], np.int64)
    return out


def reference_outputs(fn_or_model, preprocessor, columns, max_seq_length=None, batch_size=64):
    """The reference for `run_file`: an `AlbertClassifier` with the preprocessor at the same
    `max_seq_length` (what the SavedModel export serves), or a `serving_function` run in TensorFlow
    (the token classifier: the same graph on TensorFlow kernels)."""
    import numpy as np

    pre = preprocessor.with_padding(False, max_seq_length or preprocessor.max_seq_length)
    outputs = {}
    count = len(next(iter(columns.values())))
    for start in range(0, count, batch_size):
        batch = {
            k: tf.constant(v[start : start + batch_size], tf.string) for k, v in columns.items()
        }
        if isinstance(fn_or_model, tf.types.experimental.GenericFunction):
            result = fn_or_model(**batch)
        else:
            model = fn_or_model
            logits = tf.cast(model(pre(batch), training=False), tf.float32)
            result = (
                {"score": logits[:, 0]}
                if model.num_classes == 1
                else {"probabilities": tf.nn.softmax(logits, axis=-1)}
            )
        for key, value in _rows({k: v.numpy() for k, v in result.items()}).items():
            outputs.setdefault(key, []).append(value)
    return {k: np.concatenate(v) for k, v in outputs.items()}


def agreement(outputs, reference, labels=None):
    """Top-1 agreement and max probability difference of `outputs` vs `reference`
    (`run_file` / `reference_outputs` dicts); accuracy of both against `labels` when given
    (one per row). Regression: the max score difference."""
    import numpy as np

    if "score" in reference:
        return {
            "max_score_diff": float(np.abs(outputs["score"] - reference["score"]).max(initial=0.0)),
            "rows": int(len(reference["score"])),
        }
    got, want = outputs["probabilities"], reference["probabilities"]
    if got.shape != want.shape:
        raise ValueError(f"outputs {got.shape} and reference {want.shape} differ in shape")
    result = {
        "rows": int(len(want)),
        "top1_agreement": float(np.mean(got.argmax(-1) == want.argmax(-1))) if len(want) else 1.0,
        "max_prob_diff": float(np.abs(got - want).max(initial=0.0)),
    }
    if labels is not None:
        labels = np.asarray(labels)
        result["accuracy"] = float(np.mean(got.argmax(-1) == labels))
        result["reference_accuracy"] = float(np.mean(want.argmax(-1) == labels))
    return result


def token_agreement(preprocessor, texts, max_seq_length=None):
    """Fraction of `texts` whose LiteRT token ids equal `AlbertPreprocessor`'s (both packed to
    `max_seq_length`); the differences left are listed in `albert_tf.export.litert_text`."""
    import numpy as np

    lite = LiteTextInputs(preprocessor, max_seq_length)
    pre = preprocessor.with_padding(False, lite.max_seq_length)
    same = 0
    for start in range(0, len(texts), 256):
        batch = tf.constant(texts[start : start + 256], tf.string)
        a, b = lite(batch)["input_word_ids"].numpy(), pre(batch)["input_word_ids"].numpy()
        same += int(np.sum(np.all(a == b, axis=1)))
    return same / max(len(texts), 1)


def text_columns(inputs, labels=None, limit=None):
    """({"text": [...], ("text_pair": [...])}, labels) of a classification split's inputs
    (lists of texts by input name) and labels, the first `limit` of each."""
    import numpy as np

    columns = {k: [str(t) for t in v[:limit]] for k, v in inputs.items()}
    return columns, None if labels is None else np.asarray(labels)[:limit]


def sentence_columns(words, tag_ids=None, limit=None):
    """({"text": [...]}, labels) of a tagging split: its sentences' words joined with spaces
    and each sentence's tag ids, the first `limit` of each."""
    import numpy as np

    return (
        {"text": [" ".join(w) for w in words[:limit]]},
        None if tag_ids is None else [np.asarray(t) for t in tag_ids[:limit]],
    )


def _row_labels(labels, num_words):
    import numpy as np

    if num_words is None:
        return labels
    parts = [np.asarray(t)[:n] for t, n in zip(labels, num_words)]
    return np.concatenate(parts) if parts else np.zeros([0], np.int64)


def text_spec(
    model,
    preprocessor,
    texts,
    kind,
    name,
    pair=False,
    max_seq_length=None,
    max_eval_examples=None,
    max_windows=None,
    word_convention="whitespace",
    dev_reference=None,
):
    """The `LiteRTSpec` of a text classifier or token classifier (`serving_function`).

    Args:
        model: the trained `AlbertClassifier` or `AlbertTokenClassifier`.
        preprocessor: its `AlbertPreprocessor`.
        texts: (split, limit) -> (columns, labels) of "train" (int8 calibration) and "dev"
            (`text_columns`, `sentence_columns`).
        kind, name: the task's, for the report.
        pair: the classifier takes `text` and `text_pair`.
        max_seq_length: fixed packed length (default: the preprocessor's).
        max_eval_examples: dev texts measured on (default: all).
        max_windows: unused (SQuAD's option).
        word_convention: the token classifier's word split ("whitespace" or "punctuation").
        dev_reference: the token classifier's (dev words, the runner's predicted tags, gold
            tags or None) per sentence, as the dev texts (`sentence_columns`): the report's
            "agreement_with_dev_predictions" (`dev_tagger_agreement`) of the reference.

    The reference: a float32 copy of a classifier with the preprocessor (what the float32
    SavedModel serves, whatever precision `model` was trained or loaded in); a token
    classifier's same graph run in TensorFlow (float32).
    """
    from albert_tf.export.serving_spec import LiteRTSpec
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    del max_windows
    max_seq_length = int(max_seq_length or preprocessor.max_seq_length)
    same_graph = isinstance(model, AlbertTokenClassifier)
    fn = serving_function(model, preprocessor, max_seq_length, pair, word_convention)
    dev, labels = texts("dev", max_eval_examples)

    def header(reference):
        tagger = {}
        if same_graph:
            tagger["word_convention"] = word_convention
            if dev_reference is not None and model.labels:
                tagger["agreement_with_dev_predictions"] = dev_tagger_agreement(
                    reference, dev["text"], dev_reference, model.labels, word_convention
                )
        return {
            "kind": kind,
            "task": name,
            "seq_length": max_seq_length,
            "pair": pair,
            "lower_case": preprocessor.lower_case,
            "truncation": preprocessor.truncation,
            "eval_examples": len(dev["text"]),
            "reference": (
                "the same graph run in TensorFlow (float32)"
                if same_graph
                else "Keras float32 model + AlbertPreprocessor (the SavedModel's serving_default)"
            ),
            "token_agreement": token_agreement(preprocessor, dev["text"], max_seq_length),
            **tagger,
        }

    def calibration(count, batch_size):
        train, _ = texts("train", count)
        total = len(train["text"])
        return [[train[k][i : i + batch_size] for k in train] for i in range(0, total, batch_size)]

    def score(outputs, reference):
        rows = None if labels is None else _row_labels(labels, reference.get("num_words"))
        return agreement(outputs, reference, rows)

    return LiteRTSpec(
        function=fn,
        inputs=dev,
        calibration=calibration,
        run=run_file,
        reference=lambda inputs: reference_outputs(
            fn if same_graph else float32_copy(model), preprocessor, inputs, max_seq_length
        ),
        header=header,
        score=score,
        format_report=format_report,
        unit="words" if same_graph else "texts",
    )


def dev_tagger_agreement(reference, texts, dev_reference, labels, convention):
    """`token_classifier_serving.dev_agreement` of a token classifier's reference outputs on the
    dev `texts` (the first sentences of `dev_reference`, joined by spaces) with the runner's
    dev predictions: the LiteRT tagger tags one window, so the words past it disagree."""
    import numpy as np

    from albert_tf.export.token_classifier_serving import dev_agreement

    words, predicted, gold = dev_reference.words, dev_reference.predicted, dev_reference.gold
    tags = np.asarray(reference["probabilities"]).argmax(-1)
    text_words, at = [], 0
    for text, count in zip(texts, reference["num_words"]):
        data = text.encode("utf-8")

        def char(offset):
            return len(data[: int(offset)].decode("utf-8", errors="ignore"))

        spans = zip(
            reference["word_start"][at : at + count],
            reference["word_end"][at : at + count],
            tags[at : at + count],
        )
        text_words.append([(char(s), char(e), labels[t]) for s, e, t in spans])
        at += count
    return dev_agreement(
        words,
        predicted,
        gold,
        labels,
        text_words,
        None,
        convention,
        served="LiteRT",
        runner_precision=dev_reference.precision,
    )


def write_variant(fn, variant, path, representative_texts=None):
    """Converts `fn` to `variant` (`convert`) and writes it to `path` (atomically); returns its
    report entry: {"file", "bytes", "text_ops_bytes"}."""
    from albert_tf import files

    data = convert(fn, variant, representative_texts)
    files.write_atomic(path, data)
    return {"file": path, "bytes": len(data), "text_ops_bytes": text_ops_bytes(data)}


@litert_quiet.quiet()
def build(
    spec,
    output_dir,
    variants=DEFAULT_VARIANTS,
    num_representative=100,
    batch_size=32,
    min_agreement=MIN_AGREEMENT,
):
    """Writes a `serving_spec.LiteRTSpec` as `<output_dir>/model_<variant>.tflite` for each
    variant, measures each against the spec's reference on its dev inputs, and writes and
    returns the report (`<output_dir>/litert_report.json`; a variant agreeing on less than
    `min_agreement` is marked and warned about, `judge_variants`). "int8" is calibrated on
    `num_representative` training inputs; the files run `batch_size` inputs at a time."""
    import os

    from albert_tf import files

    reference = spec.reference(spec.inputs)
    report = dict(spec.header(reference), variants={})
    tf.io.gfile.makedirs(output_dir)
    for variant in variants:
        calibration = None
        if variant == "int8":
            calibration = spec.calibration(num_representative, batch_size)
        path = os.path.join(output_dir, f"model_{variant}.tflite")
        entry = write_variant(spec.function, variant, path, calibration)
        entry.update(spec.score(spec.run(path, spec.inputs, batch_size), reference))
        report["variants"][variant] = entry
    size_ratios(report["variants"])
    judge_variants(report, min_agreement, spec.unit)
    files.write_json(os.path.join(output_dir, "litert_report.json"), report)
    return report


@litert_quiet.quiet()
def export_finetuned(
    model,
    task,
    output_dir,
    variants=DEFAULT_VARIANTS,
    max_seq_length=None,
    num_representative=100,
    max_eval_examples=None,
    batch_size=32,
    max_windows=4,
    min_agreement=MIN_AGREEMENT,
):
    """`build` of a fine-tuned task's `serving_spec(model, max_seq_length)`: its LiteRT files and
    report (see `build`). `max_windows`: SQuAD's doc-stride windows per question. A task
    without a LiteRT export (RACE, served by its SavedModel) raises ValueError."""
    spec = task.serving_spec(model, max_seq_length).litert_spec(
        max_eval_examples=max_eval_examples, max_windows=max_windows
    )
    return build(spec, output_dir, variants, num_representative, batch_size, min_agreement)


def size_ratios(variants):
    """Adds each variant's "size_ratio" and "model_size_ratio" (without the text ops' bytes)
    against float32 to the report's {variant: entry} (when float32 is among them)."""
    if "float32" in variants:
        base = variants["float32"]
        for entry in variants.values():
            entry["size_ratio"] = entry["bytes"] / base["bytes"]
            model_bytes = max(base["bytes"] - base["text_ops_bytes"], 1)
            entry["model_size_ratio"] = (entry["bytes"] - entry["text_ops_bytes"]) / model_bytes


def judge_variants(report, min_agreement=MIN_AGREEMENT, unit="rows"):
    """Adds to each variant entry of `report` "passes" (its agreement with the reference is at
    least `min_agreement`; None for a regression model, which has no top-1) and "warning" (why
    not, else None; counted in `unit`: texts, words, questions), and "min_agreement" to the
    report; logs each warning. Returns `report`."""
    from absl import logging

    report["min_agreement"] = min_agreement
    for name, entry in report["variants"].items():
        key = next((k for k in _AGREEMENT_KEYS if k in entry), None)
        entry["passes"] = None if key is None else entry[key] >= min_agreement
        entry["warning"] = None
        if entry["passes"] is False:
            rows = entry.get("rows", report.get("eval_examples"))
            entry["warning"] = (
                f"{name} agrees with the reference on {entry[key]:.1%} of {rows} dev {unit}, "
                f"below min_agreement={100 * min_agreement:g}%: not a default variant; measure "
                "it on your data before shipping it"
            )
            logging.warning("%s", entry["warning"])
    return report


def passes_column(entry):
    """The report table's "passes" cell of a variant entry: yes, NO or - (not judged)."""
    return {True: "yes", False: "NO"}.get(entry.get("passes"), "-")


def passes_note(report):
    """What "passes" means, for the report table's first line ("" in a report without it)."""
    if "min_agreement" not in report:
        return ""
    return f"; passes: agreement >= {100 * report['min_agreement']:g}%"


def ratio_column(entry, key):
    return f"{entry[key]:.2f}" if key in entry else "-"


def format_report(report):
    """A text classifier's report as a text table (one line per variant)."""
    tokenizer = next(iter(report["variants"].values()), {}).get("text_ops_bytes")
    lines = [
        f"{report['task']} ({report['kind']}), max_seq_length {report['seq_length']}, "
        f"{report['eval_examples']} dev examples; token ids equal to AlbertPreprocessor's "
        f"on {100 * report['token_agreement']:.1f}% of them"
        + ("" if tokenizer is None else f"; tokenizer {tokenizer:,} bytes of each file")
        + passes_note(report),
        f"{'variant':<13}{'bytes':>11}{'x f32':>7}{'model x':>8}{'top-1 agr':>10}"
        f"{'max |dp|':>10}{'accuracy':>10}{'passes':>8}",
    ]
    for name, e in report["variants"].items():
        agree = e.get("top1_agreement")
        accuracy = e.get("accuracy")
        lines.append(
            f"{name:<13}{e['bytes']:>11,}{ratio_column(e, 'size_ratio'):>7}"
            f"{ratio_column(e, 'model_size_ratio'):>8}"
            + (
                f"{agree:>10.4f}{e['max_prob_diff']:>10.2e}"
                if agree is not None
                else f"{'':>10}{e['max_score_diff']:>10.2e}"
            )
            + (f"{accuracy:>10.4f}" if accuracy is not None else f"{'':>10}")
            + f"{passes_column(e):>8}"
        )
    reference = next(iter(report["variants"].values()), {}).get("reference_accuracy")
    if reference is not None:
        lines.append(f"reference ({report['reference']}) accuracy {reference:.4f}")
    served = report.get("agreement_with_dev_predictions")
    if served:
        text = served["raw_text"]
        key = next((k for k in ("f1", "token_accuracy") if k in text), None)
        lines.append(
            f"words ({report['word_convention']}) vs the runner's dev predictions: agreement "
            f"{text['word_agreement']:.4f} on {served['dev_words']} words"
            + (f"; {key} {text[key]:.4f} (the runner's {served['runner'][key]:.4f})" if key else "")
        )
        lines.extend(f"WARNING: {w}" for w in served["warnings"])
    return "\n".join(lines)
