"""The text layers (TextTokenizer, SegmentPacker) through tests/harness.py.

They hold no variables and compute on strings and integer ids, so the mixed_bfloat16 check
only confirms that the policy leaves their integer outputs and configs alone.
"""

import numpy as np
import pytest
import tensorflow as tf
from harness import run_layer_test

from albert_tf.text.preprocessing_layers import SegmentPacker, TextTokenizer

TEXTS = np.array(["Hello, World 9,000!", "", "Café crème, naïve façade."])


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_text_tokenizer(spm_model_file, lower_case):
    report = run_layer_test(
        TextTokenizer,
        dict(spm_model=spm_model_file, lower_case=lower_case),
        TEXTS,
        (3, None),
        expected_output_dtype="int32",
        mixed_output_dtype="int32",
        stored_differently={"spm_model": "stored as model_proto_base64"},
    )
    assert report.checks == ["config", "saving", "mixed_precision", "symbolic"]


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        (dict(truncation="round_robin"), (2, 8)),
        (dict(truncation="longest_first", pad_to="longest", bucket=4), (2, None)),
    ],
    ids=["fixed", "longest"],
)
def test_segment_packer(kwargs, shape):
    segments = [
        tf.ragged.constant([[10, 11, 12], [13]], dtype=tf.int32),
        tf.ragged.constant([[20, 21, 22, 23], [24, 25]], dtype=tf.int32),
    ]
    outputs = {k: shape for k in ("input_word_ids", "input_mask", "input_type_ids")}
    report = run_layer_test(
        SegmentPacker,
        dict(max_seq_length=8, cls_id=2, sep_id=3, pad_id=0, **kwargs),
        segments,
        outputs,
        expected_output_dtype="int32",
        mixed_output_dtype="int32",
    )
    assert report.checks == ["config", "saving", "mixed_precision", "symbolic"]
