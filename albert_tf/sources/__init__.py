"""Models by name: released ALBERTs, Hugging Face repositories, addresses and TF Hub handles.

Every place that takes a pretrained model (`albert_tf.load`, each head's `from_pretrained`,
`AlbertPreprocessor.from_pretrained`, the scripts' `--init_checkpoint`, `--pretrained_dir` and
`--input`) accepts, besides a local directory:

- `albert_{base,large,xlarge,xxlarge}_v{1,2}`: Google's released archives
  (`ALBERT_TF_RELEASE_URL`, default https://storage.googleapis.com/albert_models);
- `https://tfhub.dev/google/albert_<size>/<1|2|3>`: the original README's TF Hub handles, read
  as the same weights from those archives (1 = v1, 2 and 3 = v2);
- `hf://<repo_id>[@revision]`: a Hugging Face Hub repository (safetensors only);
- an `https://` or `gs://` address of an archive or a directory.

The model is downloaded once, checked, converted to an albert_tf directory and cached
(`ALBERT_TF_HOME`, default ~/.cache/albert_tf; `ALBERT_TF_OFFLINE=1` opens no connection).

>>> from albert_tf import sources
>>> sources.is_named("albert_base_v2"), sources.is_named("out/model")
(True, False)
>>> sources.resolve("albert_base_v2").directory  # doctest: +SKIP
'/root/.cache/albert_tf/releases/albert_base_v2/model'
"""

from albert_tf.sources.names import (
    RELEASES,
    SourceError,
    UnknownModelError,
    is_named,
    parse,
)


def resolve(spec, quiet=False):
    """The `ResolvedModel` of `spec` (see `albert_tf.sources.resolver.resolve`)."""
    from albert_tf.sources.resolver import resolve as _resolve

    return _resolve(spec, quiet=quiet)


def model_directory(spec):
    """The local (or gs://) albert_tf model directory of `spec`, fetched if needed."""
    return resolve(spec).directory


def check_spec(flag, spec, checkpoint=False):
    """Before TensorFlow loads: InvalidFlagError naming --`flag` for a name that names nothing,
    or a local path that does not exist (`checkpoint`: a checkpoint prefix counts)."""
    from albert_tf import input_paths
    from albert_tf.settings import InvalidFlagError
    from albert_tf.sources.names import LocalPath

    try:
        source = parse(spec)
    except UnknownModelError as e:
        raise InvalidFlagError(f"--{flag}={spec}: {e}") from None
    if isinstance(source, LocalPath):
        input_paths.check_exists(flag, spec, checkpoint=checkpoint)


def load(spec, dtype=None, output_encoder_outputs=False, unroll=False):
    """`albert_tf.models.model_dir.load` of a name, address, handle or directory: an
    AlbertPretrainer.

    >>> import albert_tf
    >>> pretrainer = albert_tf.load("albert_base_v2")  # doctest: +SKIP
    """
    from albert_tf.models import model_dir

    return model_dir.load(model_directory(spec), dtype, output_encoder_outputs, unroll)


def save_as(spec, output_dir, target_format="albert_tf", spm_model=None):
    """Writes the model `spec` names as `output_dir` in `target_format` ("albert_tf",
    "huggingface", "original", "keras_hub"; `albert_tf.convert.checkpoint.write_model`),
    keeping its SentencePiece model (or `spm_model`) and text settings in an albert_tf
    directory or a keras-hub preset; returns the model.

    >>> save_as("albert_base_v2", "albert_base_v2_hf", "huggingface")  # doctest: +SKIP
    """
    from albert_tf.convert.checkpoint import VOCABULARY_FORMATS, read_model, write_model
    from albert_tf.models import model_dir

    directory = model_directory(spec)
    model = read_model("albert_tf", directory)
    if target_format in VOCABULARY_FORMATS:
        spm_model = spm_model or model_dir.spm_model_path(directory)
    write_model(model, target_format, output_dir, spm_model, **model_dir.text_settings(directory))
    return model


__all__ = [
    "save_as",
    "RELEASES",
    "SourceError",
    "UnknownModelError",
    "check_spec",
    "is_named",
    "load",
    "model_directory",
    "parse",
    "resolve",
]
