"""Pretrains ALBERT (masked-LM + sentence-order prediction) with LAMB under any tf.distribute strategy.

Flags keep the original run_pretraining.py names. Restarting the same command resumes from the
newest checkpoint in --output_dir. Examples:

  # the tiny CPU demo recipe
  python scripts/run_pretraining.py --flagfile=flags/pretrain_tiny_cpu.flags \
      --input_file=demo_output/data/train-*.tfrecord --output_dir=demo_output/pretrain

  # ALBERT-base as in the paper, on a Cloud TPU VM
  python scripts/run_pretraining.py --flagfile=flags/pretrain_albert_base_v2.flags \
      --input_file=gs://bucket/data/train-* --output_dir=gs://bucket/albert_base --tpu=local
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py

from absl import flags, logging  # noqa: E402

from albert_tf import cli  # noqa: E402

F = flags.FLAGS

# --- model and data (original names)
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model to pretrain (original or "
                    "Hugging Face dialect). Exactly one of --albert_config_file and --preset.")
flags.DEFINE_string("preset", None, "Named model config instead of --albert_config_file, e.g. albert_base_v2, "
                    "albert_tiny (see albert_tf.config.list_presets()).")
flags.DEFINE_string("input_file", None, "Training TFRecords from create_pretraining_data.py: globs or a "
                    "comma-separated list (gs:// allowed).")
flags.DEFINE_string("output_dir", None, "Where checkpoints/, summaries/, eval_results.json and export/ go "
                    "(gs:// allowed). A run restarted with the same --output_dir resumes.")
flags.DEFINE_string("init_checkpoint", None, "Warm start: a saved albert_tf model directory (e.g. a converted "
                    "release) or a training checkpoint (ckpt-N prefix or its directory). Ignored when "
                    "--output_dir already holds a checkpoint.")
flags.DEFINE_bool("init_from_group0", False, "With --init_checkpoint: copy the source's group 0 into every "
                  "group of a model with more groups.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model: copied into the export (so fine-tuning "
                    "finds the vocabulary) and used by --dynamic_masking.")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the records (must match the data).")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence (must match the data).")
flags.DEFINE_bool("dynamic_masking", False, "Mask on the fly (fresh masks every epoch) instead of reading the "
                  "records' masks; needs --spm_model_file.")
# --- optimisation (original names)
flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size (split over the replicas).")
flags.DEFINE_integer("eval_batch_size", 64, "Global evaluation batch size.")
flags.DEFINE_enum("optimizer", "lamb", ["lamb", "adamw"], "The original's LAMB or AdamWeightDecay.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay after warmup (1.0 = linear to 0).")
flags.DEFINE_integer("num_train_steps", 125000, "Total training steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warmup steps (0: none).")
flags.DEFINE_integer("start_warmup_step", 0, "Step at which warmup starts (the decay uses the raw step).")
flags.DEFINE_float("clip_norm", 1.0, "Clip the all-reduced gradient to this global norm (0: no clipping).")
flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay (LayerNorm and biases excluded).")
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16"], "Compute precision; mixed_bfloat16 "
                  "keeps float32 variables, LayerNorm, softmax and losses.")
# --- checkpoints, evaluation, loop
flags.DEFINE_integer("save_checkpoints_steps", 5000, "Save a checkpoint every this many steps (and at the end).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "How many recent checkpoints to keep.")
flags.DEFINE_integer("steps_per_loop", 1000, "Steps per host loop (one tf.function call; the original's "
                     "iterations_per_loop). One log line and summary per loop.")
flags.DEFINE_string("eval_input_files", None, "Held-out TFRecords for evaluation (globs or comma list).")
flags.DEFINE_integer("eval_every_steps", 0, "Evaluate every this many steps (0: only at the end).")
flags.DEFINE_integer("max_eval_steps", 100, "At most this many eval batches per evaluation.")
flags.DEFINE_integer("seed", 12345, "Seed of the initial weights and the input order (-1: unseeded).")
flags.DEFINE_enum("input_resume", "skip", ["skip", "reshuffle"], "On resume, skip the input already consumed "
                  "(exact) or start a fresh order seeded by the step (no re-reading; for huge runs).")
flags.DEFINE_bool("export", True, "Save the pretrained model for fine-tuning to <output_dir>/export at the end.")
# --- distribution
flags.DEFINE_enum("strategy", "one_device", ["tpu", "multi_worker", "mirrored", "one_device"],
                  "tf.distribute strategy: tpu (TPUStrategy), multi_worker (MultiWorkerMirroredStrategy, "
                  "cluster from TF_CONFIG), mirrored (local GPUs or --logical_cpus), one_device.")
flags.DEFINE_string("tpu", None, "TPU name or grpc:// address for --strategy=tpu (default $TPU_NAME, else "
                    "'local', i.e. this TPU VM).")
flags.DEFINE_integer("logical_cpus", 0, "With --strategy=mirrored on a CPU host: mirror over this many "
                     "logical CPU devices (testing and benchmarking).")
flags.DEFINE_bool("jit_compile", True, "XLA-compile the forward/backward pass off TPU.")

flags.mark_flags_as_required(["input_file", "output_dir"])


def params_from_flags():
    """PretrainingParams from the flags (every field has a flag of the same name)."""
    import dataclasses

    from albert_tf.train.runner import PretrainingParams

    values = {field.name: getattr(F, field.name) for field in dataclasses.fields(PretrainingParams)}
    values["seed"] = None if F.seed < 0 else F.seed
    return PretrainingParams(**values)


def main(argv):
    del argv  # cli.run refuses positional arguments
    from albert_tf.train import runner

    result = runner.run_pretraining(params_from_flags())  # errors and exit codes: albert_tf.cli
    logging.info("Done at step %d. Checkpoints: %s  TensorBoard: %s%s", result["global_step"],
                 os.path.dirname(result["checkpoint"] or F.output_dir), result["summaries"],
                 f"  Export: {result['export']}" if "export" in result else "")


if __name__ == "__main__":
    cli.run(main)
