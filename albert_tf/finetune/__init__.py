"""albert_tf.finetune: fine-tuning as a library.

- `task.FinetuneTask`: the task interface (data, head model, metrics, predictions, export).
- `params.FinetuneParams`: every task-independent setting (the scripts' flags come from it).
- `runner.run_finetuning(params, task)`: fit in checkpoint-sized chunks, evaluation, best
  weights, exact resume, predictions, export.
- `classification.SentenceClassificationTask` (GLUE, files), `tagging.TokenClassificationTask`
  (CoNLL / JSONL tagging, NER).
"""

from albert_tf._lazy import lazy_attributes  # noqa: E402

__getattr__, __dir__ = lazy_attributes(__name__)
