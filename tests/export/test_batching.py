"""albert_tf.export.batching: the batching_parameters_file text TF Serving reads."""

import pytest

from albert_tf.export.batching import BatchingParameters, parse_text_proto


def test_text_proto_exact_text_and_round_trip():
    parameters = BatchingParameters(
        max_batch_size=32,
        batch_timeout_micros=1000,
        max_enqueued_batches=4,
        num_batch_threads=2,
        allowed_batch_sizes=[8, 16, 32],
    )
    assert parameters.to_text_proto() == (
        "max_batch_size { value: 32 }\n"
        "batch_timeout_micros { value: 1000 }\n"
        "max_enqueued_batches { value: 4 }\n"
        "num_batch_threads { value: 2 }\n"
        "allowed_batch_sizes: 8\n"
        "allowed_batch_sizes: 16\n"
        "allowed_batch_sizes: 32\n"
    )
    assert parse_text_proto(parameters.to_text_proto()) == parameters
    without_sizes = BatchingParameters(max_batch_size=8, num_batch_threads=1)
    assert "allowed" not in without_sizes.to_text_proto()
    assert parse_text_proto(without_sizes.to_text_proto()) == without_sizes


def test_parse_text_proto_reads_other_layouts():
    text = """# tuned on a 2-core CPU
        max_batch_size: { value: 4 } batch_timeout_micros { value: 500 }
        num_batch_threads { value: 1 }
        allowed_batch_sizes: [2, 4]
    """
    parsed = parse_text_proto(text)
    assert parsed == BatchingParameters(
        max_batch_size=4, batch_timeout_micros=500, num_batch_threads=1, allowed_batch_sizes=(2, 4)
    )
    assert parsed.max_enqueued_batches == 10  # the server's default when the field is left out


@pytest.mark.parametrize(
    "text, message",
    [
        ('max_batch_size { value: 4 }\nthread_pool_name { value: "x" }', "unsupported"),
        ("pad_variable_length_inputs: true", "unsupported"),
        ("max_batch_size: 4", "unsupported"),
        ("max_batch_size { value: 4.5 }", "whole number"),
        ("max_batch_size { value: 4 } }", "cannot read"),
        ("max_batch_size { value: 4 } max_batch_size { value: 8 }", "twice"),
        ("max_batch_size { value: 8 } allowed_batch_sizes: 4", "end at max_batch_size"),
    ],
)
def test_parse_text_proto_refuses_what_it_cannot_read_or_does_not_model(text, message):
    with pytest.raises(ValueError, match=message):
        parse_text_proto(text)


@pytest.mark.parametrize(
    "fields",
    [
        {"max_batch_size": 0},
        {"num_batch_threads": 0},
        {"max_enqueued_batches": 0},
        {"batch_timeout_micros": -1},
        {"max_batch_size": 8, "allowed_batch_sizes": (4, 2, 8)},
    ],
)
def test_invalid_parameters_are_refused(fields):
    with pytest.raises(ValueError):
        BatchingParameters(**fields)
