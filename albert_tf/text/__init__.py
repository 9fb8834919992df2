"""albert_tf.text: ALBERT text preprocessing in Python and in-graph (identical ids).

Public names:
- `preprocess_text(text, lower=True)`: ALBERT's normalization (Python).
- `SentencePieceTokenizer(spm_model, lower_case=True)`: Python tokenizer.
- `TextTokenizer(spm_model, lower_case=True)`: Keras layer, raw strings -> ragged ids.
- `SegmentPacker(max_seq_length, cls_id, sep_id, pad_id, ...)`: Keras layer, [CLS] A [SEP] B [SEP].
- `split_sentences(text)`: the rule-based sentence splitter for one-document-per-line corpora.
- `is_start_piece(piece)`: the original word-start rule used by whole-word masking.
"""

from albert_tf._lazy import lazy_attributes
from albert_tf.text.normalize import preprocess_text
from albert_tf.text.sentences import split_sentences
from albert_tf.text.tokenizer import SentencePieceTokenizer, is_start_piece

__all__ = [
    "preprocess_text",
    "split_sentences",
    "SentencePieceTokenizer",
    "is_start_piece",
    "TextTokenizer",
    "SegmentPacker",
]


# The Keras layers pull in TensorFlow and tensorflow-text; the Python path (used by
# create_pretraining_data's worker processes) must stay light, so they load on first use.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "TextTokenizer": "albert_tf.text.preprocessing_layers",
        "SegmentPacker": "albert_tf.text.preprocessing_layers",
    },
)
