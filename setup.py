"""albert_tf: ALBERT (A Lite BERT) for TensorFlow 2 / Keras 3."""

from setuptools import find_packages, setup

setup(
    name="albert_tf",
    version="0.1.0",
    description=(
        "ALBERT for TensorFlow 2 and Keras 3: pretrain on TPU, fine-tune with fit, serve raw text."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["albert_tf", "albert_tf.*"]),
    python_requires=">=3.10",
    install_requires=[
        # tensorflow and tensorflow-text must share a minor version (2.20 on TPU VMs, or 2.21);
        # albert_tf checks it at import time.
        "tensorflow>=2.20,<2.22",
        "tensorflow-text>=2.20,<2.22",
        "keras>=3.10",
        "tensorboard>=2.20",
        "sentencepiece>=0.2.3",  # SentencePieceNormalizer.Decompile (LiteRT tokenizer)
        "absl-py>=1.0",
        "tensorflow-datasets>=4.9",
        "safetensors>=0.4",
        # hf:// models (albert_tf.sources); 0.34+ as transformers 4.57 pins, and 1.x / 2.x.
        "huggingface_hub>=0.34",
        "numpy",
    ],
    extras_require={
        "test": [
            "pytest>=7",
            "pytest-timeout",
            "pytest-xdist",
            "ruff==0.17.6",
            "tensorflow-serving-api>=2.20,<2.22",
            "ai-edge-litert>=2.3",
            # The Beam pipeline's DirectRunner tests (Beam pins protobuf < 7, TF accepts 6.x).
            "apache-beam[tfrecord]>=2.77,<3",
            # tests/train/test_gcs.py: gs:// against a local GCS emulator (tests/gcs_support.py
            # patches this version's gaps) behind a TLS proxy with a throw-away CA.
            "gcp-storage-emulator==2026.7.19",
            "cryptography",
            # Only tests/convert/test_convert_keras_hub_export.py (and the fixture generator)
            # import it, to prove that presets load both ways; the library never imports it.
            "keras-hub==0.32.0",
            # Test extras only, never a runtime dependency: tests/export/test_tfhub_export.py
            # loads the TF Hub export with tensorflow_hub as the TF tutorials do, which needs
            # Keras 2 (tf-keras), run in its own process (TF_USE_LEGACY_KERAS=1); tf-keras is
            # released per TensorFlow version: 2.21 with TF 2.21, 2.20 with `make test-tf2.20`.
            "tensorflow-hub==0.16.1",
            "tf-keras>=2.20,<2.22",
        ],
        "serving": ["tensorflow-serving-api>=2.20,<2.22"],
        "litert": ["ai-edge-litert>=2.3"],
        "beam": ["apache-beam[tfrecord]>=2.77,<3"],
        # The peers of scripts/benchmark_step.py and scripts/benchmark_pretraining.py, pinned to
        # the versions docs/benchmarks.md measured (benchmark only, never runtime dependencies;
        # the original google-research/albert code is a checkout, not a package).
        "bench": ["keras-hub==0.32.0", "torch==2.13.0", "transformers==4.57.6"],
    },
)
