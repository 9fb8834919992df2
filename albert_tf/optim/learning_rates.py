"""The default peak fine-tuning learning rate of a model, by its size and the optimizer.

One rate does not fit every size: the paper's 2e-5 (Table 14, for base to xxlarge models) left
albert_tiny far below what it reaches at 1e-3, and 1e-3 makes the large models diverge. The
table below is the default of `AlbertHeadModel.compile(learning_rate=None)` and of the
fine-tuning scripts' `--learning_rate` (the runner logs the rate it chose and why); an explicit
rate always wins.

>>> default_learning_rate(128)[0], default_learning_rate(768)[0], default_learning_rate(4096)[0]
(0.001, 2e-05, 1e-05)
>>> default_learning_rate(128, "adamw_original")[0]
0.0001
>>> print(default_learning_rate(1024)[1])  # doctest: +ELLIPSIS
hidden size 1024 (base and large): the paper's Table 14 rate ...
"""

import collections

#: One row per size class: models whose hidden size is below `below` (None: any size) get
#: `rates[optimizer]`; `source` says where the numbers come from.
SizeClass = collections.namedtuple("SizeClass", ["below", "name", "rates", "source"])

FINETUNE_LEARNING_RATES = (
    SizeClass(
        768,
        "smaller than base",
        {"adamw": 1e-3, "adamw_original": 1e-4, "lamb": 3e-3},
        "the fine-tuning study of docs/finetune.md on albert_tiny (H=128): bias-corrected AdamW "
        "learned every task at 1e-3 and less at 1e-4; the original AdamWeightDecay collapses "
        "from 1e-3 (its best: 1e-4); LAMB needs 3e-3",
    ),
    SizeClass(
        2048,
        "base and large",
        {"adamw": 2e-5, "adamw_original": 2e-5, "lamb": 3e-4},
        "the paper's Table 14 rate for MRPC, STS-B and RACE (its range: 1e-5 to 5e-5); "
        "LAMB: the original code's suggestion (3e-4 to 5e-4)",
    ),
    SizeClass(
        None,
        "xlarge and xxlarge",
        {"adamw": 1e-5, "adamw_original": 1e-5, "lamb": 3e-4},
        "the low end of the paper's Table 14 (CoLA, SST-2, QNLI; the original README's rate "
        "for v2 models on RACE): xlarge v2 is reported to diverge or stay at chance at higher "
        "rates (google-research/albert #197, #207; 5e-6 if it still does)",
    ),
)


def default_learning_rate(hidden_size, optimizer="adamw"):
    """(peak learning rate, why) for fine-tuning a model of `hidden_size` with `optimizer`
    ("adamw", "adamw_original" or "lamb"; see `FINETUNE_LEARNING_RATES`)."""
    for size in FINETUNE_LEARNING_RATES:
        if size.below is None or hidden_size < size.below:
            break
    if optimizer not in size.rates:
        raise ValueError(f"optimizer must be one of {', '.join(size.rates)}, got {optimizer!r}")
    why = f"hidden size {hidden_size} ({size.name}): {size.source}"
    return size.rates[optimizer], why
