#!/usr/bin/env bash
# Short pretraining runs of the demo recipe at several optimizers and learning rates, each
# evaluated on held-out records: the measurement behind flags/pretrain_tiny_cpu.flags.
#
#   bash scripts/sweep_learning_rate.sh DATA_DIR SPM_MODEL OUTPUT_DIR [STEPS] [SETTINGS...]
#
# DATA_DIR holds train.tfrecord and heldout.tfrecord at the recipe's shapes (`make demo` writes
# them to demo_output/data). Each SETTING is OPTIMIZER:LEARNING_RATE (default: lamb at 0.003,
# 0.005, 0.01 and 0.02, adamw at 2e-3); STEPS defaults to 600, with 10% warmup. Prints one row
# per setting: held-out masked-LM and sentence-order accuracy beside their majority baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then
  sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
DATA=$1 SPM=$2 OUT=$3
STEPS=${4:-600}
shift $(( $# < 4 ? $# : 4 ))
SETTINGS=("$@")
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=(lamb:0.003 lamb:0.005 lamb:0.01 lamb:0.02 adamw:2e-3)
PY=${PY:-.venv/bin/python}
export KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
for f in "$DATA/train.tfrecord" "$DATA/heldout.tfrecord" "$SPM"; do
  [ -f "$f" ] || { echo "sweep_learning_rate: not found: $f" >&2; exit 1; }
done
mkdir -p "$OUT"

for setting in "${SETTINGS[@]}"; do
  optimizer=${setting%%:*} rate=${setting#*:}
  run="$OUT/${optimizer}_${rate}"
  rm -rf "$run"
  echo "== $optimizer at $rate, $STEPS steps (log: $run.log)"
  if ! "$PY" scripts/run_pretraining.py --flagfile=flags/pretrain_tiny_cpu.flags \
      --input_file="$DATA/train.tfrecord" --eval_input_files="$DATA/heldout.tfrecord" \
      --spm_model_file="$SPM" --output_dir="$run" --optimizer="$optimizer" \
      --learning_rate="$rate" --num_train_steps="$STEPS" --num_warmup_steps=$(( STEPS / 10 )) \
      --eval_every_steps="$STEPS" --save_checkpoints_steps="$STEPS" --noexport > "$run.log" 2>&1; then
    tail -20 "$run.log" >&2
    echo "sweep_learning_rate: the run $optimizer:$rate failed (log: $run.log)" >&2
    exit 1
  fi
done

"$PY" - "$OUT" "${SETTINGS[@]}" <<'EOF'
import json, os, sys

out, settings = sys.argv[1], sys.argv[2:]
print(f"\n{'optimizer':10}{'rate':>8}{'MLM acc':>10}{'(majority)':>12}{'SOP acc':>10}{'(majority)':>12}")
for setting in settings:
    optimizer, rate = setting.split(":", 1)
    with open(os.path.join(out, f"{optimizer}_{rate}", "eval_results.json")) as f:
        r = json.load(f)
    print(f"{optimizer:10}{rate:>8}{100 * r['masked_lm_accuracy']:9.2f}%{100 * r['masked_lm_majority_baseline']:11.2f}%"
          f"{100 * r['sentence_order_accuracy']:9.2f}%{100 * r['sentence_order_majority_baseline']:11.2f}%")
EOF
