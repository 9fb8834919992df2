"""Which words a tagger serves: the word convention, decided from its training data.

A tagger is trained on words already split (CoNLL columns, JSON-lines tokens) but served raw
text, which its export has to cut into words itself. Two conventions (`CONVENTIONS`; the graph
ops: `albert_tf.text.graph_words.split_words`):

- "whitespace": split on whitespace only ("U.S.", "e-mail", "<Esc>" stay one word);
- "punctuation": split on whitespace, and every punctuation character is a word of its own
  ("Paris." -> "Paris", "."), as CoNLL-2003's tokens mostly are.

The rule (`decide`): join each training sentence by single spaces and split it again with the
punctuation convention. A word comes back unchanged when it holds no punctuation beside other
characters ("Paris" and "," do; "U.S." and "CTRL-W" do not). Counted per word, not per
sentence (one "U.S." in a 40-word sentence costs one word, not the sentence): when at least
`MIN_REPRODUCED` (99%) of the training words come back, the convention is "punctuation" (raw
text is split as the training words were, and punctuation typed without spaces is still split
off); else "whitespace", which gives back every training word that holds no whitespace, so a
client that sends its tokens joined by spaces gets exactly them back. The decision is logged in
one line with the measured rate and recorded with the task (finetune.json) and the export; a
run recorded before the convention existed served "punctuation" (`DEFAULT`). `--word_split`
overrides the rule (at training or at export time); an override the rule disagrees with logs a
WARNING with the measured rate.

>>> decision = decide([["The", "U.S.", "economy", "grew", "."], ["Paris", "."]])
>>> decision["convention"], decision["punctuation_reproduces"], decision["examples"]
('whitespace', 0.857..., ['U.S.'])
>>> decide([["Paris", ".", "Köln"]])["convention"]
'punctuation'
"""

import collections

from absl import logging

CONVENTIONS = ("whitespace", "punctuation")
CHOICES = ("auto",) + CONVENTIONS  # --word_split
# What a run recorded before the convention existed served (its export split punctuation off).
DEFAULT = "punctuation"
# The least fraction of training words the punctuation split must give back to be chosen.
MIN_REPRODUCED = 0.99
# Words shown as examples of those the punctuation split does not give back.
EXAMPLES = 5
DESCRIPTIONS = {
    "whitespace": "whitespace-separated",
    "punctuation": "whitespace and single punctuation characters",
}


def check_convention(convention, allow_auto=False):
    """ValueError unless `convention` is one of `CONVENTIONS` (or "auto" with `allow_auto`)."""
    allowed = CHOICES if allow_auto else CONVENTIONS
    if convention not in allowed:
        raise ValueError(f"word_split must be one of {', '.join(allowed)}, got {convention!r}")


def split(text, convention):
    """[(word, start, end)] of `text` under `convention` (character offsets): the Python twin of
    `albert_tf.text.graph_words.split_words`.

    >>> split("U.S. mail", "whitespace"), [w for w, _, _ in split("U.S. mail", "punctuation")]
    ([('U.S.', 0, 4), ('mail', 5, 9)], ['U', '.', 'S', '.', 'mail'])
    """
    check_convention(convention)
    if convention == "punctuation":
        from albert_tf.data.docstring_entities import split_words

        return split_words(text)
    words, start = [], None
    for i, char in enumerate(text + " "):
        if char.isspace():
            if start is not None:
                words.append((text[start:i], start, i))
                start = None
        elif start is None:
            start = i
    return words


def reproduced(word, convention="punctuation"):
    """Whether `word`, between spaces, is split back into exactly itself by `convention`."""
    return [w for w, _, _ in split(word, convention)] == [word]


def measure(sentences):
    """How far the punctuation split gives back the words of `sentences` (lists of words):
    {"punctuation_reproduces": fraction of the words (1.0 for none), "words": their count,
    "examples": the most frequent words it does not give back}."""
    missed = collections.Counter()
    total = 0
    for words in sentences:
        total += len(words)
        missed.update(w for w in words if not reproduced(w))
    return {
        "punctuation_reproduces": 1.0 - sum(missed.values()) / total if total else 1.0,
        "words": total,
        "examples": [w for w, _ in missed.most_common(EXAMPLES)],
    }


def rule(measured):
    """The convention `measured` (see `measure`) calls for."""
    return "punctuation" if measured["punctuation_reproduces"] >= MIN_REPRODUCED else "whitespace"


def _evidence(measured):
    examples = measured.get("examples") or []
    return (
        f"the punctuation split reproduces {measured['punctuation_reproduces']:.1%} of "
        f"{measured['words']:,} training words"
        + (
            f": tokens such as {', '.join(repr(w) for w in examples[:3])} hold punctuation"
            if examples
            else ""
        )
    )


def choose(measured, requested="auto"):
    """The decision record of `requested` ("auto": the rule's) on `measured` (None: nothing
    measured, e.g. a run recorded before the convention existed): {"convention", "chosen_by",
    **measured, "warning" (when `requested` contradicts the rule)}; logs it in one line."""
    check_convention(requested, allow_auto=True)
    warning = None
    if requested == "auto":
        convention = rule(measured) if measured else DEFAULT
        chosen_by = "training data" if measured else "default: no training words measured"
    else:
        convention, chosen_by = requested, "--word_split"
        if measured and rule(measured) != requested:
            warning = (
                f"--word_split={requested} contradicts the training data ({_evidence(measured)}; "
                f"the rule asks for {rule(measured)} at {MIN_REPRODUCED:.0%}): "
                + (
                    "raw text is split into words the model was not trained on"
                    if requested == "punctuation"
                    else "punctuation typed without spaces ('Paris.') is served as part of "
                    "its word, which the training data splits off"
                )
            )
    record = {"convention": convention, "chosen_by": chosen_by, **(measured or {})}
    line = f"word convention: {convention} ({chosen_by}" + (
        f"; {_evidence(measured)}, threshold {MIN_REPRODUCED:.0%})" if measured else ")"
    )
    logging.info("%s", line)
    if warning:
        record["warning"] = warning
        logging.warning("%s", warning)
    return record


def decide(sentences, requested="auto"):
    """`choose` on `measure(sentences)` (the training sentences' words)."""
    return choose(measure(sentences), requested)


def recorded(description):
    """The decision record in a task description (its "word_convention" entry), or what a
    description written before the convention existed served (`DEFAULT`, nothing measured)."""
    record = description.get("word_convention")
    if record:
        return dict(record)
    return {"convention": DEFAULT, "chosen_by": "default (recorded before the convention)"}


def measured_part(record):
    """The measurement in a decision record (None when nothing was measured)."""
    if "punctuation_reproduces" not in record:
        return None
    return {k: record[k] for k in ("punctuation_reproduces", "words", "examples") if k in record}
