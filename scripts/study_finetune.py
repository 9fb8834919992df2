"""The fine-tuning study: which optimizer and learning rate learn on every task kind.

Fine-tunes each task kind on held-out data built from text shipped on this machine (the
installed packages' docstrings: `docstring-source` classification, `docstring-code` tagging,
SQuAD v1.1 / v2.0 fill-in-the-blank questions, RACE-layout multiple choice), from a pretrained
model (--init_checkpoint, e.g. the one `make demo` writes) and/or from random init
(--preset), for every optimizer, learning rate and seed asked for, each run in its own process
through the run_* scripts. It then prints and writes (study.json, study.md) per task, start,
optimizer and rate: the best dev main metric (mean, min-max over the seeds), how many runs
collapsed (their last evaluation predicted one constant answer or scored no better than one) and
how many beat the strongest simple baseline, beside that baseline. For the classification task
it also scores a bag-of-words classifier (TF-IDF + logistic regression,
`albert_tf.finetune.bag_of_words`) on each seed's split: what a model that knows no language
reaches.

Runs are directories under --output_dir named by their settings; a finished run is read, not
run again, so re-running the same command resumes the study.

    python scripts/study_finetune.py --output_dir=study \\
        --init_checkpoint=demo_output/pretrain/export --tasks=classification,tagging,squad \\
        --optimizers=adamw,adamw_original,lamb --learning_rates=1e-5,1e-4,1e-3,3e-3 \\
        --seeds=1,2,3 --jobs=2
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

import concurrent.futures  # noqa: E402
import itertools  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from absl import flags, logging  # noqa: E402

from albert_tf import cli, files, input_paths  # noqa: E402
from albert_tf.optim.names import OPTIMIZERS  # noqa: E402
from albert_tf.precision import PRECISIONS  # noqa: E402
from albert_tf.settings import InvalidFlagError  # noqa: E402

SCRIPTS = os.path.dirname(os.path.abspath(__file__))

# task kind -> (script, flags); "{data}" is the study's data directory.
TASKS = {
    "classification": (
        "run_classifier.py",
        ["--task_name=docstring-source", "--max_seq_length=64", "--dynamic_padding"],
    ),
    "tagging": ("run_token_classifier.py", ["--task_name=docstring-code", "--max_seq_length=64"]),
    "squad": (
        "run_squad.py",
        [
            "--train_file={data}/squad_v1/train.json",
            "--predict_file={data}/squad_v1/dev.json",
            "--max_seq_length=128",
            "--doc_stride=64",
            "--max_query_length=48",
            "--feature_cache_dir={data}/squad_cache",
        ],
    ),
    "squad_v2": (
        "run_squad.py",
        [
            "--train_file={data}/squad_v2/train.json",
            "--predict_file={data}/squad_v2/dev.json",
            "--version_2_with_negative",
            "--max_seq_length=128",
            "--doc_stride=64",
            "--max_query_length=48",
            "--feature_cache_dir={data}/squad_cache",
        ],
    ),
    "race": (
        "run_race.py",
        ["--data_dir={data}/race", "--max_seq_length=128", "--max_qa_length=64"],
    ),
}

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Where the runs, study.json and study.md go.")
flags.DEFINE_list("tasks", ["classification", "tagging", "squad"], f"Of: {', '.join(TASKS)}.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained model directory (the 'pretrained' start).")
flags.DEFINE_string(
    "spm_model_file", None, "SentencePiece model for --preset runs (default: the checkpoint's)."
)
flags.DEFINE_string("preset", None, "Also (or only) fine-tune this preset from random init.")
flags.DEFINE_list("optimizers", ["adamw", "adamw_original"], f"Of: {', '.join(OPTIMIZERS)}.")
flags.DEFINE_list("learning_rates", ["1e-5", "1e-4", "1e-3", "3e-3"], "Peak learning rates.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "Seeds (initialisation, dropout, data order).")
flags.DEFINE_list(
    "precisions",
    ["float32"],
    f"Fine-tuning precisions (--precision of the run_* scripts), of: {', '.join(PRECISIONS)}.",
)
flags.DEFINE_integer("num_train_steps", 300, "Optimizer steps per run.", lower_bound=1)
flags.DEFINE_integer("save_checkpoints_steps", 100, "Evaluate every N steps.", lower_bound=1)
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.", lower_bound=1)
flags.DEFINE_integer("jobs", 1, "Runs side by side (each pinned to cores/jobs threads).")
flags.DEFINE_integer("squad_paragraphs", 1500, "Paragraphs of the generated SQuAD sets.")
flags.DEFINE_integer("race_articles", 1500, "Articles of the generated RACE set.")
flags.DEFINE_bool("report_only", False, "Only tabulate the finished runs of the plan; run none.")


def _starts():
    starts = []
    if FLAGS.init_checkpoint:
        starts.append(("pretrained", ["--init_checkpoint=" + FLAGS.init_checkpoint]))
    if FLAGS.preset:
        spm = FLAGS.spm_model_file or (
            os.path.join(FLAGS.init_checkpoint, "spm.model") if FLAGS.init_checkpoint else None
        )
        if not spm:
            raise InvalidFlagError("--preset needs --spm_model_file (or --init_checkpoint's)")
        starts.append(("random", ["--preset=" + FLAGS.preset, "--spm_model_file=" + spm]))
    if not starts:
        raise InvalidFlagError("give --init_checkpoint and/or --preset")
    return starts


def _write_data(data_dir, tasks):
    """The generated data sets the tasks need (kept when present)."""
    for task, (name, v2) in (("squad", ("squad_v1", False)), ("squad_v2", ("squad_v2", True))):
        directory = os.path.join(data_dir, name)
        if task in tasks and not os.path.exists(os.path.join(directory, "dev.json")):
            from albert_tf.data.docstring_qa import write_docstring_squad

            os.makedirs(directory, exist_ok=True)
            counts = write_docstring_squad(
                os.path.join(directory, "train.json"),
                os.path.join(directory, "dev.json"),
                max_paragraphs=FLAGS.squad_paragraphs,
                version_2_with_negative=v2,
            )
            logging.info("%s: %d training and %d dev questions", name, *counts)
    if "race" in tasks:
        from albert_tf.data.docstring_race import write_docstring_race

        directory = os.path.join(data_dir, "race")
        if not os.path.exists(directory):
            logging.info("race: %s", write_docstring_race(directory, FLAGS.race_articles))


def _command(task, start_flags, optimizer, rate, precision, seed, run_dir, data_dir):
    script, task_flags = TASKS[task]
    return [
        sys.executable,
        os.path.join(SCRIPTS, script),
        *[f.format(data=data_dir) for f in task_flags],
        *start_flags,
        f"--output_dir={run_dir}",
        f"--optimizer={optimizer}",
        f"--learning_rate={rate}",
        f"--precision={precision}",
        f"--seed={seed}",
        f"--num_train_steps={FLAGS.num_train_steps}",
        f"--save_checkpoints_steps={FLAGS.save_checkpoints_steps}",
        f"--train_batch_size={FLAGS.train_batch_size}",
        "--eval_batch_size=64",
        "--keep_checkpoint_max=1",
        "--verbose=0",
    ]


def _run(command, run_dir, threads):
    """Runs one fine-tuning (unless finished) and returns its eval_results.json."""
    results = os.path.join(run_dir, "eval_results.json")
    if not os.path.exists(os.path.join(run_dir, "finetune.json")):
        os.makedirs(run_dir, exist_ok=True)
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        with open(os.path.join(run_dir, "study.log"), "w") as log:
            code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        if code:
            raise RuntimeError(f"exit {code}: {' '.join(command)} (log: {run_dir}/study.log)")
    return files.read_json(results)


def _summary(record):
    """The numbers the study keeps of one run's eval_results.json."""
    history = record["history"]
    verdict = record.get("baseline_verdict") or {}
    return {
        "best": record["best"]["value"],
        "collapsed": bool(history and history[-1].get("collapsed")),
        "beats_baseline": verdict.get("beats_baseline"),
        "baseline": verdict.get("baseline_value"),
        "baseline_name": verdict.get("baseline"),
        "metric": record["best"]["metric"],
    }


def _cell(runs):
    values = [r["best"] for r in runs]
    text = f"{statistics.mean(values):.3f}"
    if len(values) > 1:
        text += f" ({min(values):.3f}-{max(values):.3f})"
    collapsed = sum(r["collapsed"] for r in runs)
    return text + (f", {collapsed}/{len(runs)} collapsed" if collapsed else "")


def _table(rows):
    """Markdown, per task and start: one line per optimizer and precision, one column per
    learning rate; a cell is the best dev main metric (mean and range over the seeds) and the
    collapsed runs."""
    rates = sorted({r["learning_rate"] for r in rows}, key=float)
    groups = {}
    for row in rows:
        key = (row["task"], row["start"], row["optimizer"], row["precision"])
        groups.setdefault(key, {}).setdefault(row["learning_rate"], []).append(row)
    lines = [
        "| task (dev metric, strongest simple baseline) | start | optimizer | precision | "
        + " | ".join(f"lr {r}" for r in rates)
        + " |",
        "|---|---|---|---|" + "---|" * len(rates),
    ]
    for (task, start, optimizer, precision), by_rate in sorted(groups.items()):
        first = next(iter(by_rate.values()))[0]
        baseline = "-" if first["baseline"] is None else f"{first['baseline']:.3f}"
        cells = [_cell(by_rate[r]) if r in by_rate else "" for r in rates]
        lines.append(
            f"| {task} ({first['metric']}, {baseline}) | {start} | {optimizer} | {precision} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def _bag_of_words(seeds):
    """Dev accuracy of the bag-of-words classifier on the classification task's split of each
    seed (the runs' splits: `docstring_source_splits(seed=seed)`)."""
    from albert_tf.data.docstring_task import docstring_source_splits
    from albert_tf.finetune.bag_of_words import BagOfWordsClassifier

    scores = []
    for seed in seeds:
        _, splits = docstring_source_splits(seed=int(seed))
        train, dev = splits["train"], splits["dev"]
        model = BagOfWordsClassifier().fit(train.texts, train.labels)
        scores.append(model.score(dev.texts, dev.labels))
    text = f"{statistics.mean(scores):.3f}"
    if len(scores) > 1:
        text += f" ({min(scores):.3f}-{max(scores):.3f})"
    return {"seeds": list(seeds), "accuracy": scores, "text": text}


def main(argv):
    del argv
    if not FLAGS.output_dir:
        raise InvalidFlagError("--output_dir is required")
    for task in FLAGS.tasks:
        if task not in TASKS:
            raise InvalidFlagError(f"--tasks: unknown task {task!r}; known: {', '.join(TASKS)}")
    for optimizer in FLAGS.optimizers:
        if optimizer not in OPTIMIZERS:
            raise InvalidFlagError(
                f"--optimizers: unknown optimizer {optimizer!r}; known: {', '.join(OPTIMIZERS)}"
            )
    for precision in FLAGS.precisions:
        if precision not in PRECISIONS:
            raise InvalidFlagError(
                f"--precisions: unknown precision {precision!r}; known: {', '.join(PRECISIONS)}"
            )
    if FLAGS.jobs < 1:
        raise InvalidFlagError(f"--jobs must be >= 1, got {FLAGS.jobs}")
    input_paths.check_fields(FLAGS, ("init_checkpoint", "spm_model_file"))
    starts = _starts()
    data_dir = os.path.join(FLAGS.output_dir, "data")
    if not FLAGS.report_only:
        _write_data(data_dir, FLAGS.tasks)
    threads = max(1, (os.cpu_count() or 1) // FLAGS.jobs)
    plan = []
    for task, (start, start_flags), optimizer, rate, precision, seed in itertools.product(
        FLAGS.tasks, starts, FLAGS.optimizers, FLAGS.learning_rates, FLAGS.precisions, FLAGS.seeds
    ):
        run_dir = os.path.join(
            FLAGS.output_dir, task, start, optimizer, f"lr{rate}", precision, f"seed{seed}"
        )
        command = _command(task, start_flags, optimizer, rate, precision, seed, run_dir, data_dir)
        if FLAGS.report_only and not os.path.exists(os.path.join(run_dir, "finetune.json")):
            continue
        plan.append(({"task": task, "start": start, "optimizer": optimizer,
                      "learning_rate": rate, "precision": precision, "seed": seed},
                     command, run_dir))  # fmt: skip
    logging.info("%d runs, %d at a time", len(plan), FLAGS.jobs)
    rows, failures, began = [], [], time.time()
    with concurrent.futures.ThreadPoolExecutor(FLAGS.jobs) as pool:
        futures = {
            pool.submit(_run, command, run_dir, threads): key for key, command, run_dir in plan
        }
        for done, future in enumerate(concurrent.futures.as_completed(futures), start=1):
            key = futures[future]
            try:
                row = {**key, **_summary(future.result())}
            except (RuntimeError, OSError, KeyError, TypeError) as e:
                failures.append(f"{key}: {e}")
                logging.error("run failed: %s: %s", key, e)
                continue
            rows.append(row)
            logging.info(
                "[%d/%d, %.0f min] %s %s %s lr %s %s seed %s: best %s %.4f%s",
                done, len(plan), (time.time() - began) / 60, key["task"], key["start"],
                key["optimizer"], key["learning_rate"], key["precision"], key["seed"],
                row["metric"], row["best"],
                " COLLAPSED" if row["collapsed"] else "",
            )  # fmt: skip
    record, table = {"runs": rows}, _table(rows)
    if "classification" in FLAGS.tasks:
        bag = _bag_of_words(FLAGS.seeds)
        record["classification_bag_of_words"] = bag
        table += (
            f"\n\nclassification, bag-of-words (TF-IDF + logistic regression) on the same splits: "
            f"accuracy {bag['text']}"
        )
    files.write_json(os.path.join(FLAGS.output_dir, "study.json"), record)
    files.write_atomic(os.path.join(FLAGS.output_dir, "study.md"), table + "\n")
    print(table)
    if failures:
        print(f"{len(failures)} runs failed:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    cli.run(main)
