"""Benchmarks scripts/create_pretraining_data.py: instances/s and peak memory.

Runs the real script in subprocesses on the built-in corpus (builtin:docstrings) with an
8000-piece SentencePiece model trained here and max_seq_length 128:
  * 1 and 2 worker processes on the built-in corpus and on the 4x file (speed; output bytes
    are checked identical);
  * the corpus written out once (1x) and repeated 4 times (4x), to show that memory stays flat.
Peak memory is measured two ways: the largest single process (ru_maxrss from wait4, which covers
the worker processes) and the whole process tree (sum of VmRSS, sampled every 0.2 s).

  python scripts/benchmark_data.py --work_dir=/tmp/albert_tf_bench_data
"""

import json
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "work_dir", "/tmp/albert_tf_bench_data", "Scratch directory (corpus copies, model, outputs)."
)
flags.DEFINE_string(
    "corpus", "builtin:docstrings", "Corpus spec (see albert_tf.data.corpora.iter_documents)."
)
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece pieces.")
flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length of the runs.")
flags.DEFINE_integer("dupe_factor", 1, "--dupe_factor of the runs.")
flags.DEFINE_string("output_json", None, "Also write the results here.")

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "create_pretraining_data.py")


def _tree_rss_kb(root: int) -> int:
    """Sum of VmRSS (kB) of `root` and all its descendants."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def _same_bytes(path_a: str, path_b: str) -> bool:
    with open(path_a, "rb") as a, open(path_b, "rb") as b:
        return a.read() == b.read()


def _run(name: str, args: list) -> dict:
    """Runs the script with `args`; returns wall time, peaks and the run's summary JSON."""
    logging.info("Run %s: %s", name, " ".join(args))
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, _SCRIPT] + args,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(FLAGS.work_dir, f"{name}.log"), "w"),
    )
    peak_tree = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak_tree[0] = max(peak_tree[0], _tree_rss_kb(process.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if process.returncode:
        raise RuntimeError(
            f"run {name} failed (exit {process.returncode}); see {FLAGS.work_dir}/{name}.log"
        )
    output = [a.split("=", 1)[1] for a in args if a.startswith("--output_file=")][0]
    with open(f"{output}.summary.json") as f:
        summary = json.load(f)
    return {
        "run": name,
        "wall_seconds": round(wall, 1),
        "instances": summary["instances"],
        "documents": summary["documents"],
        "tokens": summary["tokens"],
        "instances_per_second": round(summary["instances_per_second"], 1),
        "instances_per_wall_second": round(summary["instances"] / wall, 1),
        "peak_process_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "peak_tree_rss_mb": round(peak_tree[0] / 1024, 1),
        "output": output,
    }


def _prepare():
    """Writes the corpus in the original format (1x and 4x) and trains the SentencePiece model."""
    import sentencepiece as spm

    from albert_tf.data import corpora

    corpus_1x = os.path.join(FLAGS.work_dir, "corpus_1x.txt")
    corpus_4x = os.path.join(FLAGS.work_dir, "corpus_4x.txt")
    if not os.path.exists(corpus_4x):
        with open(corpus_1x + ".tmp", "w", encoding="utf-8") as f:
            for document in corpora.iter_documents(FLAGS.corpus):
                f.write("\n".join(document) + "\n\n")
        os.replace(corpus_1x + ".tmp", corpus_1x)
        with open(corpus_1x, "rb") as src, open(corpus_4x + ".tmp", "wb") as dst:
            data = src.read()
            for _ in range(4):
                dst.write(data)
        os.replace(corpus_4x + ".tmp", corpus_4x)
    prefix = os.path.join(FLAGS.work_dir, f"spm{FLAGS.vocab_size}")
    if not os.path.exists(prefix + ".model"):
        spm.SentencePieceTrainer.train(
            input=corpus_1x,
            model_prefix=prefix,
            vocab_size=FLAGS.vocab_size,
            model_type="unigram",
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=["[CLS]", "[SEP]", "[MASK]"],
            input_sentence_size=300000,
            shuffle_input_sentence=True,
            character_coverage=0.99995,
            minloglevel=2,
        )
    return corpus_1x, corpus_4x, prefix + ".model"


def main(argv):
    del argv
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    corpus_1x, corpus_4x, model = _prepare()
    common = [
        f"--spm_model_file={model}",
        f"--max_seq_length={FLAGS.max_seq_length}",
        f"--dupe_factor={FLAGS.dupe_factor}",
        "--max_predictions_per_seq=20",
    ]
    out = lambda name: f"--output_file={os.path.join(FLAGS.work_dir, name)}.tfrecord"  # noqa: E731
    results = [
        _run(
            "builtin_1_worker",
            [f"--input_file={FLAGS.corpus}", out("builtin_w1"), "--num_workers=1"] + common,
        ),
        _run(
            "builtin_2_workers",
            [f"--input_file={FLAGS.corpus}", out("builtin_w2"), "--num_workers=2"] + common,
        ),
        _run(
            "file_1x_1_worker",
            [f"--input_file={corpus_1x}", out("file_1x"), "--num_workers=1"] + common,
        ),
        _run(
            "file_4x_1_worker",
            [f"--input_file={corpus_4x}", out("file_4x"), "--num_workers=1"] + common,
        ),
        _run(
            "file_4x_2_workers",
            [f"--input_file={corpus_4x}", out("file_4x_w2"), "--num_workers=2"] + common,
        ),
    ]
    identical = all(
        _same_bytes(results[i]["output"], results[j]["output"]) for i, j in ((0, 1), (3, 4))
    )
    for one, two in ((results[0], results[1]), (results[3], results[4])):
        speedup = two["instances_per_second"] / one["instances_per_second"]
        print(f"{two['run']}: {speedup:.2f}x the instances/s of {one['run']} (work phase)")
    sizes = {r["run"]: os.path.getsize(r["output"]) for r in results}
    print(
        f"corpus {FLAGS.corpus}: {os.path.getsize(corpus_1x) / 1e6:.1f} MB "
        f"(4x: {os.path.getsize(corpus_4x) / 1e6:.1f} MB), vocab {FLAGS.vocab_size}, "
        f"max_seq_length {FLAGS.max_seq_length}, dupe_factor {FLAGS.dupe_factor}"
    )
    print(
        "| run | documents | instances | instances/s (work) | instances/s (wall) | wall s | "
        "peak process RSS MB | peak tree RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['run']} | {r['documents']} | {r['instances']} | {r['instances_per_second']} | "
            f"{r['instances_per_wall_second']} | {r['wall_seconds']} | "
            f"{r['peak_process_rss_mb']} | {r['peak_tree_rss_mb']} |"
        )
    print(f"1 vs 2 workers byte-identical (both corpora): {identical}; output bytes: {sizes}")
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w") as f:
            json.dump({"results": results, "identical_1_vs_2_workers": identical}, f, indent=2)


if __name__ == "__main__":
    cli.run(main)
