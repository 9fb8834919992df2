"""Text layers saved before `seq_length` was renamed `max_seq_length` still load: layer configs
(what .keras files and SavedModels store), a whole .keras model and finetune.json entries."""

import json
import zipfile

import keras
import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.finetune.task import describe_preprocessor, preprocessor_of
from albert_tf.models.backbone import AlbertModel
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.preprocessor import AlbertPreprocessor
from albert_tf.text.preprocessing_layers import SegmentPacker

TEXTS = ["A first sentence, rather long for its window.", "Short."]


def _old_style(config):
    """`config` as an older version wrote it: `seq_length` instead of `max_seq_length`."""
    config = dict(config)
    config["seq_length"] = config.pop("max_seq_length")
    return config


def _assert_same_ids(loaded, preprocessor):
    assert loaded.max_seq_length == preprocessor.max_seq_length
    expected, got = preprocessor(TEXTS), loaded(TEXTS)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key].numpy(), value.numpy(), err_msg=key)


def test_old_layer_configs_load(spm_model_file):
    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=12)
    old = _old_style(preprocessor.get_config())
    _assert_same_ids(AlbertPreprocessor.from_config(old), preprocessor)
    serialized = keras.saving.serialize_keras_object(preprocessor)
    serialized["config"] = _old_style(serialized["config"])
    restored = keras.saving.deserialize_keras_object(serialized)
    _assert_same_ids(restored, preprocessor)
    assert restored.get_config() == preprocessor.get_config()  # written back with the new key

    packer = SegmentPacker(6, cls_id=2, sep_id=3, pad_id=0)
    serialized = keras.saving.serialize_keras_object(packer)
    serialized["config"] = _old_style(serialized["config"])
    assert keras.saving.deserialize_keras_object(serialized).get_config() == packer.get_config()


def test_old_keras_file_loads(spm_model_file, tmp_path):
    config = AlbertConfig.from_preset("albert_tiny", vocab_size=1000, max_position_embeddings=16)
    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=16)
    model = AlbertClassifier(AlbertModel(config), num_classes=2, preprocessor=preprocessor)
    expected = model.predict(TEXTS, verbose=0)["logits"]
    new, old = tmp_path / "new.keras", tmp_path / "old.keras"
    model.save(str(new))
    # Rewrite the archive's config.json as an older version wrote it.
    with zipfile.ZipFile(new) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                text = data.decode("utf-8")
                assert text.count('"max_seq_length"') == 1
                data = text.replace('"max_seq_length"', '"seq_length"').encode("utf-8")
            target.writestr(item, data)
    loaded = keras.saving.load_model(str(old))
    assert loaded.preprocessor.max_seq_length == 16
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0)["logits"], expected, atol=1e-6)


def test_old_finetune_json_entry_loads(spm_model_file, tmp_path):
    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=10, dynamic_padding=True)
    description = json.loads(json.dumps(describe_preprocessor(preprocessor)))
    description["preprocessor"] = _old_style(description["preprocessor"])
    loaded = preprocessor_of(description, str(tmp_path))
    assert loaded.dynamic_padding
    _assert_same_ids(loaded, preprocessor)
