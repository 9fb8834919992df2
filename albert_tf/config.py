"""ALBERT configuration: the original field names, JSON I/O for both dialects, presets.

Two JSON dialects exist and disagree on one word: in the original `albert_config.json` the
activation "gelu" is the tanh approximation (the original code's gelu), while in a Hugging Face
`config.json` "gelu" is the exact erf GELU and "gelu_new" the tanh one. `AlbertConfig` stores an
unambiguous name ("gelu_tanh" or "gelu_erf") and translates on read and write.

>>> from albert_tf.config import AlbertConfig
>>> config = AlbertConfig.from_preset("albert_base_v2")
>>> config.hidden_size, config.num_parameters()
(768, 11683584)
"""

import dataclasses

from albert_tf import files

ACTIVATIONS = ("gelu_tanh", "gelu_erf", "relu", "tanh", "linear")
SHARING = ("all", "attention", "ffn", "none")

# Activation names as each dialect spells them, mapped to ours.
_ORIGINAL_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu", "tanh": "tanh", "linear": "linear"}
_HF_ACTIVATIONS = {
    "gelu": "gelu_erf",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
_HF_MARKERS = ("model_type", "architectures", "transformers_version")

# What a JSON file that omits a field means: both originals default to xxlarge, and differ only in
# the name of the (same, tanh) GELU.
_JSON_DEFAULTS = dict(
    embedding_size=128,
    hidden_size=4096,
    num_hidden_layers=12,
    num_hidden_groups=1,
    inner_group_num=1,
    num_attention_heads=64,
    intermediate_size=16384,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    max_position_embeddings=512,
    type_vocab_size=2,
    initializer_range=0.02,
    layer_norm_eps=1e-12,
)
DIALECT_DEFAULTS = {
    "original": dict(_JSON_DEFAULTS, hidden_act="gelu"),
    "huggingface": dict(_JSON_DEFAULTS, hidden_act="gelu_new", vocab_size=30000),
}


# The integer sizes of a config: together they fix the depth and every weight's shape.
SIZE_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "inner_group_num",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


@dataclasses.dataclass
class AlbertConfig:
    """Hyperparameters of an ALBERT (or BERT, with `sharing="none"`) backbone.

    Field names are the original `albert_config.json` ones, plus `layer_norm_eps` and `sharing`:
    "all" (every layer of a group shares all weights; the ALBERT default), "attention" (only the
    attention weights are shared, each layer has its own FFN), "ffn" (only the FFN is shared) or
    "none" (BERT). Layer i uses group i // (num_hidden_layers // num_hidden_groups) of whatever is
    shared, and each group holds `inner_group_num` distinct blocks applied in sequence.

    Example:
        >>> AlbertConfig(vocab_size=100, hidden_size=32, num_attention_heads=4,
        ...              intermediate_size=64, num_hidden_layers=2).head_size
        8
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_tanh"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    sharing: str = "all"

    def __post_init__(self):
        self.validate()

    # ---------------------------------------------------------------- validation
    def validate(self):
        """Raises ValueError naming the first invalid field or combination."""
        for name in SIZE_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ValueError(f"AlbertConfig.{name} must be in [0, 1), got {value!r}")
        if self.initializer_range <= 0:
            raise ValueError(
                f"AlbertConfig.initializer_range must be > 0, got {self.initializer_range!r}"
            )
        if self.layer_norm_eps <= 0:
            raise ValueError(
                f"AlbertConfig.layer_norm_eps must be > 0, got {self.layer_norm_eps!r}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"AlbertConfig.hidden_act {self.hidden_act!r} is not a known activation; "
                f"expected one of {ACTIVATIONS}"
            )
        if self.sharing not in SHARING:
            raise ValueError(f"AlbertConfig.sharing {self.sharing!r} is not one of {SHARING}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"AlbertConfig.hidden_size ({self.hidden_size}) is not divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) exceeds "
                f"num_hidden_layers ({self.num_hidden_layers})"
            )
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(
                f"AlbertConfig.num_hidden_layers ({self.num_hidden_layers}) is not divisible by "
                f"num_hidden_groups ({self.num_hidden_groups})"
            )

    # ---------------------------------------------------------------- derived sizes
    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @property
    def attention_groups(self):
        """How many distinct attention weight sets the encoder holds."""
        return self.num_hidden_layers if self.sharing in ("ffn", "none") else self.num_hidden_groups

    @property
    def ffn_groups(self):
        """How many distinct feed-forward weight sets the encoder holds."""
        return (
            self.num_hidden_layers
            if self.sharing in ("attention", "none")
            else self.num_hidden_groups
        )

    @property
    def has_embedding_projection(self):
        """The E -> H projection exists only when E != H, as in the original."""
        return self.embedding_size != self.hidden_size

    def num_parameters(self, include_pooler=True, include_heads=False):
        """Exact parameter count of the backbone (and optionally the MLM and SOP heads)."""
        V, E, H, I = self.vocab_size, self.embedding_size, self.hidden_size, self.intermediate_size  # noqa: E741
        embeddings = (V + self.max_position_embeddings + self.type_vocab_size) * E + 2 * E
        projection = E * H + H if self.has_embedding_projection else 0
        attention = 4 * (H * H + H) + 2 * H  # Q, K, V, output dense and the attention LayerNorm
        ffn = H * I + I + I * H + H + 2 * H  # two dense layers and the FFN LayerNorm
        blocks = self.inner_group_num * (self.attention_groups * attention + self.ffn_groups * ffn)
        total = embeddings + projection + blocks
        if include_pooler:
            total += H * H + H
        if include_heads:
            total += (H * E + E + 2 * E + V) + (2 * H + 2)
        return total

    # ---------------------------------------------------------------- dict / JSON
    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, dialect="auto", source="<dict>"):
        """Builds a config from a dict in the original or the Hugging Face dialect.

        Missing fields take that dialect's defaults (`DIALECT_DEFAULTS`, the xxlarge shape both
        originals default to). Unknown keys (the original's net_structure_type, gap_size, ...;
        HF's architectures, ...) are ignored, as both original readers do.
        """
        if dialect == "auto":
            dialect = "huggingface" if any(k in values for k in _HF_MARKERS) else "original"
        if dialect not in DIALECT_DEFAULTS:
            raise ValueError(
                f"Unknown config dialect {dialect!r}: expected auto, original or huggingface"
            )
        values = {**DIALECT_DEFAULTS[dialect], **values}
        if "vocab_size" not in values:  # the original's only required field
            raise ValueError(f"{source}: the config has no vocab_size")
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in fields}
        act = kwargs["hidden_act"]
        table = _HF_ACTIVATIONS if dialect == "huggingface" else _ORIGINAL_ACTIVATIONS
        if act in table:
            kwargs["hidden_act"] = table[act]
        elif act not in ACTIVATIONS:
            raise ValueError(
                f"{source}: hidden_act {act!r} is not a known {dialect} activation; "
                f"expected one of {sorted(table)}"
            )
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def from_json_file(cls, path, dialect="auto"):
        """Reads an original `albert_config.json`, a Hugging Face `config.json` or our own."""
        return cls.from_dict(files.read_json(path), dialect=dialect, source=path)

    def to_json_dict(self, dialect="original"):
        """The config as a JSON-ready dict in the original or the Hugging Face dialect."""
        values = self.to_dict()
        if dialect == "original":
            # The original code knows only the tanh GELU as "gelu"; erf keeps our own name.
            values["hidden_act"] = {"gelu_tanh": "gelu"}.get(self.hidden_act, self.hidden_act)
        elif dialect == "huggingface":
            values["hidden_act"] = {"gelu_tanh": "gelu_new", "gelu_erf": "gelu"}.get(
                self.hidden_act, self.hidden_act
            )
            values["model_type"] = "albert"
            values["architectures"] = ["AlbertForPreTraining"]
        else:
            raise ValueError(
                f"Unknown config dialect {dialect!r}: expected original or huggingface"
            )
        return values

    def to_json_file(self, path, dialect="original"):
        """Writes the config atomically (write to a temporary file, then rename)."""
        files.write_json(path, self.to_json_dict(dialect))

    # ---------------------------------------------------------------- presets
    @classmethod
    def from_preset(cls, name, **overrides):
        """A named configuration (see `list_presets()`), with optional field overrides."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; available: {', '.join(list_presets())}")
        return cls(**{**PRESETS[name], **overrides})


def _released(hidden, layers, heads, dropout):
    return dict(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        hidden_act="gelu_tanh",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


# The released albert_config.json files (albert_original.md section 3.1). Every released config
# says "gelu", which the original code computes as the tanh approximation, for v1 and v2 alike;
# Hugging Face's v1 config.json files say "gelu" too, which HF computes as erf (read them with
# from_json_file to get HF's numerics). v1 keeps dropout 0.1 except xxlarge; v2 has none.
PRESETS = {
    "albert_base_v1": _released(768, 12, 12, 0.1),
    "albert_large_v1": _released(1024, 24, 16, 0.1),
    "albert_xlarge_v1": _released(2048, 24, 16, 0.1),
    "albert_xxlarge_v1": _released(4096, 12, 64, 0.0),
    "albert_base_v2": _released(768, 12, 12, 0.0),
    "albert_large_v2": _released(1024, 24, 16, 0.0),
    "albert_xlarge_v2": _released(2048, 24, 16, 0.0),
    "albert_xxlarge_v2": _released(4096, 12, 64, 0.0),
    # BERT equivalents in the paper's Table 1: no sharing, no factorization (E = H).
    "bert_base": dict(_released(768, 12, 12, 0.1), embedding_size=768, sharing="none"),
    "bert_large": dict(_released(1024, 24, 16, 0.1), embedding_size=1024, sharing="none"),
    # Small enough to pretrain on a laptop CPU in minutes (tests and `make demo`).
    "albert_tiny": dict(
        vocab_size=8000,
        embedding_size=64,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=512,
        hidden_act="gelu_tanh",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        max_position_embeddings=512,
    ),
}


def list_presets():
    """Names accepted by `AlbertConfig.from_preset`."""
    return sorted(PRESETS)
