"""run_pretraining pairs only what belongs together: a --spm_model_file of another vocabulary
and an --output_dir holding a run of another model fail before training, naming the flag and
the settings that differ (in process)."""

import json
import os

import pytest
from train_support import VOCAB, tiny_params

from albert_tf.settings import InvalidFlagError
from albert_tf.text.tokenizer import VocabularyError
from albert_tf.train import runner


def test_a_vocabulary_of_another_size_fails_before_training(records, spm_model_file, tmp_path):
    out = str(tmp_path / "run")
    with pytest.raises(VocabularyError) as error:
        runner.run_pretraining(
            tiny_params(records, out, spm_model_file=spm_model_file, dynamic_masking=True)
        )
    assert str(error.value) == (
        f"--spm_model_file={spm_model_file} has 1000 pieces but the model ({records['config']}) "
        f"has vocab_size {VOCAB}: the tokenizer does not belong to this model"
    )
    assert not os.path.exists(os.path.join(out, "checkpoints"))


def test_a_run_of_another_model_is_named_with_the_settings(records, tmp_path):
    from albert_tf.train import strategy

    out = str(tmp_path / "run")
    run = runner._Runner(tiny_params(records, out), strategy.create_strategy("one_device"))
    run.restore_or_warm_start()  # writes albert_config.json, as a run does before training
    run.checkpointer.save()  # what the run leaves in --output_dir, without its training time
    run.close()
    with open(records["config"]) as f:
        wider = dict(json.load(f), hidden_size=64)
    wider_file = tmp_path / "wider.json"
    wider_file.write_text(json.dumps(wider))
    with pytest.raises(InvalidFlagError) as error:  # from the albert_config.json of the run
        runner.run_pretraining(tiny_params(records, out, albert_config_file=str(wider_file)))
    assert str(error.value) == (
        f"--output_dir={out} holds a run of another model (hidden_size: "
        "32 there vs 64 now): resume it with its own settings or use a "
        "new --output_dir"
    )
    os.remove(os.path.join(out, "albert_config.json"))
    with pytest.raises(InvalidFlagError) as error:  # from the checkpoint's shapes
        runner.run_pretraining(tiny_params(records, out, albert_config_file=str(wider_file)))
    assert str(error.value) == (
        f"--output_dir={out} holds a run of another model (hidden_size "
        "32 there vs 64 now): resume it with its own settings or use a "
        "new --output_dir"
    )
