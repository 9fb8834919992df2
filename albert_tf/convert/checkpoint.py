"""One call for scripts/convert_checkpoint.py: read a model in one format, write it in another.

>>> from albert_tf.convert.checkpoint import convert_checkpoint
>>> convert_checkpoint("original", "albert_base/model.ckpt-best", "albert_base_tf2",
...                    spm_model_file="albert_base/30k-clean.model")  # doctest: +SKIP
"""
from absl import logging

SOURCE_FORMATS = ("original", "huggingface", "albert_tf")
TARGET_FORMATS = ("albert_tf", "huggingface", "original")


def read_model(source_format, path, config_file=None, ignore_variables=()):
    """An AlbertPretrainer from an original TF1 checkpoint, an HF directory or an albert_tf directory."""
    from albert_tf.convert.huggingface import from_huggingface
    from albert_tf.convert.original import from_original

    if source_format == "original":
        return from_original(path, config_file, ignore_variables=ignore_variables)
    if config_file is not None:
        raise ValueError(f"A config file is read from the {source_format} directory itself; "
                         f"config_file applies to source_format='original' only")
    if source_format == "huggingface":
        return from_huggingface(path, ignore_variables=ignore_variables)
    if source_format == "albert_tf":
        if ignore_variables:
            raise ValueError("ignore_variables applies to original and huggingface sources only")
        from albert_tf.models import io
        return io.load(path)
    raise ValueError(f"Unknown source format {source_format!r}; expected one of {SOURCE_FORMATS}")


def write_model(pretrainer, target_format, output_dir, spm_model_file=None):
    """Writes `pretrainer` as an albert_tf directory, an HF directory or an original TF1 checkpoint."""
    from albert_tf.convert.huggingface import to_huggingface
    from albert_tf.convert.original import to_original

    if target_format not in TARGET_FORMATS:
        raise ValueError(f"Unknown target format {target_format!r}; expected one of {TARGET_FORMATS}")
    if spm_model_file is not None and target_format != "albert_tf":
        raise ValueError("spm_model_file is stored with target_format='albert_tf' only")
    if target_format == "albert_tf":
        from albert_tf.models import io
        io.save(pretrainer, output_dir, spm_model_file=spm_model_file)
    elif target_format == "huggingface":
        to_huggingface(pretrainer, output_dir)
    else:
        to_original(pretrainer, output_dir)


def convert_checkpoint(source_format, input_path, output_dir, target_format="albert_tf",
                       config_file=None, spm_model_file=None, ignore_variables=()):
    """Reads `input_path` in `source_format` and writes `output_dir` in `target_format`."""
    if source_format == target_format:
        raise ValueError(f"source and target format are both {source_format!r}: nothing to convert")
    pretrainer = read_model(source_format, input_path, config_file, ignore_variables)
    write_model(pretrainer, target_format, output_dir, spm_model_file)
    logging.info("Converted %s (%s) to %s (%s)", input_path, source_format, output_dir,
                 target_format)
    return pretrainer
