"""Concurrent clients against a serving signature, with TF Serving's server-side batching emulated.

With --enable_batching, TF Serving wraps a model in a BatchingSession fed by one queue of a
SharedBatchScheduler. `Batcher` follows the same rules around any `predict(list of texts)`
that returns one row per text (an array, a list, or a dict of them), so an export loaded in one
process can be measured the way the server would run it:

- a request's texts join the open batch. If they do not fit, that batch closes and a new one
  opens, unless `max_enqueued_batches` batches (the open one included) are already waiting: then
  the request is refused with `QueueFull` (TF Serving answers UNAVAILABLE, "queue ... is full");
- an idle batch thread (there are `num_batch_threads`) takes the oldest closed batch, or the
  open batch once it is full or `batch_timeout_micros` have passed since its first request.
  While every thread is busy, the open batch keeps filling past the timeout;
- a request is never split across batches, so one larger than `max_batch_size` is refused
  (ValueError; TF Serving's InvalidArgument unless large-batch splitting is on);
- with `allowed_batch_sizes`, a batch is padded up to the next allowed size with copies of the
  last request's first text, as BatchingSession pads, and the pad rows are dropped.

`measure_clients` runs closed-loop clients, each sending one text and waiting for the answer
before it sends the next. The parameters are `albert_tf.export.batching.BatchingParameters`,
which the exports write as TF Serving's --batching_parameters_file.

>>> with Batcher(lambda texts: [len(t) for t in texts], max_batch_size=4) as batcher:
...     batcher.submit(["a", "abc"])
[1, 3]
>>> result = measure_clients(lambda texts: [0] * len(texts), ["x"], clients=2,
...                          requests_per_client=5)
>>> result["requests"], result["rejected"]
(10, 0)
"""

import collections
import threading
import time

import numpy as np

from albert_tf.export.batching import BatchingParameters


class QueueFull(RuntimeError):
    """A request found `max_enqueued_batches` batches waiting (TF Serving: UNAVAILABLE)."""


class _Request:
    """One submitted request: its texts, and its rows or error once its batch has run."""

    def __init__(self, texts):
        self.texts = texts
        self.done = threading.Event()
        self.result = None
        self.error = None


def _rows(output, start, stop):
    """Rows [start, stop) of a batch's output: an array, a list, or a dict of them."""
    if isinstance(output, dict):
        return {name: value[start:stop] for name, value in output.items()}
    return output[start:stop]


def _row_count(output):
    """The number of rows of a batch's output (every entry of a dict must agree)."""
    counts = {len(v) for v in output.values()} if isinstance(output, dict) else {len(output)}
    if len(counts) != 1:
        raise ValueError(f"the outputs have different numbers of rows: {sorted(counts)}")
    return counts.pop()


class Batcher:
    """Server-side batching around `predict(list of texts)`, with the BatchingParameters fields
    as keyword arguments. `submit(texts)` blocks until the request's batch has run and returns the
    request's rows; `batch_sizes` lists the rows of each batch run (before padding), in the order
    the batches were taken. `close()` runs what is queued, then stops the threads.

    >>> sizes = []
    >>> def predict(texts):
    ...     sizes.append(len(texts))
    ...     return {"length": [len(t) for t in texts]}
    >>> batcher = Batcher(predict, max_batch_size=4, allowed_batch_sizes=(2, 4))
    >>> batcher.submit(["abc"]), sizes, batcher.batch_sizes
    ({'length': [3]}, [2], [1])
    >>> batcher.close()
    """

    def __init__(self, predict, **parameters):
        self.parameters = BatchingParameters(**parameters)
        self.batch_sizes = []
        self._predict = predict
        self._timeout = self.parameters.batch_timeout_micros / 1e6
        self._condition = threading.Condition()
        self._batches = collections.deque([[]])  # the last batch is the open one
        self._open_rows = 0
        self._open_since = 0.0
        self._closed = False
        self._threads = [
            threading.Thread(target=self._run, name=f"batch_thread_{i}", daemon=True)
            for i in range(self.parameters.num_batch_threads)
        ]
        for thread in self._threads:
            thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def submit(self, texts):
        """The rows of `texts` (a list of strings) from the batch they ran in."""
        texts = list(texts)
        limit = self.parameters.max_batch_size
        if not 1 <= len(texts) <= limit:
            raise ValueError(
                f"a request must hold 1 to max_batch_size ({limit}) texts, got {len(texts)}: "
                "TF Serving refuses a larger request unless large-batch splitting is on"
            )
        request = _Request(texts)
        with self._condition:
            if self._closed:
                raise RuntimeError("the batcher is closed")
            if self._open_rows + len(texts) > limit:
                if len(self._batches) >= self.parameters.max_enqueued_batches:
                    raise QueueFull(
                        f"{len(self._batches)} batches are waiting (max_enqueued_batches)"
                    )
                self._start_new_batch()
            if not self._batches[-1]:
                self._open_since = time.monotonic()
            self._batches[-1].append(request)
            self._open_rows += len(texts)
            self._condition.notify_all()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.result

    def close(self):
        """Runs the queued requests, then stops the batch threads (a second call does nothing)."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
        for thread in self._threads:
            thread.join()

    def _start_new_batch(self):
        self._batches.append([])
        self._open_rows = 0

    def _take_batch(self):
        """The batch an idle thread runs now, or None; the caller holds the lock."""
        if len(self._batches) == 1 and self._batches[0]:
            if (
                self._closed
                or self._open_rows >= self.parameters.max_batch_size
                or time.monotonic() >= self._open_since + self._timeout
            ):
                self._start_new_batch()
        if len(self._batches) >= 2:
            batch = self._batches.popleft()
            self.batch_sizes.append(sum(len(r.texts) for r in batch))
            return batch
        return None

    def _run(self):
        while True:
            with self._condition:
                batch = self._take_batch()
                while batch is None:
                    if self._closed and not self._batches[-1]:
                        return
                    wait = None  # an empty open batch: until a request comes
                    if self._batches[-1]:
                        wait = max(0.0, self._open_since + self._timeout - time.monotonic())
                    self._condition.wait(wait)
                    batch = self._take_batch()
            self._run_batch(batch)

    def _run_batch(self, batch):
        texts = [text for request in batch for text in request.texts]
        size = next((s for s in self.parameters.allowed_batch_sizes if s >= len(texts)), None)
        texts += [batch[-1].texts[0]] * ((size or len(texts)) - len(texts))
        try:
            output = self._predict(texts)
            if _row_count(output) != len(texts):
                raise ValueError(
                    f"predict returned {_row_count(output)} rows for {len(texts)} texts"
                )
            start = 0
            for request in batch:
                request.result = _rows(output, start, start + len(request.texts))
                start += len(request.texts)
        except Exception as e:  # every request of the batch gets the batch's error
            for request in batch:
                request.error = e
        finally:
            for request in batch:
                request.done.set()


def measure_clients(predict, requests, clients, duration_s=None, requests_per_client=None):
    """Closed-loop load: `clients` threads each call predict([text]) back to back, for
    `duration_s` seconds or `requests_per_client` calls (give one), client i sending texts i,
    i + clients, ... of `requests` (cycled). Latency is timed around each call.

    Returns {"clients", "requests": answered, "rejected": QueueFull refusals, "seconds": wall
    time, "texts_per_s", "p50_ms", "p99_ms"} (percentiles None when nothing was answered).
    `predict` may be a plain predict or a Batcher's submit. A client whose request is refused
    (QueueFull) counts it and sends its next text at once, so keep `clients` within the queue's
    room (max_enqueued_batches * max_batch_size); any other error stops the measurement and is
    raised here.
    """
    if (duration_s is None) == (requests_per_client is None):
        raise ValueError("give exactly one of duration_s and requests_per_client")
    texts = list(requests)
    if not texts or clients < 1:
        raise ValueError("measure_clients needs at least one text and one client")
    latencies = [[] for _ in range(clients)]
    rejected = [0] * clients
    errors = []
    start = threading.Barrier(clients + 1)
    clock = {}

    def client(index):
        start.wait()
        sent = 0
        while (
            sent < requests_per_client
            if requests_per_client is not None
            else time.perf_counter() < clock["deadline"]
        ):
            text = texts[(index + sent * clients) % len(texts)]
            began = time.perf_counter()
            try:
                predict([text])
            except QueueFull:
                rejected[index] += 1
            except Exception as e:  # raised by measure_clients once every client has stopped
                errors.append(e)
                return
            else:
                latencies[index].append(time.perf_counter() - began)
            sent += 1

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    clock["began"] = time.perf_counter()
    clock["deadline"] = clock["began"] + (duration_s or 0.0)
    start.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - clock["began"]
    if errors:
        raise errors[0]
    answered = np.array([t for client_times in latencies for t in client_times]) * 1000.0
    return {
        "clients": clients,
        "requests": len(answered),
        "rejected": sum(rejected),
        "seconds": seconds,
        "texts_per_s": len(answered) / seconds,
        "p50_ms": float(np.percentile(answered, 50)) if len(answered) else None,
        "p99_ms": float(np.percentile(answered, 99)) if len(answered) else None,
    }
