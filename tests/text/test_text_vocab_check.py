"""One check pairs a SentencePiece vocabulary with a model; a corrupt model file is named, not
dumped (albert_tf.text.vocab_check, albert_tf.text.tokenizer.load_processor)."""

import pytest

from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.text.tokenizer import SentencePieceTokenizer, VocabularyError
from albert_tf.text.vocab_check import check_vocabulary_matches


def _trained(corpus_file, prefix, pad_id=0, unk_id=1, control=("[CLS]", "[SEP]", "[MASK]")):
    """A 1000-piece model of the corpus like the `spm_model_file` fixture's, with other special
    ids (trained anew: editing the model proto would need sentencepiece's generated protobuf
    module, which needs a newer protobuf than apache-beam allows)."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        input=corpus_file,
        model_prefix=str(prefix),
        vocab_size=1000,
        model_type="unigram",
        pad_id=pad_id,
        unk_id=unk_id,
        bos_id=-1,
        eos_id=-1,
        control_symbols=list(control),
        character_coverage=0.99995,
        normalization_rule_name="nmt_nfkc",
        minloglevel=2,
    )
    return f"{prefix}.model"


@pytest.fixture
def corrupt_model(tmp_path):
    path = tmp_path / "corrupt.model"
    path.write_bytes(bytes(range(256)) * 4)
    return str(path)


def test_a_corrupt_model_file_is_named_not_dumped(corrupt_model):
    from albert_tf.models.preprocessor import AlbertPreprocessor
    from albert_tf.text.preprocessing_layers import TextTokenizer

    expected = f"{corrupt_model}: not a SentencePiece model (it does not parse as one)"
    for load in (SentencePieceTokenizer, TextTokenizer, AlbertPreprocessor):
        with pytest.raises(UserError) as error:
            load(corrupt_model)
        assert str(error.value) == expected, load.__name__
    with pytest.raises(VocabularyError) as error:
        SentencePieceTokenizer(b"\x00" * 60)
    assert str(error.value) == (
        "the given SentencePiece model (60 bytes): not a SentencePiece "
        "model (it does not parse as one)"
    )


def test_size_and_special_ids(spm_model_file, corpus_file, tmp_path, caplog):
    config = AlbertConfig(vocab_size=1000)
    assert check_vocabulary_matches(spm_model_file, config).vocab_size == 1000
    with pytest.raises(VocabularyError) as error:
        check_vocabulary_matches(
            spm_model_file,
            AlbertConfig(vocab_size=30000),
            flag="--spm_model_file",
            model="albert_config.json",
        )
    assert str(error.value) == (
        f"--spm_model_file={spm_model_file} has 1000 pieces but the model (albert_config.json) "
        "has vocab_size 30000: the tokenizer does not belong to this model"
    )
    swapped = _trained(corpus_file, tmp_path / "swapped", pad_id=1, unk_id=0)
    with pytest.raises(VocabularyError) as error:
        check_vocabulary_matches(swapped, config, flag="--spm_model_file", model="run/export")
    assert str(error.value) == (
        f"--spm_model_file={swapped}: special ids differ from ALBERT's <pad>=0, <unk>=1 "
        "(pad_id 1 vs 0, unk_id 0 vs 1); the tokenizer does not belong to the model (run/export)"
    )
    cls_sep = _trained(corpus_file, tmp_path / "cls_sep", control=("[SEP]", "[CLS]", "[MASK]"))
    check_vocabulary_matches(cls_sep, config)  # no reference: [CLS] and [SEP] may be anywhere
    with pytest.raises(
        VocabularyError,
        match=(
            rf"special ids differ from the model's own {spm_model_file} \(cls_id 3 vs 2, "
            r"sep_id 2 vs 3\)"
        ),
    ):
        check_vocabulary_matches(cls_sep, config, reference=spm_model_file)
    with pytest.raises(VocabularyError, match=r"^--spm_model_file=/no/such.model: file not found$"):
        check_vocabulary_matches("/no/such.model", config, flag="--spm_model_file")


def test_layers_are_checked_by_their_source(spm_model_file):
    from albert_tf.models.preprocessor import AlbertPreprocessor

    preprocessor = AlbertPreprocessor(spm_model_file, max_seq_length=8)
    with pytest.raises(
        VocabularyError,
        match=(rf"^{spm_model_file} has 1000 pieces but the model \(export\) has vocab_size 40:"),
    ):
        check_vocabulary_matches(preprocessor, AlbertConfig(vocab_size=40), model="export")
    copy = preprocessor.with_padding(True)  # from its config: bytes, no file name
    with pytest.raises(VocabularyError, match=r"^the given SentencePiece model \(\d+ bytes\) has "):
        check_vocabulary_matches(copy, AlbertConfig(vocab_size=40))


def test_export_refuses_a_vocabulary_of_another_model(spm_model_file, tmp_path):
    from albert_tf.export.saved_model import export_backbone
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.preprocessor import AlbertPreprocessor

    backbone = AlbertModel(AlbertConfig.from_preset("albert_tiny", vocab_size=40))
    with pytest.raises(VocabularyError) as error:
        export_backbone(
            backbone,
            AlbertPreprocessor(spm_model_file, max_seq_length=8),
            str(tmp_path / "serving"),
            write_warmup=False,
        )
    assert str(error.value).startswith(
        f"{spm_model_file} has 1000 pieces but the model (the exported AlbertModel) has "
        "vocab_size 40"
    )
    assert not (tmp_path / "serving").exists()
