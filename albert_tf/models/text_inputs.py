"""Raw text in a task model's `fit`, `evaluate` and `predict`: the accepted forms and the loops.

A task model (`AlbertHeadModel` subclass) with an attached `AlbertPreprocessor` takes raw text
besides the ids dict. Each model states its form (`TextForm`: the names of its text columns, in
row order); this module reads what a user passes into those columns, one row per example:

- a Python list of str (one text per example), or a list of rows (e.g. [text, text_pair]
  pairs, or (question, context) pairs): rows, never columns;
- a NumPy (or pandas) array of strings [batch] or rows [batch, k]; a tf.Tensor of strings;
- a dict of columns ({"text": [...], "text_pair": [...]});
- a batched tf.data.Dataset of any of these as tensors, alone or with labels (and weights).

A form it cannot read is an error naming the expected shapes. Training data becomes a
tf.data.Dataset of (ids, labels) batches (the model's `encode_text` runs in `Dataset.map`);
`predict` runs the model's in-graph text function (the SavedModel export's) batch by batch and
concatenates the outputs, padding a per-text axis as the export does ("" / -1 / 0).

>>> form = TextForm(("text", "text_pair"), required=1, expected="texts [batch] or pairs [batch, 2]")
>>> {k: v.tolist() for k, v in read_columns(["great film", "dull"], form).items()}
{'text': ['great film', 'dull']}
>>> read_columns([["a", "b"], ["c", "d"]], form)["text_pair"].tolist()
['b', 'd']
>>> read_columns(np.array([["a", "b", "c"]] * 4), form)
Traceback (most recent call last):
...
ValueError: expected texts [batch] or pairs [batch, 2], got [4, 3]
"""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from albert_tf.models.backbone import INPUT_KEYS

DEFAULT_BATCH_SIZE = 32
_STRING_KINDS = ("U", "S", "O")


@dataclasses.dataclass(frozen=True)
class TextForm:
    """How a model's raw-text examples look.

    Attributes:
        names: the text columns in row order (e.g. ("text", "text_pair")).
        required: how many leading columns every example has (the others are optional).
        vectors: columns holding `vector_width` strings per example ([batch, k], "options").
        vector_width: k.
        words: the first column may hold lists of words (token classification).
        expected: the accepted shapes, in words, for error messages.
    """

    names: tuple
    required: int = 1
    vectors: tuple = ()
    vector_width: int = None
    words: bool = False
    expected: str = ""

    def check_vector(self, name, shape, what=""):
        """A ValueError unless a vector column's shape is [batch, vector_width]."""
        if len(shape) != 2 or shape[1] not in (None, self.vector_width):
            raise _error(self, f"{name} of shape {list(shape)}", what)

    @property
    def row_lengths(self):
        return tuple(range(self.required, len(self.names) + 1))


def no_preprocessor_error(model, got):
    """The ValueError for raw text given to a model without a preprocessor."""
    name = type(model).__name__
    return ValueError(
        f"{name} got {got} but has no preprocessor to tokenize it: build it with "
        f"{name}.from_pretrained(directory) (which attaches the directory's AlbertPreprocessor) "
        f"or pass preprocessor=AlbertPreprocessor(spm_model, ...) to the constructor; without "
        f"one it takes the ids dict {{{', '.join(INPUT_KEYS)}}}"
    )


# ---------------------------------------------------------------------------------- recognizing
def _is_string_dtype(dtype):
    if isinstance(dtype, tf.DType):
        return dtype == tf.string
    return np.dtype(dtype).kind in _STRING_KINDS


def _first_leaf(value):
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


def _is_text_spec(spec):
    if isinstance(spec, dict):
        return not any(k in spec for k in INPUT_KEYS) and any(
            _is_text_spec(v) for v in spec.values()
        )
    return isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec)) and spec.dtype == tf.string


def is_raw_text(x):
    """Whether `x` (a fit / evaluate / predict input) is raw text rather than ids.

    >>> is_raw_text(["a text"]), is_raw_text({"input_word_ids": np.zeros([1, 2], "int32")})
    (True, False)
    """
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        return _is_text_spec(spec[0] if isinstance(spec, tuple) else spec)
    if isinstance(x, dict):
        return bool(x) and not any(k in x for k in INPUT_KEYS)
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, (list, tuple)):
        return isinstance(_first_leaf(list(x)), (str, bytes))
    dtype = getattr(x, "dtype", None)
    if dtype is not None and hasattr(x, "shape"):  # NumPy, pandas
        try:
            return _is_string_dtype(dtype)
        except TypeError:
            return False
    return False


# ---------------------------------------------------------------------------------- reading
def _strings(values):
    return np.array(list(values), dtype=object)


def _shape(x):
    try:
        return list(np.shape(x))
    except ValueError:  # ragged nesting
        lengths = sorted({len(row) if isinstance(row, (list, tuple)) else 1 for row in x})
        return f"rows of {' and '.join(map(str, lengths))} values"


def _error(form, got, what=""):
    prefix = f"{what}: " if what else ""
    return ValueError(f"{prefix}expected {form.expected}, got {got}")


def _words_column(rows, form, what):
    for i, row in enumerate(rows):
        if not all(isinstance(w, (str, bytes)) for w in row):
            raise _error(form, f"a non-string word in example {i}", what)
    column = np.empty(len(rows), dtype=object)
    column[:] = [list(row) for row in rows]
    return column


def _rows(rows, form, what):
    """Columns of a list of rows (each a list/tuple/array)."""
    if form.words:
        return {form.names[0]: _words_column(rows, form, what)}
    lengths = {len(row) for row in rows}
    if len(lengths) != 1 or next(iter(lengths)) not in form.row_lengths:
        raise _error(form, _shape(rows), what)
    width = lengths.pop()
    columns = {}
    for i, name in enumerate(form.names[:width]):
        values = [row[i] for row in rows]
        if name in form.vectors:
            vector = np.array([list(v) for v in values], dtype=object)
            form.check_vector(name, vector.shape if vector.ndim == 2 else _shape(values), what)
            columns[name] = vector
        else:
            if not all(isinstance(v, (str, bytes)) for v in values):
                raise _error(form, f"a non-string {name}", what)
            columns[name] = _strings(values)
    return columns


def _check_keys(keys, form, what):
    unknown = sorted(set(keys) - set(form.names))
    missing = [n for n in form.names[: form.required] if n not in keys]
    if unknown or missing:
        raise _error(
            form,
            f"a dict with keys {sorted(keys)} (text keys: {', '.join(form.names)}; ids: "
            f"{', '.join(INPUT_KEYS)})",
            what,
        )


def _dict_columns(x, form, what):
    _check_keys(x, form, what)
    columns = {}
    for name in form.names:
        if name not in x:
            continue
        value = x[name]
        if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
            value = value.to_list() if isinstance(value, tf.RaggedTensor) else value.numpy()
        if isinstance(value, (str, bytes)):
            raise _error(form, f"a single string as {name!r}: pass a list", what)
        if name == form.names[0] and form.words and isinstance(_first_leaf(list(value)), str):
            if any(isinstance(v, (list, tuple)) for v in value):
                columns[name] = _words_column(value, form, what)
                continue
        array = np.array(list(value), dtype=object)
        if array.ndim == 2 and array.shape[1] == 1 and name not in form.vectors:
            array = array[:, 0]
        if name in form.vectors:
            form.check_vector(name, array.shape, what)
        elif array.ndim != 1:
            raise _error(form, f"{name!r} of shape {list(array.shape)}", what)
        columns[name] = array
    if len({len(v) for v in columns.values()}) != 1:
        sizes = {k: len(v) for k, v in columns.items()}
        raise ValueError(f"{what + ': ' if what else ''}the columns differ in length: {sizes}")
    return columns


def read_columns(x, form, what=""):
    """{column name: NumPy object array} of raw-text `x` (any form but a dataset), one row per
    example; a ValueError naming `form.expected` when the shape does not fit."""
    if isinstance(x, dict):
        return _dict_columns(x, form, what)
    if isinstance(x, (str, bytes)):
        raise _error(form, f"a single string: pass a list, e.g. [{x!r}]", what)
    if isinstance(x, tf.RaggedTensor):
        x = x.to_list()
    elif isinstance(x, tf.Tensor):
        x = x.numpy()
    if isinstance(x, (list, tuple)):
        if not x:
            raise _error(form, "no examples", what)
        if all(isinstance(v, (str, bytes)) for v in x):
            if form.required > 1:
                raise _error(form, f"a list of {len(x)} strings", what)
            return {form.names[0]: _strings(x)}
        if all(isinstance(v, (list, tuple, np.ndarray)) for v in x):
            return _rows(list(x), form, what)
        raise _error(form, "a list mixing strings and rows", what)
    array = np.asarray(x)
    if array.dtype.kind not in _STRING_KINDS:
        raise TypeError(f"{what + ': ' if what else ''}expected text, got dtype {array.dtype}")
    if array.ndim == 1:
        return read_columns(list(array), form, what)
    if array.ndim == 2 and array.shape[1] == 1 and form.required == 1:
        return {form.names[0]: array[:, 0].astype(object)}
    if array.ndim == 2 and not form.vectors and not form.words:
        if array.shape[1] in form.row_lengths:
            return {n: array[:, i].astype(object) for i, n in enumerate(form.names)}
    raise _error(form, list(array.shape), what)


def num_rows(columns):
    return len(next(iter(columns.values())))


def take_rows(columns, index):
    """The rows `index` (an array of row numbers or a slice) of `read_columns`' result."""
    return {k: v[index] for k, v in columns.items()}


def column_tensors(columns):
    """Tensors of `read_columns`' result (a column of word lists becomes a RaggedTensor)."""
    tensors = {}
    for name, column in columns.items():
        if column.ndim == 1 and len(column) and isinstance(column[0], list):
            tensors[name] = tf.ragged.constant(list(column), dtype=tf.string, ragged_rank=1)
        else:
            tensors[name] = tf.constant(column, tf.string)
    return tensors


def dataset_columns(spec, form, what=""):
    """fn(x) -> {column: tensor} for the batched dataset elements of spec `spec` (checked now,
    from the static shapes)."""

    def batch_error(name):
        return ValueError(
            f"{what + ': ' if what else ''}the dataset's {name} has no batch axis: batch it "
            f"(dataset.batch(32)); expected {form.expected}"
        )

    def check(name, s):
        if not isinstance(s, (tf.TensorSpec, tf.RaggedTensorSpec)) or s.dtype != tf.string:
            raise TypeError(f"{what + ': ' if what else ''}{name} must be tf.string, got {s}")
        rank = s.shape.rank
        if rank == 0:
            raise batch_error(name)
        want = 2 if name in form.vectors or isinstance(s, tf.RaggedTensorSpec) else 1
        if isinstance(s, tf.RaggedTensorSpec) and not (form.words and name == form.names[0]):
            raise _error(form, f"a ragged {name}", what)
        if rank != want:
            raise _error(form, f"{name} of shape {s.shape.as_list()}", what)
        if name in form.vectors:
            form.check_vector(name, s.shape.as_list(), what)

    if isinstance(spec, dict):
        _check_keys(spec, form, what)
        for name, s in spec.items():
            check(name, s)
        return lambda x: {n: x[n] for n in form.names if n in x}
    if not isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec)):
        raise _error(form, f"a dataset of {spec}", what)
    if isinstance(spec, tf.RaggedTensorSpec) or spec.shape.rank == 1:
        check(form.names[0], spec)
        if form.required > 1:
            raise _error(form, f"a dataset of texts of shape {spec.shape.as_list()}", what)
        return lambda x: {form.names[0]: x}
    if spec.dtype != tf.string:
        raise TypeError(f"{what + ': ' if what else ''}expected tf.string, got {spec.dtype}")
    if spec.shape.rank == 0:
        raise batch_error("texts")
    width = spec.shape[-1] if spec.shape.rank == 2 else None
    if width == 1 and form.required == 1:
        return lambda x: {form.names[0]: x[:, 0]}
    if width in form.row_lengths and not form.vectors and not form.words:
        return lambda x: {n: x[:, i] for i, n in enumerate(form.names[:width])}
    raise _error(form, f"a dataset of shape {spec.shape.as_list()}", what)


def label_ids(y, names):
    """String labels (a tensor or ragged) -> int32 ids by their position in `names`; an unknown
    name fails. Integer labels pass unchanged.

    >>> label_ids(tf.constant(["neg", "pos"]), ["neg", "pos"]).numpy().tolist()
    [0, 1]
    """
    if isinstance(y, tf.RaggedTensor):
        return y.with_flat_values(label_ids(y.flat_values, names))
    if y.dtype != tf.string:
        return y
    if not names:
        raise ValueError("string labels need the model's label names (labels=[...])")
    matches = tf.equal(tf.expand_dims(y, -1), tf.constant(list(names)))
    check = tf.debugging.assert_equal(
        tf.reduce_any(matches, -1),
        True,
        message=f"a label is not one of the model's labels {list(names)}",
    )
    with tf.control_dependencies([check]):
        return tf.argmax(tf.cast(matches, tf.int32), axis=-1, output_type=tf.int32)


def python_label_ids(values, names, what=""):
    """Label names (str) -> their ids in `names`; integers pass; other values are an error."""
    ids = []
    for value in values:
        if isinstance(value, (str, bytes)):
            value = value.decode() if isinstance(value, bytes) else value
            if not names or value not in names:
                raise ValueError(
                    f"{what + ': ' if what else ''}label {value!r} is not one of the model's "
                    f"labels {list(names or [])}"
                )
            ids.append(names.index(value))
        else:
            ids.append(value)
    return ids


# ---------------------------------------------------------------------------------- datasets
def _length(labels):
    if isinstance(labels, tf.RaggedTensor):
        return int(labels.nrows())
    return len(keras.tree.flatten(labels)[0]) if isinstance(labels, dict) else len(labels)


def batched(parts, batch_size, shuffle):
    """A dataset of the rows of `parts` (a tuple of structures of arrays or ragged tensors),
    shuffled each pass when `shuffle`, in batches of `batch_size` (default 32)."""
    dataset = tf.data.Dataset.from_tensor_slices(tuple(parts))
    if shuffle:
        dataset = dataset.shuffle(int(dataset.cardinality()), reshuffle_each_iteration=True)
    return dataset.ragged_batch(batch_size or DEFAULT_BATCH_SIZE)


def _unpack(element):
    if isinstance(element, tuple):
        return element + (None,) * (3 - len(element))
    return element, None, None


def _pack(x, y, w):
    return tuple(v for v in (x, y, w) if v is not None) if y is not None else x


def labelled_dataset(model, x, y, sample_weight, batch_size, shuffle, options, what):
    """A tf.data.Dataset of (ids, labels[, weights]) batches from raw text `x` and labels `y`
    (for `fit` and `evaluate`): `model.encode_text(options)` maps each batch."""
    form = model.text_form
    encode = model.encode_text(options)
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError(f"{what}: with a dataset, the labels come from the dataset")
        spec = x.element_spec
        columns = dataset_columns(spec[0] if isinstance(spec, tuple) else spec, form, what)

        def step(*element):
            inputs, labels, weights = _unpack(element)
            ids, labels = encode(columns(inputs), labels)
            return _pack(ids, labels, weights)

        return x.map(step, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    if y is None:
        raise ValueError(f"{what}: raw text needs labels y")
    columns = read_columns(x, form, what)
    n = num_rows(columns)
    labels = model.text_labels(y, columns, options)
    if _length(labels) != n:
        raise ValueError(f"{what}: {n} examples but {_length(labels)} labels")
    parts = [column_tensors(columns), labels]
    if sample_weight is not None:
        weights = np.asarray(sample_weight, np.float32)
        if len(weights) != n:
            raise ValueError(f"{what}: {n} examples but {len(weights)} sample weights")
        parts.append(weights)
    dataset = batched(parts, batch_size, shuffle)

    def step(columns, labels, weights=None):
        ids, labels = encode(columns, labels)
        return _pack(ids, labels, weights)

    return dataset.map(step, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def split_validation(x, y, sample_weight, fraction, form, what):
    """((x, y, w) to train on, (x, y, w) to validate on): the last `fraction` of the rows, as
    Keras' validation_split."""
    if isinstance(x, tf.data.Dataset):
        raise ValueError(f"{what}: validation_split is not supported with a dataset")
    columns = read_columns(x, form, what)
    n = num_rows(columns)
    cut = int(n * (1.0 - fraction))
    if not 0 < cut < n:
        raise ValueError(f"{what}: validation_split={fraction} leaves no rows on one side")

    def part(index):
        if y is None:
            ys = None
        elif isinstance(y, dict):
            ys = {k: list(v)[index] for k, v in y.items()}
        else:
            ys = list(y)[index]
        ws = None if sample_weight is None else np.asarray(sample_weight)[index]
        return take_rows(columns, index), ys, ws

    return part(slice(0, cut)), part(slice(cut, n))


# ---------------------------------------------------------------------------------- predict
class FunctionCache:
    """Traced text functions of one model (kept outside Keras' and TF's attribute tracking)."""

    def __init__(self):
        self.functions = {}


def _predict_columns(x, form, batch_size, what):
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        spec = spec[0] if isinstance(spec, tuple) else spec
        columns = dataset_columns(spec, form, what)
        if any(isinstance(s, tf.RaggedTensorSpec) for s in tf.nest.flatten(spec)):
            raise ValueError(f"{what}: predict takes texts, not lists of words")
        return x.map(lambda *e: columns(_unpack(e)[0]))
    columns = read_columns(x, form, what)
    words = [n for n, c in columns.items() if c.ndim == 1 and len(c) and isinstance(c[0], list)]
    if words:
        raise ValueError(f"{what}: predict takes texts, not lists of words")
    dataset = tf.data.Dataset.from_tensor_slices(column_tensors(columns))
    return dataset.batch(batch_size or DEFAULT_BATCH_SIZE)


def _signature(spec):
    return {
        k: tf.TensorSpec([None] + s.shape.as_list()[1:], s.dtype, name=k) for k, s in spec.items()
    }


def _pad_value(array):
    if array.dtype == object or array.dtype.kind in ("U", "S"):
        return b""
    if array.dtype.kind == "b":
        return False
    return -1 if array.dtype.kind in ("i", "u") else 0


def concatenate_outputs(batches):
    """One dict of arrays from per-batch dicts; per-text axes of different lengths are padded
    as the exports pad them ("" for strings, -1 for integers, 0 for floats).

    >>> out = concatenate_outputs([{"a": np.array([[1, 2]])}, {"a": np.array([[3]])}])
    >>> out["a"].tolist()
    [[1, 2], [3, -1]]
    """
    merged = {}
    for key in batches[0]:
        arrays = [np.asarray(b[key]) for b in batches]
        widest = np.max([a.shape for a in arrays], axis=0)
        padded = []
        for a in arrays:
            pad = [(0, 0)] + [(0, int(w - s)) for w, s in zip(widest[1:], a.shape[1:])]
            padded.append(np.pad(a, pad, constant_values=_pad_value(a)) if a.ndim > 1 else a)
        merged[key] = np.concatenate(padded, axis=0)
    return merged


def _decoded(array):
    if array.dtype != object:
        return array
    flat = [v.decode("utf-8") if isinstance(v, bytes) else v for v in array.ravel()]
    return np.array(flat, dtype=object).reshape(array.shape)


def predict_text(model, x, batch_size, verbose, steps, callbacks, options):
    """`model.predict` on raw text: the model's in-graph text function (its export's
    serving_default) over batches of `x`; a dict of NumPy arrays, strings decoded to str."""
    what = f"{type(model).__name__}.predict"
    dataset = _predict_columns(x, model.text_form, batch_size, what)
    signature = _signature(dataset.element_spec)
    key = (
        tuple(sorted(options.items())),
        model.dtype_policy.name,
        tuple(sorted((k, tuple(s.shape.as_list())) for k, s in signature.items())),
    )
    cache = model.text_functions.functions
    if key not in cache:
        body = model.text_predict_function(options)
        cache[key] = tf.function(body, input_signature=[signature], autograph=False)
    function = cache[key]
    if steps is None:
        cardinality = int(dataset.cardinality())
        steps = cardinality if cardinality >= 0 else None
    verbose = 1 if verbose == "auto" else verbose
    callbacks = keras.callbacks.CallbackList(
        callbacks, add_progbar=verbose != 0, verbose=verbose, epochs=1, steps=steps, model=model
    )
    callbacks.on_predict_begin()
    batches = []
    for step, columns in enumerate(dataset.take(steps) if steps is not None else dataset):
        callbacks.on_predict_batch_begin(step)
        outputs = {k: v.numpy() for k, v in function(columns).items()}
        batches.append(outputs)
        callbacks.on_predict_batch_end(step, {"outputs": outputs})
    callbacks.on_predict_end()
    if not batches:
        raise ValueError(f"{what}: no examples")
    return {k: _decoded(v) for k, v in concatenate_outputs(batches).items()}
