"""A built-in offline extractive QA set in the official SQuAD JSON format: fill in the code.

Paragraphs are docstrings of the installed packages (the "builtin:docstrings" corpus) whose
sentences mark code with backticks. For a marked span, the question is its sentence with the
span replaced by "___" and the backticks dropped; the context is the paragraph without
backticks; the answer is the span's text at its character offset. A model answers by finding
the question's sentence in the context and reading the missing words. With
`version_2_with_negative`, every third question is asked about another paragraph, where it has
no answer (`is_impossible`).

>>> paragraph = ["Returns `True` if `x` is finite.", "See `np.isfinite`."]
>>> context, questions = paragraph_questions(paragraph)
>>> context
'Returns True if x is finite. See np.isfinite.'
>>> for q, a, s in questions:
...     print(q, a, context[s:s + len(a)], sep=" | ")
Returns ___ if x is finite. | True | True
Returns True if ___ is finite. | x | x
See ___. | np.isfinite | np.isfinite
"""

import json
import re

import numpy as np

from albert_tf import files

BLANK = "___"
_MARK = re.compile(r"``|`")


def paragraph_questions(sentences, max_questions_per_sentence=2):
    """(context, [(question, answer, answer_start)]) of a paragraph given as marked sentences;
    sentences whose backticks do not pair up are kept as text without questions."""
    context_parts, questions, offset = [], [], 0
    for sentence in sentences:
        parts = _MARK.split(sentence)
        plain = "".join(parts)
        if len(parts) % 2 == 1:  # paired marks: parts alternate text, code, text, ...
            asked = 0
            position = 0
            for i, part in enumerate(parts):
                if i % 2 == 1 and part.strip() and asked < max_questions_per_sentence:
                    question = "".join(parts[:i]) + BLANK + "".join(parts[i + 1 :])
                    questions.append(
                        (
                            question,
                            part.strip(),
                            offset + position + (len(part) - len(part.lstrip())),
                        )
                    )
                    asked += 1
                position += len(part)
        context_parts.append(plain)
        offset += len(plain) + 1
    return " ".join(context_parts), questions


def docstring_squad(
    version_2_with_negative=False,
    max_paragraphs=400,
    max_sentences=4,
    seed=0,
    packages=("tensorflow", "keras", "numpy"),
    cache_dir=None,
):
    """A SQuAD-format dict ({"version", "data": [...]}) from the built-in docstrings corpus."""
    from albert_tf.data.corpora import iter_documents  # the corpus scraper imports the packages

    rng = np.random.default_rng(seed)
    paragraphs, seen = [], set()
    for document in iter_documents("builtin:docstrings", packages=packages, cache_dir=cache_dir):
        context, questions = paragraph_questions(document[:max_sentences])
        if questions and context not in seen:
            seen.add(context)
            paragraphs.append((context, questions))
        if len(paragraphs) >= max_paragraphs:
            break
    data, number = [], 0
    for p, (context, questions) in enumerate(paragraphs):
        qas = []
        for question, answer, start in questions:
            number += 1
            qas.append(
                {
                    "id": f"docstring-{number}",
                    "question": question,
                    "answers": [{"text": answer, "answer_start": start}],
                    **({"is_impossible": False} if version_2_with_negative else {}),
                }
            )
        if version_2_with_negative and len(paragraphs) > 1 and p % 3 == 0:
            other = paragraphs[(p + 1 + int(rng.integers(len(paragraphs) - 1))) % len(paragraphs)]
            question = other[1][0][0]
            if other[1][0][1] not in context:
                number += 1
                qas.append(
                    {
                        "id": f"docstring-{number}",
                        "question": question,
                        "answers": [],
                        "is_impossible": True,
                    }
                )
        data.append({"title": f"paragraph-{p}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2_with_negative else "1.1", "data": data}


def write_docstring_squad(train_path, dev_path, dev_fraction=0.2, seed=0, **options):
    """Writes train and dev SQuAD JSON files (paragraphs split by `seed`); returns the numbers
    of questions in each."""
    dataset = docstring_squad(seed=seed, **options)
    order = np.random.default_rng(seed).permutation(len(dataset["data"]))
    n_dev = max(1, int(round(dev_fraction * len(order))))
    counts = []
    for path, indices in ((train_path, order[n_dev:]), (dev_path, order[:n_dev])):
        articles = [dataset["data"][i] for i in sorted(indices)]
        files.write_atomic(
            path, json.dumps({"version": dataset["version"], "data": articles}, ensure_ascii=False)
        )
        counts.append(sum(len(p["qas"]) for a in articles for p in a["paragraphs"]))
    return tuple(counts)
