"""SQuAD v1.1 / v2.0 examples from the official JSON files.

``data[].paragraphs[].context`` and ``qas[]`` with ``id``, ``question``,
``answers[{text, answer_start}]`` and, in v2.0, ``is_impossible``.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.json")
>>> context = "The Eiffel Tower is in Paris. It opened in 1889."
>>> qas = [{"id": "q1", "question": "When did it open?",
...         "answers": [{"text": "1889", "answer_start": context.index("1889")}]}]
>>> _ = open(path, "w").write(json.dumps({"data": [{"paragraphs": [
...     {"context": context, "qas": qas}]}]}))
>>> examples = read_squad_examples(path)
>>> examples[0].answer_text, examples[0].gold_answers
('1889', ['1889'])
"""

import dataclasses
import json
from typing import List

from absl import logging

from albert_tf.data.task_spec import DataError
from albert_tf.data.text_files import read_text

#: How many question ids a warning lists.
IDS_IN_WARNINGS = 5


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
        qas_id: the question's id.
        question_text / context_text: as in the file.
        answer_text / answer_start: the first answer and its character offset in the context
            (the training label); "" and -1 when there is none (unanswerable, unlabelled, or
            kept for evaluation although its `answer_start` does not match).
        is_impossible: a v2.0 question without an answer.
        gold_answers: the texts of all answers (what evaluation compares with); [] when none.
    """

    qas_id: str
    question_text: str
    context_text: str
    answer_text: str = ""
    answer_start: int = -1
    is_impossible: bool = False
    gold_answers: List[str] = dataclasses.field(default_factory=list)


class SquadExamples(list):
    """A list of `SquadExample`s that remembers its file and the questions whose first answer
    does not match the context at its `answer_start` (`mismatched_ids`)."""

    def __init__(self, examples=(), source="", mismatched_ids=()):
        super().__init__(examples)
        self.source = source
        self.mismatched_ids = list(mismatched_ids)


def read_squad_examples(path, version_2_with_negative=False, labelled=True, skip_mismatched=True):
    """The questions of a SQuAD JSON file (v1.1, or v2.0 with `version_2_with_negative`).

    Args:
        path: the file (local or gs://).
        version_2_with_negative: the file may hold unanswerable questions (``is_impossible``).
        labelled: every answerable question must have an answer (train and dev files); False
            for a file to predict on (answers are not read).
        skip_mismatched: a labelled question whose first answer's text differs from
            ``context[answer_start:answer_start + len(text)]`` is skipped (for training); False
            keeps it with answer_start -1 (for evaluation, which only needs the texts). Either
            way such questions are counted in `SquadExamples.mismatched_ids` and a warning
            lists the first ids.

    Raises:
        DataError: invalid JSON ("file:line:col: ..."), a missing key, an empty context or
            question, a duplicate id, a question without answers that is not marked
            impossible, or an impossible question in a v1.1 reading; it names the file and
            the question id.
    """
    dataset = _parse_json(path)
    examples, mismatched, seen = [], [], set()
    for where, context, qa in _questions(path, dataset):
        example = _example(path, where, context, qa, version_2_with_negative, labelled)
        if example.qas_id in seen:
            raise DataError(f"{path}: question {example.qas_id!r}: duplicate question id")
        seen.add(example.qas_id)
        if labelled and not example.is_impossible and not _answer_matches(example):
            mismatched.append(example.qas_id)
            if skip_mismatched:
                continue
            example.answer_text, example.answer_start = "", -1
        examples.append(example)
    if not seen:
        raise DataError(f"{path}: no questions (expected data[].paragraphs[].qas[])")
    if mismatched:
        logging.warning(
            "%s: %d of %d questions have an answer whose text differs from the context at its "
            "answer_start (%s): %s%s",
            path,
            len(mismatched),
            len(seen),
            "skipped" if skip_mismatched else "kept for evaluation without a span label",
            ", ".join(mismatched[:IDS_IN_WARNINGS]),
            ", ..." if len(mismatched) > IDS_IN_WARNINGS else "",
        )
    impossible = sum(e.is_impossible for e in examples)
    logging.info(
        "%s: %d questions (%d unanswerable), %d skipped for a mismatched answer",
        path,
        len(examples),
        impossible,
        len(mismatched) if skip_mismatched else 0,
    )
    return SquadExamples(examples, path, mismatched)


def has_answers(path):
    """Whether the SQuAD JSON file at `path` is labelled: some question has answers or is
    marked impossible (a dev file), rather than none (a file to answer only).

    Raises DataError as `read_squad_examples` for a file that is not SQuAD JSON.
    """
    return any(
        bool(qa.get("answers")) or qa.get("is_impossible") is True
        for _, _, qa in _questions(path, _parse_json(path))
        if isinstance(qa, dict)
    )


def _parse_json(path):
    text = read_text(path)
    try:
        dataset = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise DataError(f"{path}: expected a SQuAD JSON object with a 'data' list")
    return dataset


def _questions(path, dataset):
    """Yields (where, context, qa) for every question; checks the nesting on the way."""
    for a, article in enumerate(dataset["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"{path}: data[{a}]: missing 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise DataError(f"{path}: {where}: missing 'qas' list")
            context = paragraph.get("context")
            first = _question_id(path, f"{where}.qas[0]", qas[0]) if qas else None
            named = f"question {first!r} ({where})" if first else where
            if not isinstance(context, str):
                raise DataError(f"{path}: {named}: missing 'context' string")
            if not context.strip():
                raise DataError(f"{path}: {named}: empty context")
            for q, qa in enumerate(qas):
                yield f"{where}.qas[{q}]", context, qa


def _question_id(path, where, qa):
    if not isinstance(qa, dict) or "id" not in qa:
        raise DataError(f"{path}: {where}: question without an 'id'")
    qas_id = qa["id"]
    if not isinstance(qas_id, (str, int)) or isinstance(qas_id, bool) or str(qas_id) == "":
        raise DataError(
            f"{path}: {where}: question id must be a non-empty string, found {qas_id!r}"
        )
    return str(qas_id)


def _example(path, where, context, qa, version_2_with_negative, labelled):
    qas_id = _question_id(path, where, qa)
    named = f"{path}: question {qas_id!r}"
    question = qa.get("question")
    if not isinstance(question, str):
        raise DataError(f"{named}: missing 'question' string")
    if not question.strip():
        raise DataError(f"{named}: empty question")
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(f"{named}: is_impossible must be true or false, found {impossible!r}")
    if impossible and not version_2_with_negative:
        raise DataError(
            f"{named}: is_impossible is true in a SQuAD v1.1 reading; unanswerable "
            "questions need version_2_with_negative=True (SQuAD v2.0)"
        )
    example = SquadExample(qas_id, question, context, is_impossible=impossible)
    if not labelled:
        return example
    answers = _answers(named, qa)
    if impossible:
        if answers:
            raise DataError(f"{named}: is_impossible is true but 'answers' is not empty")
        return example
    if not answers:
        hint = (
            ""
            if version_2_with_negative
            else "; unanswerable questions need version_2_with_negative=True (SQuAD v2.0)"
        )
        raise DataError(f"{named}: no answers and is_impossible is not true{hint}")
    example.gold_answers = [text for text, _ in answers]
    example.answer_text, example.answer_start = answers[0]
    return example


def _answers(named, qa):
    answers = qa.get("answers")
    if not isinstance(answers, list):
        raise DataError(f"{named}: missing 'answers' list")
    out = []
    for i, answer in enumerate(answers):
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{named}: answers[{i}]: missing 'text' string")
        if not isinstance(start, int) or isinstance(start, bool):
            raise DataError(
                f"{named}: answers[{i}]: answer_start must be an integer, found {start!r}"
            )
        out.append((text, start))
    return out


def _answer_matches(example):
    start, text = example.answer_start, example.answer_text
    return (
        bool(text.strip())
        and 0 <= start
        and example.context_text[start : start + len(text)] == text
    )
