"""Wall time of the checkpoint converters on a randomly initialised preset model.

`measure(preset, directory)` builds an `AlbertPretrainer` of the preset's shapes (random
weights, no download), then times `to_original`, `from_original`, `to_huggingface` and
`from_huggingface`, each reading what the previous call wrote under `directory`. The `from_*`
calls build their model, so their times include that. `table` formats the results as markdown.

>>> print(table([{"preset": "albert_tiny", "parameters": 1_234_567, "to_original": 0.5,
...     "from_original": 1.25, "to_huggingface": 0.5, "from_huggingface": 1.5}]))
| preset (params incl. heads) | to_original | from_original | to_huggingface | from_huggingface |
|---|---|---|---|---|
| albert_tiny (1.23M) | 0.500 s | 1.25 s | 0.500 s | 1.50 s |
"""

import os
import statistics
import time

from albert_tf.benchmarks import timing

CALLS = ("to_original", "from_original", "to_huggingface", "from_huggingface")


def _timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def measure(preset, directory, repeats=1):
    """{"preset", "parameters", and per call of `CALLS` the median seconds of `repeats` runs}
    for a random `preset` model; the checkpoints go under `directory`."""
    from albert_tf.config import AlbertConfig
    from albert_tf.convert import from_huggingface, from_original, to_huggingface, to_original
    from albert_tf.models.backbone import AlbertModel
    from albert_tf.models.pretrainer import AlbertPretrainer

    pretrainer = AlbertPretrainer(AlbertModel(AlbertConfig.from_preset(preset)))
    original, huggingface = os.path.join(directory, "original"), os.path.join(directory, "hf")
    times = {call: [] for call in CALLS}
    for _ in range(repeats):
        times["to_original"].append(_timed(to_original, pretrainer, original))
        times["from_original"].append(_timed(from_original, original))
        times["to_huggingface"].append(_timed(to_huggingface, pretrainer, huggingface))
        times["from_huggingface"].append(_timed(from_huggingface, huggingface))
    result = {"preset": preset, "parameters": pretrainer.count_params()}
    result.update({call: statistics.median(values) for call, values in times.items()})
    return result


def table(results):
    """The markdown table of `measure` results, one row per preset."""
    lines = [
        f"| preset (params incl. heads) | {' | '.join(CALLS)} |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        cells = " | ".join(timing.seconds(r[call]) for call in CALLS)
        lines.append(f"| {r['preset']} ({r['parameters'] / 1e6:.2f}M) | {cells} |")
    return "\n".join(lines)
