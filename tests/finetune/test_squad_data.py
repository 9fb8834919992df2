"""SQuAD files -> examples -> windows: labels that cover the answers, layout, alignment, cache,
and errors naming the file and question.

The helpers at the top (`write_squad`, `v1_dataset`, `v2_dataset`, `SETTINGS`) are shared with
test_squad_predictions.py.
"""

import json
import logging
import os

import numpy as np
import pytest

from albert_tf.data import squad_alignment, squad_cache, squad_examples, squad_features
from albert_tf.data.task_spec import DataError

# Small windows so that the contexts below span several of them: 32 positions, at most 10
# question pieces, a new window every 8 pieces.
SETTINGS = squad_features.FeatureSettings(max_seq_length=32, doc_stride=8, max_query_length=10)

TOWER = (
    "Gustave Eiffel's company designed and built the tower in Paris between 1887 and "
    "1889. The café on the first floor serves crème brûlée; Zürich-born visitors call it "
    "« la dame de fer ». It was the tallest man-made structure in the world until 1930, "
    "when the Chrysler Building in New York City was finished."
)
NILE = "The Nile  is a river in\nnorth-eastern Africa (6,650 km long)."
LONG_QUESTION = (
    "In which year, according to the paragraph about the famous iron lattice tower "
    "on the Champ de Mars, did it stop being the tallest structure?"
)
MARS = "Mars is the fourth planet from the Sun; its two moons are Phobos and Deimos."


def answer(context, text, occurrence=0, shift=0):
    """{"text", "answer_start"} of the `occurrence`-th `text` in `context` (+ `shift`)."""
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(text, start + 1)
    return {"text": text, "answer_start": start + shift}


def word_questions(context, prefix):
    """One question per whitespace-separated word (with its punctuation) and per word pair:
    answers everywhere, so some start or end at window borders."""
    words, position = [], 0
    for word in context.split():
        position = context.index(word, position)
        words.append((word, position))
        position += len(word)
    qas = []
    for i, (word, start) in enumerate(words):
        qas.append(
            {
                "id": f"{prefix}-w{i}",
                "question": f"What is word {i}?",
                "answers": [{"text": word, "answer_start": start}],
            }
        )
        if i + 1 < len(words):
            end = words[i + 1][1] + len(words[i + 1][0])
            qas.append(
                {
                    "id": f"{prefix}-p{i}",
                    "question": f"Which words start at {i}?",
                    "answers": [{"text": context[start:end], "answer_start": start}],
                }
            )
    return qas


def v1_dataset():
    """A SQuAD v1.1 dataset: hand-written questions (several answers, whitespace and
    punctuation at the ends, a question longer than max_query_length, one mismatched
    answer_start) plus one question per word and per word pair."""
    tower = [
        {
            "id": "who",
            "question": "Who designed the tower?",
            "answers": [answer(TOWER, "Gustave Eiffel's company"), answer(TOWER, "Gustave Eiffel")],
        },
        {
            "id": "where",
            "question": "Where is the tower?",
            "answers": [answer(TOWER, " Paris", shift=0)],
        },  # a leading space
        {
            "id": "dessert",
            "question": "What does the café serve?",
            "answers": [answer(TOWER, "crème brûlée; ")],
        },  # trailing punctuation and space
        {"id": "long", "question": LONG_QUESTION, "answers": [answer(TOWER, "1930")]},
        {
            "id": "building",
            "question": "Which building was finished in 1930?",
            "answers": [answer(TOWER, "Chrysler Building")],
        },
        {
            "id": "last",
            "question": "What happened to the building?",
            "answers": [answer(TOWER, "was finished.")],
        },
        {
            "id": "bad-start",
            "question": "When was it built?",
            "answers": [answer(TOWER, "1887", shift=3)],
        },
    ] + word_questions(TOWER, "tower")
    nile = [
        {
            "id": "nile",
            "question": "Where is the Nile?",
            "answers": [answer(NILE, "north-eastern Africa"), answer(NILE, "Africa")],
        },
        {
            "id": "length",
            "question": "How long is the Nile?",
            "answers": [answer(NILE, "6,650 km")],
        },
    ] + word_questions(NILE, "nile")
    return {
        "version": "1.1",
        "data": [
            {"title": "Eiffel_Tower", "paragraphs": [{"context": TOWER, "qas": tower}]},
            {"title": "Nile", "paragraphs": [{"context": NILE, "qas": nile}]},
        ],
    }


def v2_dataset():
    """A SQuAD v2.0 dataset: answerable and unanswerable questions on two contexts."""
    mars = [
        {
            "id": "moons",
            "question": "What are the moons of Mars?",
            "is_impossible": False,
            "answers": [answer(MARS, "Phobos and Deimos")],
        },
        {
            "id": "rings",
            "question": "How many rings does Mars have?",
            "is_impossible": True,
            "answers": [],
            "plausible_answers": [answer(MARS, "two")],
        },
        {
            "id": "order",
            "question": "Which planet from the Sun is Mars?",
            "is_impossible": False,
            "answers": [answer(MARS, "fourth"), answer(MARS, "the fourth planet")],
        },
    ]
    tower = [
        {
            "id": "height",
            "question": "How tall is the tower in metres?",
            "is_impossible": True,
            "answers": [],
        },
        {
            "id": "city",
            "question": "Which city?",
            "is_impossible": False,
            "answers": [answer(TOWER, "New York City")],
        },
        {
            "id": "first",
            "question": "Who?",
            "is_impossible": False,
            "answers": [answer(TOWER, "Gustave")],
        },
    ]
    return {
        "version": "v2.0",
        "data": [
            {
                "title": "Mars",
                "paragraphs": [{"context": MARS, "qas": mars}, {"context": TOWER, "qas": tower}],
            }
        ],
    }


def write_squad(path, dataset):
    path.write_text(json.dumps(dataset, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model_file)


@pytest.fixture(scope="module")
def v1_file(tmp_path_factory):
    return write_squad(tmp_path_factory.mktemp("squad") / "train-v1.1.json", v1_dataset())


@pytest.fixture(scope="module")
def v1_features(v1_file, tokenizer):
    examples = squad_examples.read_squad_examples(v1_file)
    return examples, squad_features.build_features(examples, tokenizer, SETTINGS)


def _error(path, *args, **kwargs):
    with pytest.raises(DataError) as info:
        squad_examples.read_squad_examples(str(path), *args, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------------------- reading
def test_reads_v1_examples(v1_file, caplog):
    with caplog.at_level(logging.WARNING):
        examples = squad_examples.read_squad_examples(v1_file)
    by_id = {e.qas_id: e for e in examples}
    who = by_id["who"]
    assert (who.question_text, who.context_text) == ("Who designed the tower?", TOWER)
    assert who.answer_text == "Gustave Eiffel's company" and who.answer_start == 0
    assert who.gold_answers == ["Gustave Eiffel's company", "Gustave Eiffel"]
    assert by_id["where"].answer_text == " Paris"
    assert not any(e.is_impossible for e in examples)
    # The mismatched answer_start is counted, listed in a warning and skipped.
    assert "bad-start" not in by_id and examples.mismatched_ids == ["bad-start"]
    assert len(examples) == len(v1_dataset()["data"][0]["paragraphs"][0]["qas"]) - 1 + len(
        v1_dataset()["data"][1]["paragraphs"][0]["qas"]
    )
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "1 of" in warning and "bad-start" in warning and "skipped" in warning


def test_mismatched_answer_kept_for_evaluation(v1_file):
    examples = squad_examples.read_squad_examples(v1_file, skip_mismatched=False)
    bad = next(e for e in examples if e.qas_id == "bad-start")
    assert (bad.answer_text, bad.answer_start, bad.gold_answers) == ("", -1, ["1887"])
    assert examples.mismatched_ids == ["bad-start"]


def test_reads_v2_and_unlabelled(tmp_path):
    path = write_squad(tmp_path / "dev-v2.0.json", v2_dataset())
    examples = squad_examples.read_squad_examples(path, version_2_with_negative=True)
    rings = next(e for e in examples if e.qas_id == "rings")
    assert rings.is_impossible and rings.gold_answers == [] and rings.answer_text == ""
    assert sum(e.is_impossible for e in examples) == 2
    unlabelled = squad_examples.read_squad_examples(
        path, version_2_with_negative=True, labelled=False
    )
    assert [e.gold_answers for e in unlabelled] == [[]] * 6
    assert all(e.answer_start == -1 for e in unlabelled)


def test_errors_name_file_and_question(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"paragraphs": [}\n]}')
    assert _error(path).startswith(f"{path}:2:19: not valid JSON")

    def dataset_with(qa, context=MARS):
        return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}

    good = {"id": "q7", "question": "Moons?", "answers": [answer(MARS, "Phobos")]}
    cases = [
        ({**good, "question": "  "}, MARS, "question 'q7': empty question"),
        (
            {k: v for k, v in good.items() if k != "question"},
            MARS,
            "question 'q7': missing 'question'",
        ),
        (
            {k: v for k, v in good.items() if k != "answers"},
            MARS,
            "question 'q7': missing 'answers'",
        ),
        (good, " \n", "question 'q7' (data[0].paragraphs[0]): empty context"),
        (
            {**good, "answers": []},
            MARS,
            "question 'q7': no answers and is_impossible is not "
            "true; unanswerable questions need version_2_with_negative=True",
        ),
        (
            {**good, "answers": [], "is_impossible": True},
            MARS,
            "question 'q7': is_impossible is true in a SQuAD v1.1 reading",
        ),
        (
            {**good, "answers": [{"text": "Phobos", "answer_start": "12"}]},
            MARS,
            "question 'q7': answers[0]: answer_start must be an integer",
        ),
        (
            {k: v for k, v in good.items() if k != "id"},
            MARS,
            "data[0].paragraphs[0].qas[0]: question without an 'id'",
        ),
    ]
    for qa, context, message in cases:
        write_squad(path, dataset_with(qa, context))
        assert _error(path).startswith(f"{path}: {message}"), (message, _error(path))
    write_squad(path, dataset_with({**good, "answers": []}))
    assert _error(path, version_2_with_negative=True) == (
        f"{path}: question 'q7': no answers and is_impossible is not true"
    )
    write_squad(path, {"data": [{"paragraphs": [{"context": MARS, "qas": [good, good]}]}]})
    assert _error(path) == f"{path}: question 'q7': duplicate question id"
    with pytest.raises(FileNotFoundError, match="missing.json"):
        squad_examples.read_squad_examples(str(tmp_path / "missing.json"))


# ------------------------------------------------------------------------------ features
def test_settings_are_checked():
    with pytest.raises(ValueError, match="leaves no room for the context"):
        squad_features.FeatureSettings(max_seq_length=16, max_query_length=13)
    with pytest.raises(ValueError, match="must be positive"):
        squad_features.FeatureSettings(doc_stride=0)


def test_labels_cover_the_answers(v1_features):
    examples, features = v1_features
    found = set()
    for row in range(len(features)):
        if features.is_impossible[row]:
            assert features.start_positions[row] == features.end_positions[row] == 0
            continue
        example = examples[features.example_index[row]]
        start, end = features.start_positions[row], features.end_positions[row]
        assert start <= end and features.p_mask[row, start] == features.p_mask[row, end] == 0
        begin = features.piece_start_char[row, start]
        finish = features.piece_end_char[row, end]
        stripped = example.answer_text.strip()
        offset = example.answer_start + example.answer_text.index(stripped)
        assert begin <= offset and offset + len(stripped) <= finish, example.qas_id
        # The pieces fit the answer: the span is the answer, give or take whitespace.
        assert example.context_text[begin:finish].strip() == stripped, example.qas_id
        found.add(example.qas_id)
    # Every answer fits in a window here (they are short), so every question has a label.
    assert found == {e.qas_id for e in examples}
    assert features.stats.num_windows_with_answer == int((features.is_impossible == 0).sum())


def test_answers_at_window_borders_are_labelled(v1_features):
    examples, features = v1_features
    context_rows = features.p_mask == 0
    context_rows[:, 0] = False
    first = context_rows.argmax(axis=1)
    last = context_rows.shape[1] - 1 - context_rows[:, ::-1].argmax(axis=1)
    labelled = features.is_impossible == 0
    assert np.any(labelled & (features.start_positions == first))
    assert np.any(labelled & (features.end_positions == last))


def test_window_layout(v1_features, tokenizer):
    examples, features = v1_features
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    assert features.input_word_ids.shape == (len(features), 32)
    assert features.input_word_ids.dtype == np.int32 and features.token_is_max_context.dtype == bool
    for row in range(len(features)):
        example = examples[features.example_index[row]]
        query = tokenizer.encode_ids(example.question_text)[: SETTINGS.max_query_length]
        ids = features.input_word_ids[row]
        used = int(features.input_mask[row].sum())
        n = len(query)
        assert ids[0] == cls_id and ids[1 : n + 1].tolist() == query and ids[n + 1] == sep_id
        assert ids[used - 1] == sep_id and not ids[used:].any()
        assert features.input_mask[row, :used].all()
        types = features.input_type_ids[row]
        assert not types[: n + 2].any() and types[n + 2 : used].all() and not types[used:].any()
        p_mask = features.p_mask[row]
        assert p_mask[0] == 0 and p_mask[1 : n + 2].all() and not p_mask[n + 2 : used - 1].any()
        assert p_mask[used - 1 :].all()
        context = p_mask == 0
        context[0] = False
        assert (features.piece_start_char[row][~context] == -1).all()
        assert (features.piece_start_char[row][context] >= 0).all()
        assert not features.token_is_max_context[row][~context].any()
    long_rows = [
        r for r in range(len(features)) if examples[features.example_index[r]].qas_id == "long"
    ]
    assert features.input_word_ids[long_rows[0], SETTINGS.max_query_length + 1] == sep_id


def test_windows_slide_and_each_piece_has_one_max_context_window(v1_features, tokenizer):
    examples, features = v1_features
    for example_index, rows in squad_features.example_windows(features):
        example = examples[example_index]
        pieces = tokenizer.encode_pieces(example.context_text)
        alignment = squad_alignment.align_pieces(example.context_text, pieces)
        query = tokenizer.encode_ids(example.question_text)[: SETTINGS.max_query_length]
        spans = squad_features.window_spans(len(pieces), 32 - len(query) - 3, 8)
        assert len(rows) == len(spans) >= (4 if example.context_text == TOWER else 2)
        max_context = np.zeros(len(pieces), int)
        for row, (start, length) in zip(rows, spans):
            positions = slice(len(query) + 2, len(query) + 2 + length)
            assert not features.p_mask[row, positions].any()
            np.testing.assert_array_equal(
                features.piece_start_char[row, positions],
                alignment.piece_start_char[start : start + length],
            )
            np.testing.assert_array_equal(
                features.piece_end_char[row, positions],
                alignment.piece_end_char[start : start + length],
            )
            max_context[start : start + length] += features.token_is_max_context[row, positions]
        assert (max_context == 1).all(), example.qas_id


def test_alignment_of_non_ascii_and_irregular_text(tokenizer):
    for text in (TOWER, NILE, "  Ｆｕｌｌ-width ﬁle… “x”\u00a0y\ttab 9,000,000.", "Ça va ?"):
        pieces = tokenizer.encode_pieces(text)
        alignment = squad_alignment.align_pieces(text, pieces)
        assert alignment is not None, text
        starts, ends = alignment.piece_start_char, alignment.piece_end_char
        assert starts == sorted(starts) and all(s <= e for s, e in zip(starts, ends))
        covered = {i for s, e in zip(starts, ends) for i in range(s, e)}
        assert covered >= {i for i, c in enumerate(text) if not c.isspace()}, text
    # Pieces of another text fail to align.
    assert (
        squad_alignment.align_pieces("completely different", tokenizer.encode_pieces("xyz qrs"))
        is None
    )


def test_alignment_failures_are_counted_and_logged(tokenizer, caplog):
    class WrongPieces:
        """The tokenizer, but the pieces of a context saying "unalignable" are wrong."""

        lower_case = True

        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def encode_pieces(self, text):
            return tokenizer.encode_pieces("zzz qqq" if "unalignable" in text else text)

    examples = [
        squad_examples.SquadExample(
            "bad", "Why?", "unalignable text here", "text", 12, gold_answers=["text"]
        ),
        squad_examples.SquadExample("good", "Which?", MARS, "Mars", 0, gold_answers=["Mars"]),
    ]
    with caplog.at_level(logging.WARNING):
        features = squad_features.build_features(examples, WrongPieces(), SETTINGS)
    assert features.stats.alignment_failures == ["bad"]
    assert set(features.example_index.tolist()) == {1}
    assert (
        "1 of 2 questions have a context that could not be aligned" in caplog.text
        and "bad" in caplog.text
    )


def test_v2_and_unlabelled_features(tmp_path, tokenizer):
    path = write_squad(tmp_path / "dev-v2.0.json", v2_dataset())
    examples = squad_examples.read_squad_examples(path, version_2_with_negative=True)
    features = squad_features.build_features(examples, tokenizer, SETTINGS)
    for example_index, rows in squad_features.example_windows(features):
        if examples[example_index].is_impossible:
            assert features.is_impossible[rows].all() and not features.start_positions[rows].any()
        else:
            assert not features.is_impossible[rows].all()
    unlabelled = squad_features.build_features(examples, tokenizer, SETTINGS, labelled=False)
    assert not (unlabelled.start_positions.any() or unlabelled.is_impossible.any())
    np.testing.assert_array_equal(unlabelled.input_word_ids, features.input_word_ids)
    assert features.stats.num_examples == 6 and features.stats.num_windows == len(features)


def test_tokenizer_must_match_lower_case(tokenizer):
    with pytest.raises(ValueError, match="lower_case"):
        squad_features.build_features(
            [], tokenizer, squad_features.FeatureSettings(lower_case=False)
        )
    with pytest.raises(ValueError, match="tex_quotes"):
        squad_features.build_features(
            [], tokenizer, squad_features.FeatureSettings(tex_quotes=True)
        )


def test_tex_quotes_tokenize_as_hugging_face_and_answers_keep_both_quote_characters(
    tmp_path, spm_model_file
):
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    context = "She said ``stop there'' and left, ''twice``."
    quoted = "``stop there''"
    paragraph = {
        "context": context,
        "qas": [{"id": "q", "question": "What did she say?", "answers": [answer(context, quoted)]}],
    }
    dataset = {"version": "1.1", "data": [{"title": "quotes", "paragraphs": [paragraph]}]}
    examples = squad_examples.read_squad_examples(write_squad(tmp_path / "q.json", dataset))
    for tex_quotes in (False, True):
        settings = squad_features.FeatureSettings(64, 8, 10, tex_quotes=tex_quotes)
        features = squad_features.build_features(examples, spm_model_file, settings)
        tokenizer = SentencePieceTokenizer(spm_model_file, tex_quotes=tex_quotes)
        context_ids = tokenizer.encode_ids(context)
        start = len(tokenizer.encode_ids("What did she say?")[:10]) + 2
        ids = features.input_word_ids[0].tolist()
        assert ids[start : start + len(context_ids)] == context_ids
        first, last = features.start_positions[0], features.end_positions[0]
        span = features.piece_start_char[0, first], features.piece_end_char[0, last]
        assert context[span[0] : span[1]] == quoted, tex_quotes
    pieces = SentencePieceTokenizer(spm_model_file, tex_quotes=True).encode_pieces(context)
    assert '"' in "".join(pieces) and "`" not in "".join(pieces)


# --------------------------------------------------------------------------------- cache
def test_cache_reuse_and_rebuild(tmp_path, spm_model_file, monkeypatch):
    cache_dir = str(tmp_path / "cache")
    train = write_squad(tmp_path / "train.json", v1_dataset())
    built = squad_cache.cached_features(train, spm_model_file, SETTINGS, True, cache_dir)
    names = sorted(os.listdir(cache_dir))
    assert len(names) == 2 and names[0].endswith(".json") and names[1].endswith(".tfrecord")
    assert names[1].startswith("train-seq32-stride8-query10-")

    def no_build(*args, **kwargs):
        raise AssertionError("features rebuilt although cached")

    monkeypatch.setattr(squad_cache, "build_features", no_build)
    cached = squad_cache.cached_features(train, spm_model_file, SETTINGS, True, cache_dir)
    for name, values in built.arrays().items():
        np.testing.assert_array_equal(cached.arrays()[name], values, err_msg=name)
        assert cached.arrays()[name].dtype == values.dtype, name
    assert cached.stats == built.stats and cached.stats.answer_mismatches == 1
    monkeypatch.undo()

    # A changed setting, labelled flag or file content builds new features beside the old.
    wider = squad_features.FeatureSettings(max_seq_length=48, doc_stride=8, max_query_length=10)
    assert (
        squad_cache.cached_features(
            train, spm_model_file, wider, True, cache_dir
        ).input_word_ids.shape[1]
        == 48
    )
    squad_cache.cached_features(train, spm_model_file, SETTINGS, False, cache_dir)
    write_squad(tmp_path / "train.json", {"data": v1_dataset()["data"][1:]})
    fewer = squad_cache.cached_features(train, spm_model_file, SETTINGS, True, cache_dir)
    assert fewer.stats.num_examples < built.stats.num_examples
    names = sorted(os.listdir(cache_dir))
    assert len(names) == 8 and not any(n.startswith(".") for n in names)
    assert len({n.rsplit("-", 1)[1] for n in names if n.endswith(".tfrecord")}) == 4
