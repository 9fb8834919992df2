#!/usr/bin/env bash
# Fine-tuning demo (called at the end of scripts/demo.sh, or by hand):
#   bash scripts/demo_finetune.sh PRETRAINED_DIR SPM_MODEL [OUTPUT_DIR]
# PRETRAINED_DIR is a model directory written by albert_tf.save (config.json + weights).
# Task: which library (tensorflow, keras or numpy) a docstring paragraph comes from, built
# offline from the installed packages. Fine-tunes, reports held-out accuracy against the
# majority-class baseline, exports a SavedModel for TF Serving and classifies raw strings in a
# fresh process that imports only tensorflow and tensorflow_text.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PRETRAINED_DIR SPM_MODEL [OUTPUT_DIR]" >&2; exit 2
fi
PRETRAINED=$1
SPM=$2
OUT=${3:-demo_output/finetune}
PY=${PY:-.venv/bin/python}
if [ ! -f "$PRETRAINED/config.json" ]; then
  echo "demo_finetune: $PRETRAINED has no config.json (expected a directory written by albert_tf.save)" >&2
  exit 1
fi
if [ ! -f "$SPM" ]; then echo "demo_finetune: SentencePiece model not found: $SPM" >&2; exit 1; fi
rm -rf "$OUT"
mkdir -p "$OUT"

echo "== Fine-tuning on docstring-source (tensorflow / keras / numpy) =="
if ! "$PY" scripts/run_classifier.py --task_name=docstring-source \
    --init_checkpoint="$PRETRAINED" --spm_model_file="$SPM" --output_dir="$OUT/run" \
    --export_dir="$OUT/serving" --max_seq_length=64 \
    --train_batch_size=32 --eval_batch_size=64 \
    --num_train_steps=300 --save_checkpoints_steps=100 --classifier_dropout=0.1 \
    --verbose=2 --alsologtostderr > "$OUT/run_classifier.log" 2>&1; then
  tail -n 30 "$OUT/run_classifier.log" >&2
  echo "demo_finetune: run_classifier.py failed (full log: $OUT/run_classifier.log)" >&2
  exit 1
fi
grep -E "examples from|dev majority|eval at step|Loaded the best|SavedModel for" "$OUT/run_classifier.log" \
  | sed -E 's/^[IWE][0-9]{4} [0-9:.]+ +[0-9]+ [a-z_]+\.py:[0-9]+\] //'

"$PY" - "$OUT/run/eval_results.json" <<'PYEOF'
import json, sys
results = json.load(open(sys.argv[1]))
best = results["best"]
base = results["baselines"]
print(f"held-out accuracy {best['value']:.3f} (step {best['step']}) vs {base['dev_majority_class_rate']:.3f} "
      f"for always answering the dev set's majority class ({base['dev_majority_class']!r}) on "
      f"{results['history'][-1]['eval_num_examples']} dev examples")
PYEOF

VERSION_DIR="$OUT/serving/1"  # $OUT was emptied above, so this run exported version 1
echo "== Serving $VERSION_DIR in a fresh process (tensorflow + tensorflow_text only) =="
if ! TF_CPP_MIN_LOG_LEVEL=2 "$PY" - "$VERSION_DIR" 2> "$OUT/serve.log" <<'PYEOF'
import sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops TF Serving links)
model = tf.saved_model.load(sys.argv[1])
texts = ["Returns a tensor of the same shape and type as the input, with every element scaled.",
         "Layer that normalizes its inputs; the layer keeps moving statistics during training.",
         "Return an array of zeros with the same shape and dtype as a given array.",
         ""]
out = model.signatures["serving_default"](text=tf.constant(texts))
for text, name, probs in zip(texts, out["label_name"].numpy(), out["probabilities"].numpy()):
    print(f"{name.decode():>10}  p={probs.max():.2f}  {text[:70]!r}")
PYEOF
then
  cat "$OUT/serve.log" >&2
  echo "demo_finetune: loading the export failed" >&2
  exit 1
fi

echo "== On-device: LiteRT int8 (dynamic-range) export, raw text in (scripts/export_litert.py) =="
if ! "$PY" scripts/export_litert.py --model_dir="$OUT/run" --output_dir="$OUT/litert" \
    --variants=float32,int8_dynamic --max_eval_examples=500 > "$OUT/export_litert.log" 2>&1; then
  tail -n 30 "$OUT/export_litert.log" >&2
  echo "demo_finetune: export_litert.py failed (full log: $OUT/export_litert.log)" >&2
  exit 1
fi
# The table, and the warning of a variant below --min_agreement (0.99) if there is one.
grep -E "^(docstring-source|variant|float32|int8|reference)|below min_agreement" \
  "$OUT/export_litert.log"
if ! "$PY" - "$OUT/litert/model_int8_dynamic.tflite" "$OUT/run/finetune.json" \
    2> "$OUT/litert_run.log" <<'PYEOF'
import json, os, sys
import numpy as np
from albert_tf.export.litert import interpreter  # ai-edge-litert + tensorflow-text's TFLite ops
path = sys.argv[1]
labels = json.load(open(sys.argv[2]))["task"]["labels"]
texts = ["Returns a tensor of the same shape and type as the input, with every element scaled.",
         "Layer that normalizes its inputs; the layer keeps moving statistics during training.",
         "Return an array of zeros with the same shape and dtype as a given array.",
         ""]
out = interpreter(path).get_signature_runner()(text=np.array([t.encode() for t in texts], object))
print(f"{path}: {os.path.getsize(path) / 2**20:.2f} MiB")
for text, label, probs in zip(texts, out["label"], out["probabilities"]):
    print(f"{labels[label]:>10}  p={probs.max():.2f}  {text[:70]!r}")
PYEOF
then
  cat "$OUT/litert_run.log" >&2
  echo "demo_finetune: running the LiteRT model failed (pip install ai-edge-litert)" >&2
  exit 1
fi
