"""What the stand-in hosts of hub_server.py serve, made with albert_tf's own converters.

`make_release_archive` writes `<name>.tar.gz` as Google released them
(storage.googleapis.com/albert_models/albert_{base,large,xlarge,xxlarge}_v{1,2}.tar.gz): one
top folder `albert_<size>/` (the same for v1 and v2) holding albert_config.json, the TF1
checkpoint `model.ckpt-best.{index,data-00000-of-00001,meta}` (no `checkpoint` state file) and
the SentencePiece files 30k-clean.model / 30k-clean.vocab ("piece<TAB>score" lines), whose
piece count is the config's vocab_size with <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4. The
weights are a randomly initialised `AlbertPretrainer`, kept on the returned `ReleaseArchive`
so tests can compare outputs. `make_hf_repo` / `make_pickle_only_repo` write a Hugging Face
ALBERT repository (config.json, model.safetensors, spiece.model) and one with only a pickled
pytorch_model.bin.

A SentencePiece model of 30000 pieces is not trained on 30000 pieces' worth of text: a small
model is trained (or given) and NORMAL pieces made of a private-use character and a number,
which no text contains, are appended to its ModelProto up to the size. sentencepiece 0.2.3's
`sentencepiece_model_pb2` is generated for protobuf 7 and does not import on the 6.x installed
here (apache-beam pins < 7), so the proto is edited on the wire: a repeated field may come in
several runs and a message field given twice is merged, so the new `pieces` entries and a
`trainer_spec` holding only the new vocab_size are appended to the serialized model, which
SentencePiece then re-serializes in field order.
"""

import ast
import dataclasses
import gzip
import io
import json
import os
import shutil
import struct
import sysconfig
import tarfile
import tempfile
import zipfile

RELEASE_SIZES = ("base", "large", "xlarge", "xxlarge")
SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
_FILLER = "\ue000"  # a private-use character: the appended pieces never match text
_STDLIB = (
    "argparse",
    "collections/__init__",
    "json/__init__",
    "logging/__init__",
    "pathlib",
    "shutil",
    "subprocess",
    "tarfile",
    "typing",
    "zipfile",
    "dataclasses",
    "textwrap",
)


@dataclasses.dataclass
class ReleaseArchive:
    """A built archive: `path` (also its os.fspath), the top `folder` name, the `pretrainer`
    whose weights it holds, its `config` and the SentencePiece model file `spm_model`."""

    path: str
    folder: str
    pretrainer: object
    config: object
    spm_model: str

    def __fspath__(self):
        return self.path


def release_folder(name):
    """`albert_base` for albert_base_v1 and albert_base_v2 (the archives' top folder)."""
    parts = name.split("_")
    if len(parts) != 3 or parts[0] != "albert" or parts[1] not in RELEASE_SIZES:
        raise ValueError(f"{name!r} is not albert_{{{','.join(RELEASE_SIZES)}}}_v<N>")
    return f"albert_{parts[1]}"


def random_pretrainer(config, seed=0):
    """A randomly initialised AlbertPretrainer (its constructors build every variable)."""
    import keras

    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    keras.utils.set_random_seed(seed)
    return AlbertPretrainer(AlbertModel(config))


def make_release_archive(out_dir, name, config, seed=0, spm_model=None, meta_graph=True):
    """Writes `out_dir/<name>.tar.gz` laid out as Google's release `name`; a ReleaseArchive.

    spm_model: a SentencePiece model (ALBERT's special ids) to extend to config.vocab_size
    pieces; by default one is trained on stdlib docstrings. meta_graph: also write the
    `model.ckpt-best.meta` the real archives hold (variables only, no training graph).
    """
    from albert_tf.convert.original import to_original

    folder = release_folder(name)
    os.makedirs(out_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir)
    directory = os.path.join(staging, folder)
    pretrainer = random_pretrainer(config, seed)
    prefix = to_original(pretrainer, directory, checkpoint_name="model.ckpt-best")
    if meta_graph:
        write_meta_graph(prefix)
    spm_bytes = sized_spm_model(config.vocab_size, spm_model)
    with open(os.path.join(directory, "30k-clean.model"), "wb") as f:
        f.write(spm_bytes)
    with open(os.path.join(directory, "30k-clean.vocab"), "w", encoding="utf-8") as f:
        f.write(vocab_lines(spm_bytes))
    path = os.path.join(out_dir, f"{name}.tar.gz")
    with gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) as packed:
        with tarfile.open(fileobj=packed, mode="w", format=tarfile.GNU_FORMAT) as tar:
            tar.add(directory, arcname=folder, filter=_released_member)
    kept = os.path.join(out_dir, f"{name}.spm.model")
    shutil.copyfile(os.path.join(directory, "30k-clean.model"), kept)
    shutil.rmtree(staging)
    return ReleaseArchive(path, folder, pretrainer, config, kept)


def _released_member(info):
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 1577836800  # fixed: the same config and seed give the same bytes
    return info


def write_meta_graph(prefix):
    """`prefix.meta`: a TF1 MetaGraphDef whose saver names the checkpoint's variables."""
    import tensorflow as tf

    with tf.Graph().as_default():
        variables = [
            tf.compat.v1.get_variable(
                name, shape, initializer=tf.compat.v1.zeros_initializer(), dtype=dtype
            )
            for name, shape, dtype in _checkpoint_variables(prefix)
        ]
        saver = tf.compat.v1.train.Saver(variables)
        saver.export_meta_graph(prefix + ".meta")


def _checkpoint_variables(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    return [(n, s, dtypes[n]) for n, s in sorted(reader.get_variable_to_shape_map().items())]


# -- SentencePiece ------------------------------------------------------------------------------
def _varint(value):
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def extend_spm_model(model_bytes, size):
    """The SentencePiece model `model_bytes` with NORMAL pieces appended to `size` pieces."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    have = processor.get_piece_size()
    if have > size:
        raise ValueError(f"the SentencePiece model has {have} pieces, more than {size}")
    if have == size:
        return model_bytes
    low = min(processor.get_score(i) for i in range(have))
    extra = b"".join(
        _field(1, _field(1, f"{_FILLER}{i}".encode()) + b"\x15" + struct.pack("<f", low - 1 - i))
        for i in range(size - have)
    )
    # A second trainer_spec is merged into the first: only its vocab_size (field 4) changes.
    extended = model_bytes + extra + _field(2, b"\x20" + _varint(size))
    processor = spm.SentencePieceProcessor(model_proto=extended)
    assert processor.get_piece_size() == size
    return processor.serialized_model_proto()


def train_spm_model(vocab_size=1000):
    """A unigram model trained on stdlib docstrings with the released model's settings."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_stdlib_sentences()),
        model_writer=out,
        vocab_size=vocab_size,
        model_type="unigram",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=["(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"],
        character_coverage=0.99995,
        minloglevel=2,
    )
    return out.getvalue()


def _stdlib_sentences():
    root = sysconfig.get_paths()["stdlib"]
    lines = []
    for module in _STDLIB:
        with open(os.path.join(root, f"{module}.py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node)
                lines.extend(line.strip() for line in (doc or "").splitlines() if line.strip())
    return lines


def sized_spm_model(size, spm_model=None):
    """Bytes of a SentencePiece model of exactly `size` pieces with ALBERT's special ids."""
    import sentencepiece as spm

    if spm_model is None:
        model_bytes = train_spm_model(min(size, 1000))
    else:
        with open(spm_model, "rb") as f:
            model_bytes = f.read()
    model_bytes = extend_spm_model(model_bytes, size)
    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    special = tuple(processor.id_to_piece(i) for i in range(len(SPECIAL_PIECES)))
    if special != SPECIAL_PIECES:
        raise ValueError(
            f"the SentencePiece model's first pieces are {special}, not {SPECIAL_PIECES}"
        )
    return model_bytes


def vocab_lines(model_bytes):
    """The `.vocab` file spm_train writes beside a model: "piece<TAB>score" per line."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=model_bytes)
    return "".join(
        f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n"
        for i in range(processor.get_piece_size())
    )


# -- Hugging Face repositories ------------------------------------------------------------------
def make_hf_repo(out_dir, pretrainer, spm_model):
    """`out_dir` as a Hugging Face ALBERT repo: config.json and model.safetensors (written by
    to_huggingface) and spiece.model (a copy of `spm_model`); returns `out_dir`."""
    from albert_tf.convert.huggingface import to_huggingface

    to_huggingface(pretrainer, str(out_dir))
    shutil.copyfile(spm_model, os.path.join(out_dir, "spiece.model"))
    return str(out_dir)


def make_pickle_only_repo(out_dir, config, spm_model=None):
    """`out_dir` as an older HF repo: config.json and a pickled-looking pytorch_model.bin (a zip
    as torch.save writes, holding no real pickle), no safetensors; returns `out_dir`."""
    from albert_tf.convert.huggingface import huggingface_config

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(huggingface_config(config), f, indent=2)
    with zipfile.ZipFile(os.path.join(out_dir, "pytorch_model.bin"), "w") as archive:
        archive.writestr("pytorch_model/data.pkl", b"not a pickle: albert_tf must not open it")
        archive.writestr("pytorch_model/version", b"3\n")
    if spm_model is not None:
        shutil.copyfile(spm_model, os.path.join(out_dir, "spiece.model"))
    return str(out_dir)
