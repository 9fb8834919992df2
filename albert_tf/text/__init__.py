"""albert_tf.text: ALBERT text preprocessing in Python and in-graph (identical ids).

Public names:
- `preprocess_text(text, lower=True)`: ALBERT's normalization (Python).
- `SentencePieceTokenizer(model_file_or_bytes, lower_case=True)`: Python tokenizer.
- `split_sentences(text)`: the rule-based sentence splitter used for one-document-per-line corpora.
"""
from albert_tf.text.normalize import preprocess_text
from albert_tf.text.sentences import split_sentences
from albert_tf.text.tokenizer import SentencePieceTokenizer, is_start_piece

__all__ = ["preprocess_text", "split_sentences", "SentencePieceTokenizer", "is_start_piece"]
