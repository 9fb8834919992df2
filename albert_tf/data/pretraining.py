"""Streaming, multi-process, deterministic creation of ALBERT pretraining TFRecords.

Documents are streamed from `albert_tf.data.corpora.iter_documents` in windows of
`document_window` consecutive documents. Each window of each dupe pass is one task: tokenize,
build instances (`albert_tf.data.instances`), mask (`albert_tf.data.masking`), serialize
(`albert_tf.data.schema`). Tasks run in `num_workers` processes with a bounded number in flight
and their results are consumed in task order; every random draw comes from an RNG derived from
(random_seed, dupe pass, global document index), so the output bytes do not depend on
num_workers. Instances then go through a bounded seeded shuffle buffer into round-robin shards
written atomically (`albert_tf.data.writer`). Memory is bounded by document_window, the number
of tasks in flight and shuffle_buffer_size, never by the corpus size.

Differences from the original tool (which loads the corpus, shuffles documents, and shuffles
all instances globally in memory): documents are not shuffled, random-document negatives come
from the same window, the instance shuffle is local (buffer), and dupe passes are written one
after the other (pass k's instances precede pass k+1's in every shard).

`albert_tf.data.beam_pipeline` runs the same windows (WindowProcessor, the stats and the
summary of this module) as an Apache Beam pipeline.

>>> summary = create_pretraining_data("builtin:docstrings", "/tmp/out.tfrecord",
...     spm_model="30k-clean.model", config=CreationConfig(dupe_factor=1))  # doctest: +SKIP
"""

import collections
import concurrent.futures
import dataclasses
import multiprocessing
import os
import time
from typing import Iterable, Iterator, List, Optional

from absl import logging

from albert_tf import files
from albert_tf.data import instances as instances_lib
from albert_tf.data import masking, schema
from albert_tf.data import writer as writer_lib
from albert_tf.errors import UserError
from albert_tf.settings import InvalidFlagError

_LOG_EVERY_SECONDS = 10.0


class CorpusTooSmallError(UserError, ValueError):
    """The corpus produced no instance at all."""


@dataclasses.dataclass(frozen=True)
class CreationConfig:
    """Everything that determines the output bytes (besides the corpus and the vocabulary)."""

    instance: instances_lib.InstanceConfig = dataclasses.field(
        default_factory=instances_lib.InstanceConfig
    )
    dupe_factor: int = 40
    random_seed: int = 12345
    document_window: int = 1000
    shuffle_buffer_size: int = 10000

    def __post_init__(self):
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if self.document_window < 2:
            raise ValueError(f"document_window must be >= 2, got {self.document_window}")
        if self.shuffle_buffer_size < 1:
            raise ValueError(f"shuffle_buffer_size must be >= 1, got {self.shuffle_buffer_size}")


def new_stats() -> dict:
    return {
        "documents": 0,
        "documents_processed": 0,
        "sentences": 0,
        "truncated_sentences": 0,
        "skipped_documents": collections.Counter(),
        "instances": 0,
        "tokens": 0,
        "masked_tokens": 0,
        "labels": collections.Counter(),
        "random_document_negatives": 0,
        "ngram_lengths": collections.Counter(),
    }


def merge_stats(total: dict, part: dict) -> None:
    for key, value in part.items():
        if isinstance(value, collections.Counter):
            total[key].update(value)
        else:
            total[key] += value


class WindowProcessor:
    """Turns one window of raw documents into serialized instances (runs in a worker process).

    `tokenizer` needs encode_ids(text), id_to_piece(id), is_start_piece(piece), vocab_size and
    pad/unk/cls/sep/mask ids (albert_tf.text.SentencePieceTokenizer).
    """

    def __init__(self, tokenizer, config: CreationConfig):
        self.tokenizer = tokenizer
        self.config = config
        self.vocab = masking.MaskingVocab.from_tokenizer(tokenizer)
        self.word_start = bytes(
            int(bool(tokenizer.is_start_piece(tokenizer.id_to_piece(i))))
            for i in range(tokenizer.vocab_size)
        )

    def tokenize(self, document: List[str], stats: dict) -> instances_lib.Document:
        max_tokens = self.config.instance.max_seq_length - 3
        sentences, starts = [], []
        for text in document:
            ids = self.tokenizer.encode_ids(text)
            if not ids:
                continue
            if len(ids) > max_tokens:  # would be truncated to this by any instance anyway
                ids = ids[:max_tokens]
                stats["truncated_sentences"] += 1
            sentences.append(ids)
            starts.append([self.word_start[i] for i in ids])
        return instances_lib.Document(sentences, starts)

    def __call__(self, dupe_pass: int, first_index: int, documents: List[List[str]]):
        """Returns (serialized records, stats) for documents first_index, first_index+1, ..."""
        stats = new_stats()
        stats["documents_processed"] = len(documents)
        config = self.config.instance
        count_documents = dupe_pass == 0
        window = [self.tokenize(d, stats) for d in documents]
        if not count_documents:
            stats["truncated_sentences"] = 0
        records = []
        usable = [k for k, document in enumerate(window) if document.sentences]
        if count_documents:
            stats["documents"] += len(window)
            stats["sentences"] += sum(len(d.sentences) for d in window)
            if len(usable) < len(window):
                stats["skipped_documents"]["empty_after_tokenization"] += len(window) - len(usable)
        window = [window[k] for k in usable]  # random-document negatives come from these only
        for position, k in enumerate(usable):
            document = window[position]
            if len(document.sentences) == 1 and not config.random_next_sentence:
                # No sentence order to predict: the original would pair it with a random document.
                if count_documents:
                    stats["skipped_documents"]["single_sentence_sop"] += 1
                continue
            rng = instances_lib.document_rng(self.config.random_seed, dupe_pass, first_index + k)
            for inst in instances_lib.create_instances(
                window,
                position,
                rng,
                config,
                self.vocab,
                self.tokenizer.cls_id,
                self.tokenizer.sep_id,
            ):
                records.append(
                    schema.encode_instance(
                        inst.input_ids,
                        inst.segment_ids,
                        inst.token_boundary,
                        inst.next_sentence_label,
                        config.max_seq_length,
                        config.masking.max_predictions_per_seq if config.masking else 0,
                        inst.masked_lm_positions,
                        inst.masked_lm_ids,
                    )
                )
                stats["instances"] += 1
                stats["tokens"] += len(inst.input_ids)
                stats["labels"][inst.next_sentence_label] += 1
                stats["random_document_negatives"] += inst.is_random_document
                if inst.masked_lm_positions is not None:
                    stats["masked_tokens"] += len(inst.masked_lm_positions)
                    stats["ngram_lengths"].update(inst.ngram_lengths)
        return records, stats


_WORKER: Optional[WindowProcessor] = None


def load_tokenizer(spm_model: bytes, lower_case: bool):
    """A `SentencePieceTokenizer` from the model's bytes (what worker processes build theirs
    from: bytes pickle, a tokenizer does not)."""
    from albert_tf.text.tokenizer import SentencePieceTokenizer

    return SentencePieceTokenizer(spm_model, lower_case=lower_case)


def _init_worker(tokenizer_factory, factory_args, config):
    global _WORKER
    _WORKER = WindowProcessor(tokenizer_factory(*factory_args), config)


def _run_task(task):
    return _WORKER(*task)


def _windows(documents: Iterable[List[str]], size: int) -> Iterator[tuple]:
    window, first = [], 0
    for document in documents:
        window.append(document)
        if len(window) == size:
            yield first, window
            first += size
            window = []
    if window:
        yield first, window


def _ordered_results(tasks: Iterator[tuple], num_workers: int, initargs: tuple) -> Iterator[tuple]:
    """Runs tasks (in this process when num_workers == 1) and yields results in task order,
    with at most 2 * num_workers tasks in flight."""
    if num_workers == 1:
        _init_worker(*initargs)
        for task in tasks:
            yield _run_task(task)
        return
    import albert_tf

    context = multiprocessing.get_context("spawn")  # TF in the parent process is not fork-safe
    previous = os.environ.get(albert_tf.LIGHT_IMPORT_ENV)
    os.environ[albert_tf.LIGHT_IMPORT_ENV] = "1"  # the workers never build a model: no TF import
    try:
        with concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=context, initializer=_init_worker, initargs=initargs
        ) as pool:
            pending = collections.deque()
            for task in tasks:
                pending.append(pool.submit(_run_task, task))
                if len(pending) >= 2 * num_workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
    finally:
        if previous is None:
            os.environ.pop(albert_tf.LIGHT_IMPORT_ENV, None)
        else:
            os.environ[albert_tf.LIGHT_IMPORT_ENV] = previous


def check_not_empty(stats: dict) -> None:
    """Raises CorpusTooSmallError when the merged stats hold no instance."""
    if stats["instances"] == 0:
        skipped = dict(stats["skipped_documents"])
        raise CorpusTooSmallError(
            f"the corpus is too small: {stats['documents']} documents gave no training instance "
            f"(skipped documents: {skipped or 'none'}); SOP needs documents of at least 2 "
            "sentences separated by blank lines (use --random_next_sentence for one-sentence "
            "documents)"
        )


def add_corpus_fields(
    summary: dict,
    skipped_lines: int,
    skipped_locations: List[str],
    input_spec,
    skipped_by_source: Optional[dict] = None,
) -> dict:
    """Adds what the corpus reader counted (lines that are not valid UTF-8, and per source
    `corpora.CorpusStats.skipped_summary()`: lines, documents dropped, the first of each) and
    the corpus spec to a summary."""
    skipped_by_source = dict(skipped_by_source or {})
    summary["skipped_lines"] = skipped_lines
    summary["skipped_line_locations"] = list(skipped_locations)
    summary["dropped_documents"] = sum(s["documents"] for s in skipped_by_source.values())
    summary["skipped_by_source"] = skipped_by_source
    summary["input"] = input_spec if isinstance(input_spec, str) else ",".join(input_spec)
    return summary


def log_skipped_lines(summary: dict) -> None:
    """Logs, at the end of a run, one WARNING per source with lines that were not valid UTF-8
    ("3 documents dropped for non-UTF-8 bytes in FILE (first at line L)")."""
    from albert_tf.data import corpora

    for source, skipped in summary.get("skipped_by_source", {}).items():
        logging.warning("%s", corpora.skipped_message(source, skipped))


def file_check(tokenizer, max_seq_length: int, input_format: str, check_input_format: bool):
    """The `check_file` of `corpora.iter_documents` for a run: in the "sentences" format (and
    unless `check_input_format` is off), `corpus_layout.check_sentences_layout` with the run's
    tokenizer and window; else None."""
    if input_format != "sentences" or not check_input_format:
        return None
    from albert_tf.data import corpus_layout

    def check(path, head):
        corpus_layout.check_sentences_layout(
            path, head, lambda line: len(tokenizer.encode_ids(line)), max_seq_length
        )

    return check


def prepare_run(
    input_spec,
    output_file: str,
    spm_model,
    lower_case: bool,
    num_output_shards: int,
    write_summary: bool,
) -> tuple:
    """Checks done before any work (outputs that are inputs, the SentencePiece model) ->
    (output paths, summary path or None, the model's bytes, its tokenizer)."""
    from albert_tf.text.tokenizer import SentencePieceTokenizer, read_model_proto

    outputs = writer_lib.output_paths(output_file, num_output_shards)
    summary_file = (
        writer_lib.summary_path(output_file, num_output_shards) if write_summary else None
    )
    refuse_outputs_that_are_inputs(
        output_file, outputs + [summary_file] * bool(summary_file), input_spec
    )
    model_proto = read_model_proto(spm_model)
    tokenizer = SentencePieceTokenizer(model_proto, lower_case=lower_case)  # fails early if bad
    return outputs, summary_file, model_proto, tokenizer


def summarize(
    stats: dict, config: CreationConfig, elapsed: float, outputs: List[str], counts: List[int]
) -> dict:
    """The JSON-able run summary."""
    labels = stats["labels"]
    instances = stats["instances"]
    ngrams = stats["ngram_lengths"]
    return {
        "outputs": dict(zip(outputs, counts)),
        "instances": instances,
        "tokens": stats["tokens"],
        "masked_tokens": stats["masked_tokens"],
        "masked_fraction": stats["masked_tokens"] / max(1, stats["tokens"]),
        "label_counts": {str(k): labels[k] for k in sorted(labels)},
        "label_1_fraction": labels[1] / max(1, instances),
        "random_document_negatives": stats["random_document_negatives"],
        "ngram_length_fractions": {
            str(n): ngrams[n] / max(1, sum(ngrams.values())) for n in sorted(ngrams)
        },
        "documents": stats["documents"],
        "sentences": stats["sentences"],
        "truncated_sentences": stats["truncated_sentences"],
        "skipped_documents": dict(sorted(stats["skipped_documents"].items())),
        "dupe_factor": config.dupe_factor,
        "random_seed": config.random_seed,
        "max_seq_length": config.instance.max_seq_length,
        "max_predictions_per_seq": (
            config.instance.masking.max_predictions_per_seq if config.instance.masking else None
        ),
        "masked": config.instance.masking is not None,
        "objective": "nsp" if config.instance.random_next_sentence else "sop",
        "seconds": round(elapsed, 3),
        "instances_per_second": instances / max(elapsed, 1e-9),
    }


def create_from_documents(
    document_source,
    output_paths: List[str],
    tokenizer_factory,
    factory_args: tuple,
    config: CreationConfig,
    num_workers: int = 1,
    summary_file: Optional[str] = None,
) -> dict:
    """Core driver: `document_source()` returns a fresh iterator of documents (lists of sentence
    strings) and is called once per dupe pass; `tokenizer_factory(*factory_args)` builds the
    tokenizer in each worker (both must be picklable for num_workers > 1).

    Returns the summary dict (also written to `summary_file` if given). Raises
    CorpusTooSmallError, leaving no output file, when no instance could be made.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    stats = new_stats()
    start = last_log = time.monotonic()
    shuffle = writer_lib.ShuffleBuffer(config.shuffle_buffer_size, config.random_seed)

    def tasks():
        for dupe_pass in range(config.dupe_factor):
            for first, window in _windows(document_source(), config.document_window):
                yield dupe_pass, first, window

    initargs = (tokenizer_factory, factory_args, config)
    with writer_lib.ShardedRecordWriter(output_paths) as out:
        for records, part in _ordered_results(tasks(), num_workers, initargs):
            merge_stats(stats, part)
            for record in records:
                out.write_all(shuffle.add(record))
            now = time.monotonic()
            if now - last_log >= _LOG_EVERY_SECONDS:
                last_log = now
                elapsed = now - start
                logging.info(
                    "%d documents (%.0f documents/s), %d instances (%.0f instances/s), %.0f s",
                    stats["documents_processed"],
                    stats["documents_processed"] / elapsed,
                    stats["instances"],
                    stats["instances"] / elapsed,
                    elapsed,
                )
        check_not_empty(stats)
        out.write_all(shuffle.flush())
        out.commit()
        counts = out.counts
    elapsed = time.monotonic() - start
    summary = summarize(stats, config, elapsed, output_paths, counts)
    logging.info(
        "Wrote %d instances (%d tokens, %.2f%% masked, %.1f%% label 1) to %d files in %.1f s "
        "(%.0f instances/s); skipped documents: %s",
        summary["instances"],
        summary["tokens"],
        100 * summary["masked_fraction"],
        100 * summary["label_1_fraction"],
        len(output_paths),
        elapsed,
        summary["instances_per_second"],
        summary["skipped_documents"] or "none",
    )
    if summary_file:
        files.write_json(summary_file, summary)
    return summary


def create_pretraining_data(
    input_spec,
    output_file: str,
    spm_model,
    *,
    lower_case: bool = True,
    config: Optional[CreationConfig] = None,
    num_workers: int = 1,
    num_output_shards: int = 1,
    input_format: str = "sentences",
    strict: bool = False,
    tfds_data_dir: Optional[str] = None,
    tfds_split: str = "train",
    tfds_feature: str = "text",
    write_summary: bool = True,
    check_input_format: bool = True,
) -> dict:
    """Reads `input_spec` (see `albert_tf.data.corpora.iter_documents`) and writes pretraining
    TFRecords to `output_file` (comma list, or a prefix with num_output_shards > 1).

    The corpus spec, the SentencePiece model and the outputs (none may be an input file) are
    checked before any work; a corpus file that is not UTF-8 text raises DataError naming it, and
    so does (unless `check_input_format` is off) a file that looks like one document per line
    in the "sentences" format (`albert_tf.data.corpus_layout`). Returns the summary (also
    written to PREFIX.summary.json / FIRST_FILE.summary.json unless write_summary=False); lines
    that were not valid UTF-8 are counted in it per file and logged at the end.
    """
    from albert_tf.data import corpora

    config = config or CreationConfig()
    outputs, summary_file, model_proto, tokenizer = prepare_run(
        input_spec, output_file, spm_model, lower_case, num_output_shards, write_summary
    )
    check_file = file_check(
        tokenizer, config.instance.max_seq_length, input_format, check_input_format
    )
    corpus_stats = corpora.CorpusStats()
    reader_args = dict(
        format=input_format,
        strict=strict,
        data_dir=tfds_data_dir,
        split=tfds_split,
        feature=tfds_feature,
    )
    first_pass = [
        corpora.iter_documents(input_spec, stats=corpus_stats, check_file=check_file, **reader_args)
    ]  # resolves and checks the files now

    def document_source():
        if first_pass:
            return first_pass.pop()
        # Bad lines were logged (and counted) in the first pass.
        return corpora.iter_documents(
            input_spec, stats=corpora.CorpusStats(quiet=True), **reader_args
        )

    summary = create_from_documents(
        document_source,
        outputs,
        load_tokenizer,
        (model_proto, lower_case),
        config,
        num_workers=num_workers,
    )
    add_corpus_fields(
        summary,
        corpus_stats.skipped_lines,
        corpus_stats.skipped_locations,
        input_spec,
        corpus_stats.skipped_summary(),
    )
    if summary_file:
        files.write_json(summary_file, summary)
        logging.info("Summary written to %s", summary_file)
    log_skipped_lines(summary)
    return summary


def _same_file_key(path: str) -> str:
    return path if "://" in path else os.path.realpath(path)


def refuse_outputs_that_are_inputs(output_file: str, outputs: List[str], input_spec) -> None:
    """Raises InvalidFlagError, before anything is written, when an output (a file of
    --output_file, a shard or the summary) is also a file the corpus spec reads."""
    from albert_tf.data import corpora

    inputs = {_same_file_key(path) for path in corpora.input_files(input_spec)}
    spec = input_spec if isinstance(input_spec, str) else ",".join(input_spec)
    for path in outputs:
        if _same_file_key(path) in inputs:
            named = [f.strip() for f in output_file.split(",")]
            what = (
                f"--output_file={path}"
                if path in named
                else (f"--output_file={output_file} writes {path}, which")
            )
            raise InvalidFlagError(
                f"{what} is also an input file (--input_file={spec}); write the records elsewhere"
            )
