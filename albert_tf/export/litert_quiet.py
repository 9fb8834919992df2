"""Hides what TensorFlow and its libraries print unasked while LiteRT files are converted and run,
so that the console of scripts/export_litert.py holds albert_tf's own lines.

`quiet()` hides, inside its block:
- TensorFlow's Python INFO log (the "tensorflow" logger): the converter goes through a
  SavedModel in a temporary directory, and `tf.saved_model.save` logs "Assets written to:
  /tmp/tmpXXXX/assets", "Writing fingerprint to /tmp/tmpXXXX/fingerprint.pb" and "Sharding
  callback duration"; its warnings and errors still show;
- the UserWarning "tf.lite.Interpreter is deprecated", which TensorFlow's own int8 calibrator
  (tensorflow/lite/python/optimize/calibrator.py) triggers: albert_tf runs the files with
  ai-edge-litert's interpreter;
- when TF_CPP_MIN_LOG_LEVEL is 1 or more (the scripts' default is 3), these informational lines
  of C++ code on file descriptor 2: absl INFO lines ("I0000 00:00:... builder.cc:183] Loading
  CharsMap of size=215630" from tensorflow-text's SentencePiece builder, whose absl does not read
  TF_CPP_MIN_LOG_LEVEL) and absl's "WARNING: All log messages before absl::InitializeLog()"
  banner, TFLite's "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." and the quantizer's
  "fully_quantize: 0, inference_type: 6, ..." line. Every other line (C++ warnings and errors,
  TFLite's "ERROR: ..." lines, tracebacks) is copied to the console as it comes, by a thread
  reading descriptor 2 through a pipe.

Blocks may nest (the inner one does nothing). TF_CPP_MIN_LOG_LEVEL=0 shows the C++ lines.

>>> import os
>>> with quiet():
...     os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\\n") > 0
True
"""

import contextlib
import logging
import os
import re
import sys
import threading
import warnings

# C++ lines that only inform: absl INFO lines and absl's banner, TFLite's INFO lines, the
# MLIR quantizer's summary of its settings.
_NOISE = re.compile(
    rb"^(I\d{4} [\d:.]+ +\d+ [^\s\]]+:\d+\] "
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|INFO: "
    rb"|fully_quantize: \d+, inference_type: )"
)
_DEPRECATED_INTERPRETER = r"\s*Warning: tf\.lite\.Interpreter is deprecated"
_active = threading.local()


def is_noise(line):
    """Whether `line` (bytes) is one of the C++ lines `quiet` hides."""
    return bool(_NOISE.match(line))


@contextlib.contextmanager
def _filtered_stderr():
    """File descriptor 2 through a pipe whose lines, but the noise, a thread copies to it."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def copy():
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                while line and not is_noise(line):
                    line = line[os.write(saved, line) :]

    thread = threading.Thread(target=copy, name="litert_quiet", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer: the thread reads to its end
        thread.join(timeout=10)
        os.close(saved)


@contextlib.contextmanager
def quiet():
    """Hides TensorFlow's unasked lines while converting and running LiteRT files (see the
    module docstring)."""
    if getattr(_active, "on", False):
        yield
        return
    level = os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0")
    tf_logger = logging.getLogger("tensorflow")
    previous = tf_logger.level
    _active.on = True
    try:
        with warnings.catch_warnings(), contextlib.ExitStack() as stack:
            warnings.filterwarnings("ignore", _DEPRECATED_INTERPRETER, UserWarning)
            tf_logger.setLevel(max(logging.WARNING, previous))
            if level.isdigit() and int(level) > 0:
                stack.enter_context(_filtered_stderr())
            yield
    finally:
        tf_logger.setLevel(previous)
        _active.on = False
