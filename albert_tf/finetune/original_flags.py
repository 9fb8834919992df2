"""The flags of the original google-research/albert fine-tuning scripts, on our scripts.

One declarative table per original script, original flag name -> rule:
`CLASSIFIER` (run_classifier.py), `SQUAD` (run_squad_v1.py and run_squad_v2.py, both served by
scripts/run_squad.py) and `RACE` (run_race.py). The rules:

- `Same`: our flag of the same name has the original's meaning;
- `Maps(target)`: the value sets our setting `target` (a flag of `FinetuneParams` or of the
  task's data settings);
- `NoEffect(why)`: accepted; a log line says that it has no effect here, and why;
- `Refused(instead)`: a one-line error naming what to use instead;
- `UseTpu`, `IterationsPerLoop`, `AlbertConfigFile`, `InitCheckpoint`, `TaskName`: the few that
  need more than that (each class says what it does).

`define_original_flags(table)` declares the original flags that are not ours (default None:
absl knows which were given); `apply_original_flags(table)`, after parsing, refuses, logs and
writes their values onto our flags. An original flag and ours (or two original flags) giving one
setting two different values is an InvalidFlagError naming both.

>>> from absl import flags
>>> from albert_tf.finetune.params import FinetuneParams
>>> from albert_tf.finetune.task_data import SquadData
>>> from albert_tf.settings import define_flags, from_flags
>>> values = flags.FlagValues()
>>> define_flags(FinetuneParams, values)
>>> define_flags(SquadData, values)
>>> define_original_flags(SQUAD, values)
>>> _ = values(["run_squad_v2.py", "--output_dir=out", "--preset=albert_tiny",
...             "--predict_batch_size=16", "--dropout_prob=0.2", "--use_tpu", "--tpu_name=t1"])
>>> apply_original_flags(SQUAD, values)
>>> p = from_flags(FinetuneParams, values)
>>> p.eval_batch_size, p.classifier_dropout, p.strategy, p.tpu
(16, 0.2, 'tpu', 't1')
"""

import math
import os

from absl import flags, logging

from albert_tf import input_paths
from albert_tf.settings import InvalidFlagError

#: Where a TF1 checkpoint given as --init_checkpoint is converted to (under --output_dir).
CONVERTED_DIR = "converted_init_checkpoint"

_DEFINE = {
    "bool": flags.DEFINE_bool,
    "int": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "string": flags.DEFINE_string,
}


class _Assigner:
    """Writes values onto our flags, refusing two different values for one setting."""

    def __init__(self, flag_values):
        self.flag_values = flag_values
        self.sources = {}  # our flag -> the original flag that set it

    def given(self, name):
        return name in self.flag_values and self.flag_values[name].present

    def value(self, name):
        return self.flag_values[name].value

    def assign(self, target, value, source):
        """Sets our flag `target` to `value` for the original flag `source`."""
        if target in self.sources:
            earlier = self.sources[target]
            if self.value(target) != value:
                raise InvalidFlagError(
                    f"--{source}={value} and --{earlier}={self.value(target)} both set "
                    f"--{target} here; give one value"
                )
            return
        if self.given(target) and self.value(target) != value:
            raise InvalidFlagError(
                f"--{source}={value} means --{target}={value} here, but "
                f"--{target}={self.value(target)} is given too; give one value"
            )
        self.flag_values[target].value = value
        self.sources[target] = source

    def replace(self, target, value):
        """Sets our flag `target` to `value` (the same setting, in our format)."""
        self.flag_values[target].value = value


class Same:
    """Our flag of the same name has the original's meaning (`note`: a difference worth
    knowing, for --help and the docs)."""

    kind = None
    late = False

    def __init__(self, note=""):
        self.note = note

    def describe(self):
        return self.note or "the same flag here"

    def apply(self, name, value, assigner):
        del name, value, assigner


class Maps:
    """The original flag sets our setting `target` (its value converted by `convert`)."""

    late = False

    def __init__(self, kind, target, convert=None, note=""):
        self.kind, self.target, self.convert, self.note = kind, target, convert, note

    def describe(self):
        return f"sets --{self.target}" + (f" ({self.note})" if self.note else "")

    def apply(self, name, value, assigner):
        assigner.assign(self.target, self.convert(value) if self.convert else value, name)


class NoEffect:
    """Accepted; logs that it has no effect here, and `why`."""

    late = False

    def __init__(self, kind, why):
        self.kind, self.why = kind, why

    def describe(self):
        return f"accepted, no effect: {self.why}"

    def apply(self, name, value, assigner):
        del assigner
        logging.warning("--%s=%s has no effect here: %s", name, value, self.why)


class Refused:
    """Refused with a one-line error naming what to use `instead`."""

    late = False

    def __init__(self, kind, instead):
        self.kind, self.instead = kind, instead

    def describe(self):
        return f"refused: {self.instead}"

    def apply(self, name, value, assigner):
        del value, assigner
        raise InvalidFlagError(f"--{name} is not supported: {self.instead}")


class UseTpu:
    """--use_tpu: --strategy=tpu; --use_tpu=false: no effect (refused with --strategy=tpu)."""

    kind, late = "bool", False

    def describe(self):
        return "true: sets --strategy=tpu; false: the default strategy"

    def apply(self, name, value, assigner):
        if value:
            assigner.assign("strategy", "tpu", name)
        elif assigner.value("strategy") == "tpu":
            raise InvalidFlagError("--use_tpu=false contradicts --strategy=tpu; give one")


class IterationsPerLoop:
    """On TPU: --steps_per_execution, made to divide --save_checkpoints_steps (and
    --num_train_steps) as the original's min(iterations_per_loop, save_checkpoints_steps) does;
    elsewhere no effect (the original's Estimator ignores it off TPU)."""

    kind, late = "int", True  # after --use_tpu and the step flags

    def describe(self):
        return (
            "on TPU sets --steps_per_execution (its greatest common divisor with "
            "--save_checkpoints_steps and --num_train_steps); no effect elsewhere"
        )

    def apply(self, name, value, assigner):
        if value < 1:
            raise InvalidFlagError(f"--{name} must be >= 1, got {value}")
        if assigner.value("strategy") != "tpu":
            logging.warning("--%s=%d has no effect off TPU (as in the original)", name, value)
            return
        steps = math.gcd(value, assigner.value("save_checkpoints_steps"))
        if assigner.value("num_train_epochs") is None:
            steps = math.gcd(steps, assigner.value("num_train_steps"))
        if steps != value:
            logging.info(
                "--%s=%d -> --steps_per_execution=%d (it must divide --save_checkpoints_steps "
                "and --num_train_steps)",
                name,
                value,
                steps,
            )
        assigner.assign("steps_per_execution", steps, name)


def _is_tf1_checkpoint(path):
    """Whether `path` is an original (TF1) checkpoint: a prefix with an .index file, or a
    directory holding one and no model directory's config.json (local paths: no TensorFlow)."""
    gfile = input_paths.gfile_for(path)
    if gfile.exists(path + ".index"):
        return True
    if not gfile.isdir(path):
        return False
    names = gfile.listdir(path)
    if not any(n.endswith(".index") for n in names):
        return False  # our model directories hold none: decided without TensorFlow
    from albert_tf.models import model_dir

    return model_dir.CONFIG_FILE not in names


def conversion_key(checkpoint, config_file=None):
    """16 hex digits naming the conversion of the TF1 `checkpoint` (a prefix, or a directory
    holding one) with `config_file`: a hash of the checkpoint's .index file (which holds a
    checksum of every tensor) and of the config's bytes."""
    import hashlib

    import tensorflow as tf

    from albert_tf.train.warm_start import checkpoint_prefix

    prefix = checkpoint_prefix(checkpoint)
    if prefix is not None:
        indexes = [prefix + ".index"]
    else:  # a directory without a `checkpoint` state file: every checkpoint in it
        indexes = sorted(tf.io.gfile.glob(os.path.join(checkpoint, "*.index")))
    digest = hashlib.sha256()
    for path in (*indexes, config_file):
        if path and tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path, "rb") as f:
                digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class InitCheckpoint:
    """--init_checkpoint: our model directory, or the original's TF1 checkpoint (prefix, or its
    directory), converted with --albert_config_file (default: the albert_config.json beside
    it) into OUTPUT_DIR/converted_init_checkpoint/KEY, which is then used. KEY is
    `conversion_key` of the checkpoint and config: a re-run with the same ones reuses the
    conversion, other ones get their own (and the run record then names the difference)."""

    kind, late = None, True  # after --albert_config_file was checked

    def describe(self):
        return (
            "the same flag; an original TF1 checkpoint is converted (with --albert_config_file) "
            f"into OUTPUT_DIR/{CONVERTED_DIR} and used"
        )

    def apply(self, name, value, assigner):
        from albert_tf import sources

        named = sources.is_named(value) and not value.startswith("gs://")
        if not value or named or not _is_tf1_checkpoint(value):
            return  # a name or address: resolved (fetched, converted, cached) by the runner
        import tensorflow as tf

        from albert_tf.convert.checkpoint import convert_checkpoint
        from albert_tf.models import model_dir

        output_dir = assigner.value("output_dir")
        if not output_dir:
            raise InvalidFlagError("--output_dir is required")
        config_file = assigner.value("albert_config_file")
        target = os.path.join(output_dir, CONVERTED_DIR, conversion_key(value, config_file))
        if tf.io.gfile.exists(os.path.join(target, model_dir.CONFIG_FILE)):
            logging.info("--%s=%s: using its conversion in %s", name, value, target)
        else:
            logging.info(
                "--%s=%s is an original TF1 checkpoint: converting it into %s", name, value, target
            )
            try:
                convert_checkpoint(
                    "original",
                    value,
                    target,
                    config_file=config_file,
                    spm_model=assigner.value("spm_model_file"),
                )
            except (ValueError, TypeError) as e:
                message = " ".join(str(e).split())
                raise InvalidFlagError(f"--{name}={value}: {message}") from None
        assigner.replace(name, target)


class AlbertConfigFile:
    """--albert_config_file: the config of an original --init_checkpoint (see
    `InitCheckpoint`); with our model directory it must equal the directory's config; without
    --init_checkpoint (random initialisation) it is refused in favour of --preset."""

    kind, late = "string", True  # after --albert_hub_module_handle set --init_checkpoint

    def describe(self):
        return (
            "the config of an original TF1 --init_checkpoint (converted); with a model directory "
            "it must match its config.json; without --init_checkpoint refused: use --preset"
        )

    def apply(self, name, value, assigner):
        init = assigner.value("init_checkpoint")
        if not init:
            raise InvalidFlagError(
                f"--{name} without --init_checkpoint (random initialisation) is not supported: "
                "use --preset, or give the pretrained --init_checkpoint"
            )
        from albert_tf import sources

        if sources.is_named(init):
            logging.info(
                "--%s=%s has no effect: the named model %s brings its own config", name, value, init
            )
            return
        if _is_tf1_checkpoint(init):
            return  # read by InitCheckpoint's conversion
        import tensorflow as tf

        from albert_tf.config import AlbertConfig
        from albert_tf.convert.original import read_original_config
        from albert_tf.models import model_dir

        own_path = os.path.join(init, model_dir.CONFIG_FILE)
        if not tf.io.gfile.exists(own_path):
            return  # the runner names what --init_checkpoint lacks
        try:
            given = read_original_config(value).to_dict()
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidFlagError(f"--{name}={value}: {' '.join(str(e).split())}") from None
        own = AlbertConfig.from_json_file(own_path).to_dict()
        differ = sorted(k for k in set(given) | set(own) if given.get(k) != own.get(k))
        if differ:
            raise InvalidFlagError(
                f"--{name}={value} differs from --init_checkpoint's {model_dir.CONFIG_FILE} in "
                f"{', '.join(differ)}; the model directory's config is used: drop --{name}"
            )


class SpmModelFile:
    """--spm_model_file: the same flag; the original Colab's placeholder "from_tf_hub" (with
    --albert_hub_module_handle) means the model's own SentencePiece model, as here without it."""

    kind, late = None, False

    def describe(self):
        return 'the same flag; "from_tf_hub" means the model\'s own spm.model'

    def apply(self, name, value, assigner):
        if value == "from_tf_hub":
            logging.info("--%s=from_tf_hub: using the model's own SentencePiece model", name)
            assigner.replace(name, None)


class TaskName:
    """run_race.py's --task_name: only "race" (any case)."""

    kind, late = "string", False

    def describe(self):
        return "only race (the default): scripts/run_race.py runs RACE"

    def apply(self, name, value, assigner):
        del assigner
        if value.lower() != "race":
            raise InvalidFlagError(
                f"--{name}={value}: run_race.py runs RACE only; GLUE tasks are "
                "scripts/run_classifier.py --task_name"
            )


_NOTHING_TO_CACHE = "features are built in memory from the data files on every run"
_SQUAD_CACHE = "features are cached under --feature_cache_dir, keyed by every setting"
_HUB = (
    "a TF Hub handle https://tfhub.dev/google/albert_<size>/<1|2|3> names the same weights as "
    "the release archive albert_<size>_v1 (1) or _v2 (2, 3), which is fetched and used"
)
_VOCAB = "the SentencePiece model (--spm_model_file or the model directory's) is the vocabulary"

# The flags every original fine-tuning script has.
_COMMON = {
    "albert_config_file": AlbertConfigFile(),
    "vocab_file": NoEffect("string", _VOCAB),
    "output_dir": Same(),
    "init_checkpoint": InitCheckpoint(),
    "albert_hub_module_handle": Maps("string", "init_checkpoint", note=_HUB),
    "spm_model_file": SpmModelFile(),
    "do_lower_case": Same(),
    "max_seq_length": Same(),
    "do_train": Same("default true here"),
    "do_predict": Same(),
    "train_batch_size": Same(),
    "predict_batch_size": Maps("int", "eval_batch_size", note="our batch size for both"),
    "learning_rate": Same(),
    "save_checkpoints_steps": Same(),
    "iterations_per_loop": IterationsPerLoop(),
    "use_tpu": UseTpu(),
    "tpu_name": Maps("string", "tpu"),
    "tpu_zone": NoEffect("string", "the TPU is found by --tpu (a name or grpc:// address)"),
    "gcp_project": NoEffect("string", "the TPU is found by --tpu (a name or grpc:// address)"),
    "master": Maps("string", "tpu", note="the TPU's address"),
    "num_tpu_cores": NoEffect("int", "--strategy=tpu uses every core of the TPU"),
}

_OPTIMIZER_NOTE = (
    "adamw here is bias-corrected AdamW (chosen by measurement); the original's adamw "
    "(no bias correction) is --optimizer=adamw_original"
)

CLASSIFIER = {
    **_COMMON,
    "data_dir": Same(),
    "task_name": Same(),
    "cached_dir": NoEffect("string", _NOTHING_TO_CACHE),
    "do_eval": Same("default true here"),
    "eval_batch_size": Same(),
    "train_step": Maps("int", "num_train_steps"),
    "warmup_step": Maps("int", "warmup_steps"),
    "keep_checkpoint_max": Same("the original's was unused (it kept every checkpoint)"),
    "optimizer": Same(_OPTIMIZER_NOTE),
    "export_dir": Same("a TF Serving SavedModel taking raw text (not tf.Example)"),
    "threshold_to_export": Refused(
        "float",
        "the exported model returns probabilities; compare them with the threshold in the client",
    ),
}

SQUAD = {
    **_COMMON,
    "train_file": Same(),
    "predict_file": Same(),
    "train_feature_file": NoEffect("string", _SQUAD_CACHE),
    "predict_feature_file": NoEffect("string", _SQUAD_CACHE),
    "predict_feature_left_file": NoEffect("string", _SQUAD_CACHE),
    "do_predict": Same(
        "answers --predict_file (predictions.json, nbest_predictions.json, null_odds.json) "
        "and scores it when it has answers, as --do_eval"
    ),
    "doc_stride": Same(),
    "max_query_length": Same(),
    "num_train_epochs": Same(),
    "warmup_proportion": Same(),
    "n_best_size": Same(),
    "max_answer_length": Same(),
    "use_einsum": NoEffect(
        "bool", "the graphs here convert to LiteRT as they are (scripts/export_litert.py)"
    ),
    "export_dir": Same(
        "a TF Serving SavedModel taking raw text; the LiteRT model is scripts/export_litert.py"
    ),
    "start_n_top": Same(),
    "end_n_top": Same(),
    "dropout_prob": Maps("float", "classifier_dropout", note="v2: the answer-class head's"),
}

RACE = {
    **_COMMON,
    "data_dir": Same(),
    "task_name": TaskName(),
    "train_file": NoEffect("string", _NOTHING_TO_CACHE),
    "eval_file": NoEffect("string", _NOTHING_TO_CACHE),
    "predict_file": NoEffect("string", _NOTHING_TO_CACHE),
    "dropout_prob": Maps("float", "classifier_dropout"),
    "max_qa_length": Same(),
    "num_keep_checkpoint": Maps("int", "keep_checkpoint_max"),
    "high_only": Same(),
    "middle_only": Same(),
    "do_eval": Same(),
    "eval_batch_size": Same(),
    "train_step": Maps("int", "num_train_steps"),
    "warmup_step": Maps("int", "warmup_steps"),
}

#: Original script name -> its table.
TABLES = {
    "run_classifier.py": CLASSIFIER,
    "run_squad_v1.py": SQUAD,
    "run_squad_v2.py": SQUAD,
    "run_race.py": RACE,
}


def define_original_flags(table, flag_values=None):
    """Declares the flags of `table` that are not ours (default None; help: what they do)."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    for name, rule in table.items():
        if rule.kind is None:
            if name not in flag_values:
                raise TypeError(f"--{name} is marked as ours but is not defined")
            continue
        _DEFINE[rule.kind](
            name, None, f"The original's --{name}: {rule.describe()}.", flag_values=flag_values
        )


def apply_original_flags(table, flag_values=None):
    """Applies the original flags given on the command line (see the module docstring);
    raises InvalidFlagError naming the flag."""
    flag_values = flags.FLAGS if flag_values is None else flag_values
    assigner = _Assigner(flag_values)
    for late in (False, True):
        for name, rule in table.items():
            ours = rule.kind is None  # applied whether given or not (Same does nothing)
            if rule.late == late and (ours or assigner.given(name)):
                rule.apply(name, flag_values[name].value, assigner)
