"""Fine-tuning step time of albert_tf beside keras-hub and Hugging Face torch, in one run.

Each library trains a sequence classifier (random weights from the same ALBERT config, no
downloads) through its own user path, one optimizer step per call:

    albert_tf   AlbertClassifier(AlbertModel(config)).compile(precision=..., jit_compile=...),
                train_on_batch (AdamW); plus a row with compile()'s defaults (precision="auto")
    keras-hub   AlbertTextClassifier(AlbertBackbone(...)) built under the global dtype policy,
                compile(jit_compile=...) with its defaults (Adam), train_on_batch
    HF torch    AlbertForSequenceClassification(AlbertConfig(...)), eager, forward under
                torch.autocast(bfloat16) for bfloat16, loss.backward(), AdamW step

for every depth in --layers and setting (float32 / bfloat16 = mixed_bfloat16 or autocast,
with and without XLA for the Keras two; torch runs eager only). It reports the first step
(tracing and compilation included) and the median of --steps steady-state steps, which
alternate between the libraries so that load changes on a shared machine hit all alike, and the
ratio of albert_tf's steady time (and first step) to the best peer's, per row, and best
setting against best setting. keras-hub, torch and transformers are the `bench` extra
(`pip install -e .[bench]`); a library that is not installed is skipped with a message.

    python scripts/benchmark_step.py --preset=albert_base_v2 --layers=12,24 \\
        --batch_size=16 --max_seq_length=128 --steps=5
    python scripts/benchmark_step.py --preset=albert_tiny --layers=2 --batch_size=4 \\
        --max_seq_length=32 --steps=2     # a smoke run in two minutes
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from absl import flags  # noqa: E402

from albert_tf import cli  # noqa: E402
from albert_tf.benchmarks import timing  # noqa: E402

LIBRARIES = ("albert_tf", "keras_hub", "torch")
TITLES = {"albert_tf": "albert_tf", "keras_hub": "keras-hub", "torch": "HF torch"}
NEEDS = {"keras_hub": ("keras_hub",), "torch": ("torch", "transformers")}
DEFAULTS = "defaults"  # albert_tf's compile() with no precision / jit_compile: "auto"

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "AlbertConfig preset giving the shapes.")
flags.DEFINE_list("layers", ["12", "24"], "Depths (num_hidden_layers) to measure.")
flags.DEFINE_integer("batch_size", 16, "Batch size.", lower_bound=1)
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "Length of the input sequences (no padding: all real ids).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "steps", 5, "Timed steady-state steps per model (after the first step).", lower_bound=1
)
flags.DEFINE_list("libraries", list(LIBRARIES), "Libraries to run.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"], "Precisions to run.")
flags.DEFINE_list("xla", ["off", "on"], "XLA settings of the Keras libraries to run.")


# ----------------------------------------------------------------------------- one step per library
def _batch(config, batch_size, max_seq_length):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, config.vocab_size, [batch_size, max_seq_length]).astype("int32")
    return {
        "ids": ids,
        "mask": np.ones_like(ids),
        "types": np.zeros_like(ids),
        "labels": rng.integers(0, 2, [batch_size]).astype("int32"),
    }


def _albert_tf_step(config, precision, xla, batch):
    """albert_tf's user path; precision DEFAULTS leaves precision and jit_compile to "auto"."""
    from albert_tf import precision as precision_lib
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.classifier import AlbertClassifier

    model = AlbertClassifier(AlbertModel(config), num_classes=2)
    if precision == DEFAULTS:
        model.compile(num_train_steps=1000)
        choice = precision_lib.resolve(log=False)
        note = f"compile() defaults = {choice.log_line()}"
    else:
        policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
        model.compile(num_train_steps=1000, precision=policy, jit_compile=xla)
        note = None
    x = {
        "input_word_ids": batch["ids"],
        "input_mask": batch["mask"],
        "input_type_ids": batch["types"],
    }
    return (lambda: model.train_on_batch(x, batch["labels"])), note


def _keras_hub_step(config, precision, xla, batch):
    import keras
    import keras_hub

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16" if precision == "bfloat16" else "float32")
    try:
        backbone = keras_hub.models.AlbertBackbone(
            vocabulary_size=config.vocab_size,
            num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads,
            embedding_dim=config.embedding_size,
            hidden_dim=config.hidden_size,
            intermediate_dim=config.intermediate_size,
            dropout=config.hidden_dropout_prob,
            max_sequence_length=config.max_position_embeddings,
        )
        model = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=None)
    finally:
        keras.config.set_dtype_policy(previous)
    model.compile(jit_compile=xla)
    x = {"token_ids": batch["ids"], "padding_mask": batch["mask"], "segment_ids": batch["types"]}
    return (lambda: model.train_on_batch(x, batch["labels"])), None


def _torch_step(config, precision, xla, batch):
    from albert_tf.benchmarks import torch_peer

    model = torch_peer.huggingface_model("AlbertForSequenceClassification", config, num_labels=2)
    inputs = {
        "input_ids": batch["ids"],
        "attention_mask": batch["mask"],
        "token_type_ids": batch["types"],
        "labels": batch["labels"],
    }
    return torch_peer.train_step(model, inputs, bfloat16=precision == "bfloat16"), None


STEP_BUILDERS = {"albert_tf": _albert_tf_step, "keras_hub": _keras_hub_step, "torch": _torch_step}


# ----------------------------------------------------------------------------- measuring
def settings(precisions, xla_modes):
    """[(precision, xla)] rows, then albert_tf's compile() defaults."""
    rows = [(p, x) for p in precisions for x in xla_modes]
    return rows + [(DEFAULTS, None)]


def run(preset, depths, batch_size, max_seq_length, steps, libraries, precisions, xla_modes):
    """{(depth, precision, xla): {library: result}} (see `measure`)."""
    import keras
    import tensorflow as tf

    from albert_tf.config import AlbertConfig

    tf.get_logger().setLevel("ERROR")  # each new model retraces: TF's warning says nothing new
    table = {}
    for depth in depths:
        config = AlbertConfig.from_preset(preset, num_hidden_layers=depth)
        batch = _batch(config, batch_size, max_seq_length)
        for precision, xla in settings(precisions, xla_modes):
            runs = {}
            for library in libraries:
                if precision == DEFAULTS and library != "albert_tf":
                    continue
                if library == "torch" and xla:
                    continue  # torch runs eager only
                build = STEP_BUILDERS[library]
                runs[library] = lambda b=build, p=precision, x=xla: b(config, p, x, batch)
            keras.utils.set_random_seed(0)
            table[(depth, precision, xla)] = timing.measure(runs, steps)
            keras.backend.clear_session()
            done = table[(depth, precision, xla)]
            cells = ", ".join(
                f"{TITLES[lib]} {r.get('error') or timing.cell(r)}" for lib, r in done.items()
            )
            print(f"measured {depth} layers, {_setting_name(precision, xla)}: {cells}", flush=True)
    return table


# ----------------------------------------------------------------------------- the table
def _setting_name(precision, xla):
    if precision == DEFAULTS:
        return "albert_tf compile() defaults"
    return f"{precision}, {'XLA' if xla else 'no XLA'}"


def markdown(table, libraries):
    """The table: first / steady-state median per library, albert_tf's steady time / the best
    peer's, and per depth a row of each library's best setting."""
    peers = [lib for lib in libraries if lib != "albert_tf"]
    header = ["layers", "setting"] + [f"{TITLES[lib]} first / steady" for lib in libraries]
    lines = [
        "| " + " | ".join(header + ["albert_tf / best peer: steady (first)"]) + " |",
        "|" + "---|" * (len(header) + 1),
    ]
    notes, depths = [], sorted({key[0] for key in table})
    for depth in depths:
        best = {}  # library -> (steady, setting)
        for (d, precision, xla), results in table.items():
            if d != depth:
                continue
            for lib, result in results.items():
                steady = timing.steady(result)
                if steady and precision != DEFAULTS and (lib not in best or steady < best[lib][0]):
                    best[lib] = (steady, _setting_name(precision, xla))
                if result.get("error"):
                    notes.append(
                        f"{depth} layers, {_setting_name(precision, xla)}, {TITLES[lib]}: "
                        f"{result['error']}"
                    )
                if result.get("note"):
                    notes.append(f"{depth} layers, {TITLES[lib]}: {result['note']}")
            name = _setting_name(precision, xla)
            if precision == "float32" and not xla and "torch" in libraries:
                name += " (torch eager)"
            if precision == "bfloat16" and not xla and "torch" in libraries:
                name += " (torch autocast)"
            ratio = timing.ratio(
                timing.steady(results.get("albert_tf")),
                [timing.steady(results.get(p)) for p in peers],
            )
            first = timing.ratio(
                timing.first(results.get("albert_tf")),
                [timing.first(results.get(p)) for p in peers],
            )
            ratio = f"{ratio} ({first})" if ratio else ""
            if precision == DEFAULTS:  # last row of the depth: against each peer's best setting
                ratio = timing.ratio(
                    timing.steady(results.get("albert_tf")),
                    [best[p][0] for p in peers if p in best],
                )
                ratio = f"{ratio} (vs best peer setting)" if ratio else ""
            cells = [timing.cell(results.get(lib)) for lib in libraries]
            lines.append(f"| {depth} | {name} | " + " | ".join(cells) + f" | {ratio} |")
        cells = [
            f"{timing.seconds(best[lib][0])} ({best[lib][1]})" if lib in best else ""
            for lib in libraries
        ]
        ratio = timing.ratio(
            best.get("albert_tf", (None,))[0], [best.get(p, (None,))[0] for p in peers]
        )
        lines.append(
            f"| {depth} | best setting of each (steady) | " + " | ".join(cells) + f" | {ratio} |"
        )
    return "\n".join(lines), notes


# ----------------------------------------------------------------------------- main
def _versions(libraries):
    names = ["tensorflow", "keras"]
    for lib in libraries:
        names += {"keras_hub": ["keras-hub"], "torch": ["torch", "transformers"]}.get(lib, [])
    return timing.versions(names)


def main(argv):
    del argv
    depths = cli.positive_ints("layers", FLAGS.layers)
    for flag, allowed in (
        ("libraries", LIBRARIES),
        ("precisions", ("float32", "bfloat16")),
        ("xla", ("off", "on")),
    ):
        unknown = [v for v in getattr(FLAGS, flag) if v not in allowed]
        if unknown or not getattr(FLAGS, flag):
            cli.fail(
                f"--{flag}={','.join(getattr(FLAGS, flag))}: expected some of {', '.join(allowed)}"
            )
    from albert_tf.config import list_presets

    if FLAGS.preset not in list_presets():
        cli.fail(f"--preset={FLAGS.preset!r} is not one of {', '.join(list_presets())}")
    libraries = timing.installed(FLAGS.libraries, NEEDS, TITLES)
    from albert_tf import precision as precision_lib

    load_before = os.getloadavg()
    table = run(
        FLAGS.preset,
        depths,
        FLAGS.batch_size,
        FLAGS.max_seq_length,
        FLAGS.steps,
        libraries,
        FLAGS.precisions,
        [x == "on" for x in FLAGS.xla],
    )
    load_after = os.getloadavg()
    text, notes = markdown(table, libraries)
    print(
        f"\n{FLAGS.preset} shapes, classifier fine-tuning step (forward, backward, optimizer), "
        f"batch {FLAGS.batch_size} x seq {FLAGS.max_seq_length}, first step / median of "
        f"{FLAGS.steps} steady steps; {_versions(libraries)}; {timing.cpu_name()}, "
        f"{os.cpu_count()} CPUs; auto here: {precision_lib.resolve(log=False).log_line()}; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after\n"
    )
    print(text)
    for note in notes:
        print(f"- {note}")


if __name__ == "__main__":
    cli.run(main)
