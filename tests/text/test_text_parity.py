"""TextTokenizer (in-graph) gives the ids of SentencePieceTokenizer (Python), everywhere it runs."""

import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from albert_tf.text import SegmentPacker, SentencePieceTokenizer, TextTokenizer


def as_bytes(text):
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize(
    "lower_case, tex_quotes, albert_rules",
    [
        (True, False, True),
        (True, True, True),
        (False, False, True),
        (False, True, True),
        (False, False, False),  # keras-hub's tokenizer: SentencePiece on the text as given
        (True, True, False),
    ],
)
def test_torture_set_same_ids(spm_model_file, torture_texts, lower_case, tex_quotes, albert_rules):
    settings = dict(lower_case=lower_case, tex_quotes=tex_quotes, albert_rules=albert_rules)
    py = SentencePieceTokenizer(spm_model_file, **settings)
    graph = TextTokenizer(spm_model_file, **settings)
    got = graph(tf.constant([as_bytes(t) for t in torture_texts]))
    assert got.dtype == tf.int32
    for text, ids in zip(torture_texts, got.to_list()):
        assert ids == py.encode_ids(text), repr(text)[:80]
    # Invalid UTF-8 is replaced, not an error: b"caf\xc3" reads as "caf\ufffd".
    assert py.encode_ids(b"caf\xc3") == py.encode_ids("caf\ufffd")


def test_corpus_sentences_same_ids(corpus_file, py_tokenizer, graph_tokenizer):
    with open(corpus_file, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line]
    got = graph_tokenizer(tf.constant(lines)).to_list()
    assert got == [py_tokenizer.encode_ids(line) for line in lines]


def test_scalar_and_column_inputs(graph_tokenizer, py_tokenizer):
    expected = [py_tokenizer.encode_ids("Hello there")]
    assert graph_tokenizer(tf.constant("Hello there")).to_list() == expected
    assert graph_tokenizer(tf.constant([["Hello there"]])).to_list() == expected
    with pytest.raises(ValueError, match=r"expects texts of shape \[batch\] or \[batch, 1\]"):
        graph_tokenizer(tf.constant([[["x"]]]))


def test_in_tf_data(graph_tokenizer, py_tokenizer):
    packer = SegmentPacker(12, cls_id=2, sep_id=3, pad_id=0)
    texts = ["The first sentence, 9,000 words.", "Second!", "", "Third one is here"]
    dataset = (
        tf.data.Dataset.from_tensor_slices(texts)
        .batch(2)
        .map(lambda t: packer([graph_tokenizer(t)]))
    )
    rows = [row for batch in dataset for row in batch["input_word_ids"].numpy().tolist()]
    expected = [([2] + py_tokenizer.encode_ids(t)[:10] + [3] + [0] * 10)[:12] for t in texts]
    assert rows == expected


def test_config_round_trip_and_keras_saving(graph_tokenizer, tmp_path):
    config = graph_tokenizer.get_config()
    assert config["lower_case"] is True and "model_proto_base64" in config
    clone = TextTokenizer.from_config(config)
    assert clone.model_proto == graph_tokenizer.model_proto
    text = tf.constant(["Round trip, 1,234!"])
    assert clone(text).to_list() == graph_tokenizer(text).to_list()
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(graph_tokenizer)
    )
    assert (
        isinstance(restored, TextTokenizer)
        and restored(text).to_list() == graph_tokenizer(text).to_list()
    )
    with pytest.raises(ValueError, match="needs exactly one of spm_model and model_proto_base64"):
        TextTokenizer()


def test_export_archive_serves_raw_text_in_a_fresh_process(graph_tokenizer, py_tokenizer, tmp_path):
    """ExportArchive traces the endpoint with tf.function(autograph=False); the SavedModel must load
    with only tensorflow and tensorflow_text imported."""
    packer = SegmentPacker(16, cls_id=2, sep_id=3, pad_id=0)
    archive = keras.export.ExportArchive()
    archive.track(graph_tokenizer)
    archive.track(packer)
    archive.add_endpoint(
        "serve",
        lambda text: packer([graph_tokenizer(text)]),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    export_dir = str(tmp_path / "export")
    archive.write_out(export_dir, verbose=False)
    assert not tf.io.gfile.listdir(f"{export_dir}/assets")  # the model is embedded in the graph
    code = (
        "import tensorflow as tf, tensorflow_text, sys\n"
        f"m = tf.saved_model.load({export_dir!r})\n"
        "out = m.serve(tf.constant(['Caf\\u00e9 costs 9,000, ok?', '']))\n"
        "print(out['input_word_ids'].numpy().tolist()); print(out['input_mask'].numpy().tolist())\n"
        "print('albert_tf' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    ids_line, mask_line, modules_line = result.stdout.strip().splitlines()[-3:]
    first = [2] + py_tokenizer.encode_ids("Caf\u00e9 costs 9,000, ok?")[:14] + [3]
    assert eval(ids_line) == [first + [0] * (16 - len(first)), [2, 3] + [0] * 14]
    assert eval(mask_line) == [[1] * len(first) + [0] * (16 - len(first)), [1, 1] + [0] * 14]
    assert modules_line == "False"
