"""Prints our exact parameter counts beside the paper's (Tables 1, 3 and 4) as a markdown table.

python scripts/parameter_table.py --tables=1,3,4
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's C++ log: see albert_tf/cli.py
os.environ.setdefault("ALBERT_TF_LIGHT_IMPORT", "1")  # TensorFlow after the checks: see cli.py

from absl import flags  # noqa: E402

from albert_tf import cli  # noqa: E402
from albert_tf.config import AlbertConfig  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("tables", ["1", "3", "4"], "Which of the paper's tables to print (1, 3, 4).")

# (table, label, preset, overrides, paper figure in M, note)
_SHARING_NAMES = {
    "none": "not-shared",
    "all": "all-shared",
    "attention": "shared-attention",
    "ffn": "shared-FFN",
}
_ROWS = [
    ("1", "BERT base", "bert_base", {}, 108, ""),
    ("1", "BERT large", "bert_large", {}, 334, ""),
    ("1", "ALBERT base", "albert_base_v2", {}, 12, ""),
    ("1", "ALBERT large", "albert_large_v2", {}, 18, ""),
    ("1", "ALBERT xlarge", "albert_xlarge_v2", {}, 60, ""),
    (
        "1",
        "ALBERT xxlarge",
        "albert_xxlarge_v2",
        {},
        235,
        "paper: 235M (233M in the text); the released checkpoint has 222.6M (HF: 223M)",
    ),
]
_ROWS += [
    ("3", "ALBERT-base config", "albert_base_v2", {"embedding_size": e, "sharing": s}, paper, "")
    for s, figures in (("none", (87, 89, 93, 108)), ("all", (10, 12, 16, 31)))
    for e, paper in zip((64, 128, 256, 768), figures)
]
_ROWS += [
    ("4", "ALBERT-base config", "albert_base_v2", {"embedding_size": e, "sharing": s}, paper, "")
    for e, figures in ((768, (31, 83, 57, 108)), (128, (12, 64, 38, 89)))
    for s, paper in zip(("all", "attention", "ffn", "none"), figures)
]


def parameter_table(tables):
    """The markdown table for the given paper tables ("1", "3", "4")."""
    lines = [
        "| Table | Model | E | Sharing | Ours (backbone + pooler) | Ours (M) | "
        "Ours + MLM/SOP heads (M) | Paper (M) | Note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for table, label, preset, overrides, paper, note in _ROWS:
        if table not in tables:
            continue
        config = AlbertConfig.from_preset(preset, **overrides)
        n = config.num_parameters()
        heads = config.num_parameters(include_heads=True)
        if not note and abs(n - paper * 1e6) > 1.1e6:
            note = f"differs from the paper by {(n - paper * 1e6) / 1e6:+.2f}M (paper rounds)"
        lines.append(
            f"| {table} | {label} | {config.embedding_size} | "
            f"{_SHARING_NAMES[config.sharing]} | {n:,} | {n / 1e6:.2f} | "
            f"{heads / 1e6:.2f} | {paper} | {note} |"
        )
    return "\n".join(lines)


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.tables) - {"1", "3", "4"})
    if unknown:
        cli.fail(f"--tables: unknown table(s) {unknown}; choose from 1, 3, 4")
    print(parameter_table(set(FLAGS.tables)))


if __name__ == "__main__":
    cli.run(main)
