"""The built-in offline classification task "docstring-source": which library (tensorflow,
keras or numpy) a docstring paragraph of the installed packages comes from."""

import numpy as np
from absl import logging

from albert_tf.data.task_spec import Examples, TaskSpec

DOCSTRING_SOURCE = "docstring-source"


def docstring_source_splits(
    packages=("tensorflow", "keras", "numpy"),
    per_class=500,
    dev_fraction=0.2,
    min_words=12,
    max_sentences=3,
    seed=0,
    cache_dir=None,
):
    """A real, offline classification task: which library a docstring paragraph comes from.

    Documents of `albert_tf.data.corpora`'s "builtin:docstrings" corpus are read one package at a
    time (that is the provenance); each becomes one example (its first `max_sentences`
    sentences, at least `min_words` words). Texts found in more than one package are dropped,
    then up to `per_class` examples per package are drawn and split into train and dev.

    Returns (task, {"train": Examples, "dev": Examples}).
    """
    from albert_tf.data.corpora import iter_documents

    by_package = {}
    for package in packages:
        texts = []
        for document in iter_documents(
            "builtin:docstrings", packages=(package,), cache_dir=cache_dir
        ):
            text = " ".join(document[:max_sentences])
            if len(text.split()) >= min_words:
                texts.append(text)
        by_package[package] = sorted(set(texts))
        logging.info("%s: %d %s docstring paragraphs", DOCSTRING_SOURCE, len(texts), package)
    seen = {}
    for package, texts in by_package.items():
        for text in texts:
            seen[text] = seen.get(text, 0) + 1
    rng = np.random.default_rng(seed)
    splits = {"train": ([], []), "dev": ([], [])}
    for label, package in enumerate(packages):
        texts = [t for t in by_package[package] if seen[t] == 1]
        chosen = rng.permutation(len(texts))[:per_class]
        n_dev = max(1, int(round(dev_fraction * len(chosen))))
        for i, index in enumerate(chosen):
            split = "dev" if i < n_dev else "train"
            splits[split][0].append(texts[index])
            splits[split][1].append(label)
    task = TaskSpec(DOCSTRING_SOURCE, tuple(packages), ("accuracy",), ("text",), "label")
    out = {}
    for split, (texts, labels) in splits.items():
        order = rng.permutation(len(texts))
        out[split] = Examples(
            texts=[texts[i] for i in order],
            labels=np.asarray(labels, np.int32)[order],
            source=f"builtin:docstrings ({', '.join(packages)}) {split}",
        )
    return task, out
