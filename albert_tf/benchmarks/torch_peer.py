"""The Hugging Face / torch peer of the benchmarks: a transformers ALBERT model from an
`AlbertConfig` (random weights, no downloads) and its training step as a torch user writes it:
eager, the forward pass under `torch.autocast("cpu", bfloat16)` for bf16, `loss.backward()`,
a torch AdamW step. torch and transformers are imported on first use (the `bench` extra).

>>> from albert_tf.config import AlbertConfig
>>> model = huggingface_model("AlbertForPreTraining", AlbertConfig.from_preset("albert_tiny"))
... # doctest: +SKIP
>>> step = train_step(model, inputs, bfloat16=True)  # doctest: +SKIP
>>> loss = step()                                     # doctest: +SKIP
"""


def huggingface_model(class_name, config, seed=0, **overrides):
    """transformers.`class_name` (e.g. "AlbertForPreTraining") with random weights for the
    `AlbertConfig` `config` (`overrides`: more transformers config fields, e.g. num_labels),
    in training mode."""
    import torch
    import transformers

    from albert_tf.convert.huggingface import huggingface_config

    torch.manual_seed(seed)
    hf_config = transformers.AlbertConfig(**huggingface_config(config), **overrides)
    model = getattr(transformers, class_name)(hf_config)
    model.train()
    return model


def train_step(model, inputs, bfloat16, learning_rate=2e-5):
    """A zero-argument function running one training step of `model` on the dict of numpy
    arrays `inputs` (its keyword arguments, labels included): forward (under bf16 autocast with
    `bfloat16`), `loss.backward()`, AdamW step, gradients cleared; it returns the loss."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    tensors = {name: torch.from_numpy(value).long() for name, value in inputs.items()}

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
            loss = model(**tensors).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    return step
