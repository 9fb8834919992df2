"""create_pretraining_data as an Apache Beam pipeline (Direct, Dataflow, Flink or Spark runner).

The same instance creation as the local tool (`pretraining.WindowProcessor`), distributed:
1. each corpus file is read whole by one worker with corpora's own per-file reader, which gives
   its documents and their count;
2. the counts, in the local tool's file order, give each file's first global document index (a
   side input), so each document gets the index the local tool gives it;
3. documents are grouped into the local tool's windows (index // document_window) and each
   window is processed once per dupe pass, with the same per-document seeds;
4. the records go to `WriteToTFRecord` (the local tool's file names) and the combined statistics
   to the same summary JSON, written atomically once the shards are in place.

For the same inputs and seed the output holds exactly the local tool's records, as a multiset:
their order and their shard differ (Beam's shuffle replaces the shuffle buffer). The summary's
per-shard counts are null (`instances` is the total), "seconds" runs from the launch to the
summary, and "runner" is added. Only file corpora (local or gs://, read through tf.io.gfile as
the local tool does) are supported, and --output_file must be one file or one prefix.
apache_beam is imported by this module only (the local tool never imports it); without it,
the module imports but running raises InvalidFlagError naming --runner.
"""

import re
import shlex
import sys
import time
from typing import List, Optional, Sequence

try:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
except ImportError:  # the optional extra: this module still imports; running says what to install
    beam = None

from albert_tf import files
from albert_tf.data import corpora, pretraining
from albert_tf.data import writer as writer_lib
from albert_tf.errors import UserError
from albert_tf.settings import InvalidFlagError

_DoFn = beam.DoFn if beam else object
_CombineFn = beam.CombineFn if beam else object

RUNNERS = ("DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner")
_COUNTS = "counts"
_STATS = "stats"
# The last line of a worker's traceback: "albert_tf.data.pretraining.CorpusTooSmallError: ...".
_RAISED = re.compile(r"^(albert_tf(?:\.\w+)+)\.(\w+): (.*)$", re.M)
_STEP = re.compile(r" \[while running '[^']*'\]$")


class _ReadFile(_DoFn):
    """(file index, path) -> (file index, document index in the file, document); the side output
    gets (file index, documents, {path: skipped lines} (`CorpusStats.skipped_summary`), the first
    locations of skipped lines)."""

    def __init__(self, input_format: str, strict: bool):
        self.input_format = input_format
        self.strict = strict

    def process(self, element):
        index, path = element
        stats = corpora.CorpusStats()
        corpora.check_text_file(path)
        count = 0
        for document in corpora.file_reader(path, self.input_format, self.strict, stats)():
            yield index, count, document
            count += 1
        yield beam.pvalue.TaggedOutput(
            _COUNTS, (index, count, stats.skipped_summary(), list(stats.skipped_locations))
        )


def _first_indices(counts) -> dict:
    """{file index: global index of its first document}, files in the local tool's order."""
    first, total = {}, 0
    for index, count, _, _ in sorted(counts, key=lambda c: c[0]):
        first[index] = total
        total += count
    return first


def _key_by_window(item, first_indices: dict, window: int):
    file_index, k, document = item
    index = first_indices[file_index] + k
    return index // window, (index, document)


class _ProcessWindow(_DoFn):
    """(window, [(global index, document)]) -> serialized records; merged stats to a side output."""

    def __init__(self, spm_model: bytes, lower_case: bool, config: pretraining.CreationConfig):
        self.spm_model = spm_model
        self.lower_case = lower_case
        self.config = config
        self.processor = None

    def setup(self):
        tokenizer = pretraining.load_tokenizer(self.spm_model, self.lower_case)
        self.processor = pretraining.WindowProcessor(tokenizer, self.config)

    def process(self, element):
        window, items = element
        items = sorted(items, key=lambda item: item[0])
        first = window * self.config.document_window
        if [i for i, _ in items] != list(range(first, first + len(items))):
            raise RuntimeError(f"window {window} does not hold consecutive documents")
        documents = [document for _, document in items]
        stats = pretraining.new_stats()
        for dupe_pass in range(self.config.dupe_factor):
            records, part = self.processor(dupe_pass, first, documents)
            pretraining.merge_stats(stats, part)
            yield from records
        yield beam.pvalue.TaggedOutput(_STATS, stats)


class _MergeStats(_CombineFn):
    def create_accumulator(self):
        return pretraining.new_stats()

    def add_input(self, total, part):
        pretraining.merge_stats(total, part)
        return total

    def merge_accumulators(self, accumulators):
        total = pretraining.new_stats()
        for part in accumulators:
            pretraining.merge_stats(total, part)
        return total

    def extract_output(self, total):
        return total


def _write_summary(
    stats, counts, written, *, config, outputs, summary_file, input_spec, runner, start
):
    """Writes the summary JSON once the shards are written; an empty corpus removes them and
    raises CorpusTooSmallError."""
    import tensorflow as tf

    if stats["instances"] == 0:
        for path in written:
            if tf.io.gfile.exists(path):
                tf.io.gfile.remove(path)
        pretraining.check_not_empty(stats)
    if sorted(written) != sorted(outputs):
        raise RuntimeError(f"Beam wrote {sorted(written)}, expected {sorted(outputs)}")
    elapsed = time.time() - start
    summary = pretraining.summarize(stats, config, elapsed, outputs, [None] * len(outputs))
    counts = sorted(counts, key=lambda c: c[0])  # the local tool's file order
    locations = [location for *_, found in counts for location in found]
    skipped = {source: s for _, _, found, _ in counts for source, s in found.items()}
    pretraining.add_corpus_fields(
        summary,
        sum(s["lines"] for s in skipped.values()),
        locations[: corpora.LOGGED_BAD_LINES],
        input_spec,
        skipped,
    )
    summary["runner"] = runner
    files.write_json(summary_file, summary)


def _corpus_files(input_spec) -> List[str]:
    items = [input_spec] if isinstance(input_spec, str) else list(input_spec)
    named = [p.strip() for item in items for p in str(item).split(",")]
    special = [p for p in named if p.startswith(("tfds:", "builtin:"))]
    if special:
        raise InvalidFlagError(
            f"--input_file={special[0]}: a Beam runner reads corpus files only "
            "(local or gs://), not tfds: or builtin: corpora"
        )
    return corpora.input_files(input_spec)


def build_pipeline(
    pipeline,
    paths: Sequence[str],
    output_file: str,
    spm_model: bytes,
    *,
    lower_case: bool,
    config: pretraining.CreationConfig,
    num_output_shards: int,
    input_format: str,
    strict: bool,
    summary_file: str,
    input_spec,
    runner: str,
) -> None:
    """Adds the whole job to `pipeline` (see the module docstring)."""
    outputs = writer_lib.output_paths(output_file, num_output_shards)
    read = (
        pipeline
        | "Files" >> beam.Create(list(enumerate(paths)))
        | "Spread" >> beam.Reshuffle()
        | "Read"
        >> beam.ParDo(_ReadFile(input_format, strict)).with_outputs(_COUNTS, main="documents")
    )
    counts = read[_COUNTS] | "AllCounts" >> beam.combiners.ToList()
    first_indices = counts | "FirstIndices" >> beam.Map(_first_indices)
    processed = (
        read.documents
        | "Window"
        >> beam.Map(_key_by_window, beam.pvalue.AsSingleton(first_indices), config.document_window)
        | "GroupWindows" >> beam.GroupByKey()
        | "Instances"
        >> beam.ParDo(_ProcessWindow(spm_model, lower_case, config)).with_outputs(
            _STATS, main="records"
        )
    )
    if num_output_shards > 1:
        naming = dict(file_path_prefix=output_file, file_name_suffix=".tfrecord")
    else:
        naming = dict(file_path_prefix=outputs[0], shard_name_template="")
    written = processed.records | "Write" >> beam.io.WriteToTFRecord(
        num_shards=num_output_shards, **naming
    )
    (
        processed[_STATS]
        | "MergeStats" >> beam.CombineGlobally(_MergeStats())
        | "Summary"
        >> beam.Map(
            _write_summary,
            beam.pvalue.AsSingleton(counts),
            beam.pvalue.AsList(written),
            config=config,
            outputs=outputs,
            summary_file=summary_file,
            input_spec=input_spec,
            runner=runner,
            start=time.time(),
        )
    )


def _user_error(error: Exception) -> Optional[UserError]:
    """The UserError (a bad file, an empty corpus) that failed the job in a worker, or None.
    Runners pass it on as it is (in process) or as a traceback's text (other processes)."""
    if isinstance(error, UserError):
        raised = [(type(error), str(error))]
    else:
        raised = [
            (getattr(sys.modules.get(module), name, None), message)
            for module, name, message in _RAISED.findall(str(error))
        ]
    for cls, message in reversed(raised):
        if isinstance(cls, type) and issubclass(cls, UserError):
            message = _STEP.sub("", message)
            try:
                return cls(message)
            except TypeError:  # a constructor with other arguments
                return UserError(message)
    return None


def pipeline_options(runner: str, beam_options: Optional[str] = ""):
    """Beam's PipelineOptions from --runner and the --beam_options string (Beam's own flags)."""
    if beam is None:
        raise InvalidFlagError(
            f"--runner={runner} needs Apache Beam, which is not installed: "
            "pip install 'albert_tf[beam]'"
        )
    if runner not in RUNNERS:
        raise InvalidFlagError(f"--runner={runner}: must be one of {', '.join(RUNNERS)}")
    args = shlex.split(beam_options or "")
    if any(arg.startswith("--runner") for arg in args):
        raise InvalidFlagError("--beam_options: give the runner with --runner, not here")
    return PipelineOptions([f"--runner={runner}"] + args)


def create_pretraining_data(
    input_spec,
    output_file: str,
    spm_model,
    *,
    runner: str,
    beam_options: str = "",
    lower_case: bool = True,
    config: Optional[pretraining.CreationConfig] = None,
    num_output_shards: int = 1,
    input_format: str = "sentences",
    strict: bool = False,
    check_input_format: bool = True,
) -> dict:
    """Runs the Beam job and waits for it; returns the summary (read back from
    PREFIX.summary.json / FILE.summary.json, which the job writes). The files are checked as the
    local tool checks them (UTF-8 text; laid out as `input_format` says) before the job starts."""
    config = config or pretraining.CreationConfig()
    if len([f for f in output_file.split(",") if f.strip()]) > 1:
        raise InvalidFlagError(
            f"--output_file={output_file}: a Beam runner writes one file or "
            "one prefix with --num_output_shards, not a list of files"
        )
    options = pipeline_options(runner, beam_options)
    paths = _corpus_files(input_spec)
    _, summary_file, spm_model, tokenizer = pretraining.prepare_run(
        input_spec, output_file, spm_model, lower_case, num_output_shards, True
    )
    check_file = pretraining.file_check(
        tokenizer, config.instance.max_seq_length, input_format, check_input_format
    )
    for path in paths:
        head = corpora.check_text_file(path)
        if check_file is not None:
            check_file(path, head)
    pipeline = beam.Pipeline(options=options)
    build_pipeline(
        pipeline,
        paths,
        output_file,
        spm_model,
        lower_case=lower_case,
        config=config,
        num_output_shards=num_output_shards,
        input_format=input_format,
        strict=strict,
        summary_file=summary_file,
        input_spec=input_spec,
        runner=runner,
    )
    try:
        pipeline.run().wait_until_finish()
    except Exception as e:
        error = _user_error(e)
        if error is None:
            raise
        raise error from None
    summary = files.read_json(summary_file)
    pretraining.log_skipped_lines(summary)
    return summary
