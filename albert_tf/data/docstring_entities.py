"""The built-in offline tagging task "docstring-code": find the code in docstring sentences.

Docstrings of the installed packages (the "builtin:docstrings" corpus) mark code with backticks:
"Returns `True` where the string element in `self` ends with `suffix`". The words between the
marks are the entities, typed by what they hold (the marks stay in the text, tagged O: the
model has to find the spans they enclose and tell their kinds apart):

| type | the marked span is | examples |
|---|---|---|
| LIT | a literal: True, False, None, a number or a quoted string | `True`, `0.5`, `'ij'` |
| API | a dotted name or a call | `np.ndarray`, `tf.function`, `fit()` |
| ARG | one plain identifier (mostly argument names) | `axis`, `self`, `dtype` |
| CODE | any other code | `x + 1`, `a[0]` |

Words are split as the token-classification export splits raw text (whitespace, and every
punctuation character a word of its own: `split_words`), so a model trained on these sentences
sees the words it will be served. The tags are IOB2; sentences without code are kept too.

>>> split_words("Calls `bytes.decode`.")[:5]
[('Calls', 0, 5), ('`', 6, 7), ('bytes', 7, 12), ('.', 12, 13), ('decode', 13, 19)]
>>> words, tags = tag_marked_sentence("Returns `True` if `x.ndim` is 2.")
>>> words
['Returns', '`', 'True', '`', 'if', '`', 'x', '.', 'ndim', '`', 'is', '2', '.']
>>> tags
['O', 'O', 'B-LIT', 'O', 'O', 'O', 'B-API', 'I-API', 'I-API', 'O', 'O', 'O', 'O']
"""

import os
import re
import unicodedata

import numpy as np
from absl import logging

from albert_tf import files

DOCSTRING_CODE = "docstring-code"
ENTITY_TYPES = ("API", "ARG", "CODE", "LIT")

_LITERAL = re.compile(r"^(True|False|None|[-+]?\d+(\.\d*)?([eE][-+]?\d+)?|'[^']*'|\"[^\"]*\")$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
_API = re.compile(r"^[A-Za-z_][\w.]*(\(\))?$")


def _is_punctuation(char):
    # The export's rule (albert_tf.text.graph_words.PUNCTUATION_PATTERN): every non-alphanumeric
    # printable ASCII character, and Unicode P*.
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def split_words(text):
    """[(word, start, end)] of `text`: split on whitespace, each punctuation character a word
    (the Python twin of `albert_tf.text.graph_words.split_words`, character offsets)."""
    words, start = [], None
    for i, char in enumerate(text):
        if char.isspace() or _is_punctuation(char):
            if start is not None:
                words.append((text[start:i], start, i))
                start = None
            if not char.isspace():
                words.append((char, i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        words.append((text[start:], start, len(text)))
    return words


def span_type(code):
    """The entity type of a marked code span (see the module docstring)."""
    code = code.strip()
    if _LITERAL.match(code):
        return "LIT"
    if _IDENTIFIER.match(code):
        return "ARG"
    if _API.match(code):
        return "API"
    return "CODE"


def tag_marked_sentence(sentence):
    """(words, IOB2 tags) of a sentence whose code is between backticks (single or double);
    the backticks stay, as words tagged O. None if the backticks do not pair up or a marked
    span is empty."""
    parts = re.split(r"(``|`)", sentence)  # text, mark, code, mark, text, ...
    segments, marks = parts[0::2], parts[1::2]
    if len(marks) % 2:
        return None
    words, tags = [], []
    for i, segment in enumerate(segments):
        split = [w for w, _, _ in split_words(segment)]
        if i % 2 == 0:
            words.extend(split)
            tags.extend(["O"] * len(split))
        elif not split:
            return None
        else:
            kind = span_type(segment)
            words.extend(split)
            tags.extend([f"B-{kind}"] + [f"I-{kind}"] * (len(split) - 1))
        if i < len(marks):
            mark = list(marks[i])
            words.extend(mark)
            tags.extend(["O"] * len(mark))
    return (words, tags) if words else None


def docstring_code_sentences(
    packages=("tensorflow", "keras", "numpy"), max_sentences=6000, max_words=80, cache_dir=None
):
    """Tagged sentences [(words, tags)] from the built-in docstrings corpus, in corpus order,
    grouped by document ([[(words, tags), ...], ...]). A sentence seen before is dropped (the
    packages repeat boilerplate), so no sentence is in two splits."""
    from albert_tf.data.corpora import iter_documents  # the corpus scraper imports the packages

    documents, total, seen = [], 0, set()
    for document in iter_documents("builtin:docstrings", packages=packages, cache_dir=cache_dir):
        tagged = []
        for sentence in document:
            words_tags = tag_marked_sentence(sentence)
            if words_tags is None or len(words_tags[0]) > max_words or sentence in seen:
                continue
            seen.add(sentence)
            tagged.append(words_tags)
        if tagged:
            documents.append(tagged[: max_sentences - total])
            total += len(documents[-1])
        if total >= max_sentences:
            break
    return documents


def conll_text(documents):
    """CoNLL-2003 layout: -DOCSTART- per document, "word tag" lines, blank lines between
    sentences."""
    lines = []
    for document in documents:
        lines += ["-DOCSTART- O", ""]
        for words, tags in document:
            lines += [f"{w} {t}" for w, t in zip(words, tags)] + [""]
    return "\n".join(lines) + "\n"


def docstring_code_splits(dev_fraction=0.15, test_fraction=0.15, seed=0, **corpus_options):
    """{split: [document, ...]} for "train", "dev", "test": the documents of
    `docstring_code_sentences` (`corpus_options`) shuffled by `seed`, then split."""
    documents = docstring_code_sentences(**corpus_options)
    if len(documents) < 3:
        raise ValueError(f"only {len(documents)} documents with tagged sentences found")
    order = np.random.default_rng(seed).permutation(len(documents))
    n_dev = max(1, int(round(dev_fraction * len(documents))))
    n_test = max(1, int(round(test_fraction * len(documents))))
    splits = {
        "train": order[n_dev + n_test :],
        "dev": order[:n_dev],
        "test": order[n_dev : n_dev + n_test],
    }
    out = {}
    for split, indices in splits.items():
        out[split] = [documents[i] for i in sorted(indices)]
        sentences = sum(len(d) for d in out[split])
        entities = sum(t.startswith("B-") for d in out[split] for _, tags in d for t in tags)
        logging.info(
            "%s %s: %d documents, %d sentences, %d entities",
            DOCSTRING_CODE,
            split,
            len(out[split]),
            sentences,
            entities,
        )
    return out


def write_docstring_code_files(output_dir, **options):
    """Writes train.txt, dev.txt, test.txt of `docstring_code_splits(**options)` in the CoNLL
    layout into `output_dir`; returns {split: path}."""
    import tensorflow as tf

    tf.io.gfile.makedirs(output_dir)
    paths = {}
    for split, documents in docstring_code_splits(**options).items():
        paths[split] = os.path.join(output_dir, f"{split}.txt")
        files.write_atomic(paths[split], conll_text(documents))
    return paths
