#!/usr/bin/env bash
# `make demo`: ALBERT from scratch on a laptop CPU in about ten minutes.
#
#   1. corpus     English docstrings of the installed tensorflow/keras/numpy (builtin:docstrings),
#                 split into training documents and held-out documents (every 20th document)
#   2. vocabulary an 8000-piece SentencePiece model trained on the training documents
#   3. data       masked-LM + sentence-order records, sequence length 64 (training documents
#                 read twice: dupe_factor 2, different splits, orders and masks)
#   4. pretrain   the albert_tiny preset with LAMB (flags/pretrain_tiny_cpu.flags)
#   5. evaluate   masked-LM and sentence-order accuracy on the held-out documents, beside the
#                 chance levels measured on the same data
#   6. fine-tune  scripts/demo_finetune.sh <export_dir> <spm_model> <output_dir>: a classifier
#                 trained with keras.Model.fit, exported for TF Serving, served from raw strings
#                 and exported to LiteRT (int8 dynamic-range), run on raw strings
#
# Everything goes under demo_output/ (override with DEMO_OUTPUT=...); full logs in demo_output/logs.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
OUT=${DEMO_OUTPUT:-demo_output}
export KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3} PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$(date +%s)
mkdir -p "$OUT/logs" "$OUT/corpus" "$OUT/spm" "$OUT/data"

elapsed() { local s=$(( $(date +%s) - START )); printf "%dm%02ds" $((s / 60)) $((s % 60)); }
header() { printf "\n==> [%s] %s   (elapsed %s)\n" "$1" "$2" "$(elapsed)"; }

# run LOG PATTERN COMMAND...: runs COMMAND with its full log in LOG, shows the log lines matching
# PATTERN without absl's prefix, and stops the demo (showing the log's tail) if COMMAND fails.
run() {
  local log=$1 pattern=$2
  shift 2
  set +e
  "$@" 2>&1 | tee "$log" | { grep --line-buffered -E "$pattern" \
      | sed -u -E 's/^[IWEF][0-9]{4} [0-9:.]+ +[0-9]+ [A-Za-z_0-9]+\.py:[0-9]+\] /    /'; true; }
  local status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "FAILED (exit $status): $*"
    echo "---- last lines of $log ----"
    tail -25 "$log"
    exit "$status"
  fi
}

header 1/6 "Corpus: builtin:docstrings, every 20th document held out for evaluation"
run "$OUT/logs/corpus.log" "held-out documents" "$PY" - "$OUT/corpus" <<'EOF'
import os, sys
from albert_tf.data.corpora import iter_documents

out = sys.argv[1]
counts = {"train": 0, "heldout": 0}
with open(os.path.join(out, "train.txt.tmp"), "w", encoding="utf-8") as train, \
        open(os.path.join(out, "heldout.txt.tmp"), "w", encoding="utf-8") as heldout:
    for i, sentences in enumerate(iter_documents("builtin:docstrings")):
        name, f = ("heldout", heldout) if i % 20 == 0 else ("train", train)
        f.write("\n".join(sentences) + "\n\n")
        counts[name] += 1
for name in counts:
    os.replace(os.path.join(out, f"{name}.txt.tmp"), os.path.join(out, f"{name}.txt"))
print(f"{counts['train']} training documents, {counts['heldout']} held-out documents in {out}")
EOF

header 2/6 "Vocabulary: 8000-piece SentencePiece model on the training documents"
run "$OUT/logs/tokenizer.log" "train_tokenizer.py|read [0-9]+ sentences" \
  "$PY" scripts/train_tokenizer.py --input="$OUT/corpus/train.txt" --vocab_size=8000 \
  --model_prefix="$OUT/spm/spm"

header 3/6 "Pretraining data: SOP pairs with n-gram masking, sequence length 64"
run "$OUT/logs/data_train.log" "Wrote [0-9]+ instances" \
  "$PY" scripts/create_pretraining_data.py --input_file="$OUT/corpus/train.txt" \
  --output_file="$OUT/data/train.tfrecord" --spm_model_file="$OUT/spm/spm.model" \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=2 --random_seed=12345
run "$OUT/logs/data_heldout.log" "Wrote [0-9]+ instances" \
  "$PY" scripts/create_pretraining_data.py --input_file="$OUT/corpus/heldout.txt" \
  --output_file="$OUT/data/heldout.tfrecord" --spm_model_file="$OUT/spm/spm.model" \
  --max_seq_length=64 --max_predictions_per_seq=10 --dupe_factor=1 --random_seed=54321

header 4/6 "Pretraining albert_tiny on this CPU (flags/pretrain_tiny_cpu.flags)"
rm -rf "$OUT/pretrain"  # a fresh run every time (an earlier run's checkpoints would be resumed)
run "$OUT/logs/pretrain.log" "runner.py|checkpointing.py:[0-9]+\] Saved|Exported|ERROR" \
  "$PY" scripts/run_pretraining.py --flagfile=flags/pretrain_tiny_cpu.flags \
  --input_file="$OUT/data/train.tfrecord" --eval_input_files="$OUT/data/heldout.tfrecord" \
  --spm_model_file="$OUT/spm/spm.model" --output_dir="$OUT/pretrain"

header 5/6 "Held-out evaluation"
"$PY" - "$OUT" <<'EOF'
import json, math, os, sys

out = sys.argv[1]
with open(os.path.join(out, "pretrain", "eval_results.json")) as f:
    r = json.load(f)
vocab = round(1 / r["masked_lm_uniform_baseline"])
mlm, mlm_chance = r["masked_lm_accuracy"], r["masked_lm_majority_baseline"]
sop, sop_chance = r["sentence_order_accuracy"], r["sentence_order_majority_baseline"]
print(f"  {int(r['examples'])} held-out examples ({int(r['masked_tokens'])} masked tokens) from documents "
      f"never seen in training, after {r['global_step']} steps:\n")
print(f"  {'':26}{'model':>9}   chance level on the same data")
print(f"  {'masked-LM accuracy':26}{100 * mlm:8.2f}%   {100 * mlm_chance:.2f}% (always the most frequent "
      f"masked token); {100 / vocab:.4f}% (uniform, 1/{vocab})")
print(f"  {'sentence-order accuracy':26}{100 * sop:8.2f}%   {100 * sop_chance:.2f}% (always the more "
      f"frequent label); 50% (coin flip)")
print(f"  {'masked-LM loss':26}{r['masked_lm_loss']:9.3f}   {math.log(vocab):.3f} (uniform guess, ln {vocab})")
prior_loss = -sum(q * math.log(q) for q in (sop_chance, 1 - sop_chance) if q > 0)
print(f"  {'sentence-order loss':26}{r['sentence_order_loss']:9.3f}   {prior_loss:.3f} (predicting the label "
      f"frequencies); {math.log(2):.3f} (coin flip, ln 2)")
ok_mlm, ok_sop = mlm > 2 * mlm_chance, sop > sop_chance + 0.05
print()
print(f"  masked-LM: {mlm / max(mlm_chance, 1e-9):.1f}x the majority-token rate "
      f"({'clearly above chance' if ok_mlm else 'NOT clearly above chance'}); sentence order: "
      f"{100 * (sop - sop_chance):+.1f} points over the majority label "
      f"({'clearly above chance' if ok_sop else 'NOT clearly above chance'})")
EOF

header 6/6 "Fine-tuning the pretrained model (scripts/demo_finetune.sh)"
bash scripts/demo_finetune.sh "$OUT/pretrain/export" "$OUT/spm/spm.model" "$OUT/finetune"

cat <<EOF

  Outputs under $OUT/:
    held-out metrics  $OUT/pretrain/eval_results.json
    checkpoints       $OUT/pretrain/checkpoints/  (rerun the pretraining command to resume)
    TensorBoard       .venv/bin/tensorboard --logdir $OUT/pretrain/summaries
    exported model    $OUT/pretrain/export/  (config.json, pretrainer.weights.h5, spm.model;
                      albert_tf.load("$OUT/pretrain/export"))
    fine-tuned model  $OUT/finetune/run/ and, for TF Serving, $OUT/finetune/serving/1/
    on-device model   $OUT/finetune/litert/model_int8_dynamic.tflite (LiteRT, raw text in;
                      litert_report.json beside it)
    logs              $OUT/logs/ and $OUT/finetune/run_classifier.log
    total time        $(elapsed)
EOF
