"""albert_tf.benchmarks.concurrency: TF Serving's batching rules emulated by Batcher, the
closed-loop client measurement.

Fake predicts stand in for the model: they record the batches they get and answer with values
computed from each text, so a request can check that it got its own rows. Times are short
(milliseconds) and the assertions on them leave room for a loaded machine.
"""

import contextlib
import threading
import time

import numpy as np
import pytest

from albert_tf.benchmarks.concurrency import Batcher, QueueFull, measure_clients


class Recorder:
    """predict(texts) -> {"length": [len(text)], "text": texts}, recording each batch it gets;
    `seconds` of sleep per call, and `gate` (an Event) to hold calls until it is set."""

    def __init__(self, seconds=0.0, gate=None):
        self.batches = []
        self.seconds = seconds
        self.gate = gate
        self.called = threading.Event()

    def __call__(self, texts):
        self.batches.append(list(texts))
        self.called.set()
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(self.seconds)
        return {"length": np.array([len(t) for t in texts]), "text": list(texts)}


def in_threads(function, arguments):
    """[function(a) for a in arguments], each call in its own thread (errors are returned)."""
    results = [None] * len(arguments)

    def call(i):
        try:
            results[i] = function(arguments[i])
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


@contextlib.contextmanager
def busy_batcher(queued, **parameters):
    """A Batcher (predict: a Recorder, as `.predict`) whose one batch thread is held running the
    request ["running"] while the `queued` requests are submitted; released on exit."""
    gate = threading.Event()
    predict = Recorder(gate=gate)
    with Batcher(predict, num_batch_threads=1, **parameters) as batcher:
        batcher.predict = predict
        running = threading.Thread(target=batcher.submit, args=(["running"],))
        running.start()
        assert predict.called.wait(10)
        later = threading.Thread(target=in_threads, args=(batcher.submit, queued))
        later.start()
        time.sleep(0.2)  # the queued requests reach the queue
        try:
            yield batcher
        finally:
            gate.set()
            running.join(10)
            later.join(10)


def test_each_request_gets_its_own_rows():
    predict = Recorder(seconds=0.002)
    requests = [[f"request {i} text {j}" + "x" * i for j in range(1 + i % 3)] for i in range(24)]
    with Batcher(predict, max_batch_size=6, batch_timeout_micros=5000, num_batch_threads=2) as b:
        results = in_threads(b.submit, requests)
    for texts, result in zip(requests, results):
        assert result["text"] == texts
        np.testing.assert_array_equal(result["length"], [len(t) for t in texts])
    assert sorted(sum(predict.batches, [])) == sorted(sum(requests, []))
    assert b.batch_sizes == [len(batch) for batch in predict.batches]
    assert max(b.batch_sizes) > 1 and max(b.batch_sizes) <= 6


def test_batches_form_under_concurrent_clients():
    predict = Recorder(seconds=0.01)
    with Batcher(predict, max_batch_size=8, batch_timeout_micros=5000, num_batch_threads=1) as b:
        result = measure_clients(b.submit, ["a", "bb", "ccc"], clients=8, requests_per_client=5)
    assert result["requests"] == 40 and sum(b.batch_sizes) == 40
    assert max(b.batch_sizes) > 1 and max(b.batch_sizes) <= 8
    assert len(b.batch_sizes) < 40


def test_a_lone_request_waits_for_the_timeout():
    with Batcher(Recorder(), max_batch_size=8, batch_timeout_micros=150_000) as batcher:
        began = time.perf_counter()
        batcher.submit(["alone"])
        waited = time.perf_counter() - began
    assert 0.14 <= waited < 1.0


def test_a_full_batch_runs_without_waiting_for_the_timeout():
    predict = Recorder()
    with Batcher(predict, max_batch_size=3, batch_timeout_micros=20_000_000) as batcher:
        began = time.perf_counter()
        batcher.submit(["one", "two", "six"])
        in_threads(batcher.submit, [["a"], ["b"], ["c"]])
        assert time.perf_counter() - began < 5
    assert batcher.batch_sizes == [3, 3]


def test_the_open_batch_keeps_filling_while_every_thread_is_busy():
    with busy_batcher([["a"], ["b"], ["c"]], max_batch_size=8, batch_timeout_micros=0) as b:
        pass
    assert b.batch_sizes == [1, 3]


def test_allowed_batch_sizes_pad_with_the_last_request_and_drop_the_pad_rows():
    predict = Recorder()
    with Batcher(predict, max_batch_size=4, allowed_batch_sizes=(2, 4)) as batcher:
        one = batcher.submit(["only"])
        three = batcher.submit(["x", "yy", "zzz"])
    assert predict.batches == [["only", "only"], ["x", "yy", "zzz", "x"]]
    assert one["text"] == ["only"] and list(one["length"]) == [4]
    assert three["text"] == ["x", "yy", "zzz"] and list(three["length"]) == [1, 2, 3]
    assert batcher.batch_sizes == [1, 3]


def test_requests_outside_one_to_max_batch_size_are_refused():
    predict = Recorder()
    with Batcher(predict, max_batch_size=4) as batcher:
        with pytest.raises(ValueError, match="max_batch_size"):
            batcher.submit(["t"] * 5)
        with pytest.raises(ValueError, match="1 to max_batch_size"):
            batcher.submit([])
        assert batcher.submit(["t"] * 4)["text"] == ["t"] * 4
    assert predict.batches == [["t"] * 4]
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(["late"])


def test_a_request_finding_max_enqueued_batches_waiting_is_refused():
    with busy_batcher([["waiting"]], max_batch_size=1, max_enqueued_batches=1) as batcher:
        with pytest.raises(QueueFull):  # "waiting" fills the one batch the queue may hold
            batcher.submit(["refused"])
    assert batcher.predict.batches == [["running"], ["waiting"]]


def test_close_runs_the_queued_requests():
    with Batcher(Recorder(), max_batch_size=8, batch_timeout_micros=20_000_000) as batcher:
        results = []
        waiting = threading.Thread(target=lambda: results.append(batcher.submit(["queued"])))
        waiting.start()
        time.sleep(0.1)
        began = time.perf_counter()
    assert time.perf_counter() - began < 5
    waiting.join(10)
    assert results[0]["text"] == ["queued"]


def test_a_failing_batch_fails_each_of_its_requests():
    def predict(texts):
        raise RuntimeError("model failed")

    with Batcher(predict, max_batch_size=2) as batcher:
        with pytest.raises(RuntimeError, match="model failed"):
            batcher.submit(["a"])


def test_predict_returning_the_wrong_row_count_is_an_error():
    with Batcher(lambda texts: np.zeros([len(texts) + 1, 2]), max_batch_size=2) as batcher:
        with pytest.raises(ValueError, match="2 rows for 1 texts"):
            batcher.submit(["a"])


def test_measure_clients_counts_and_percentiles():
    def predict(texts):
        assert len(texts) == 1
        time.sleep(0.02)
        return [0]

    result = measure_clients(predict, ["a", "b", "c"], clients=4, requests_per_client=10)
    assert result["clients"] == 4 and result["requests"] == 40 and result["rejected"] == 0
    assert 20 <= result["p50_ms"] <= result["p99_ms"] < 500
    assert 20 < result["texts_per_s"] <= 4 / 0.02 * 1.01
    assert result["seconds"] >= 10 * 0.02


def test_measure_clients_for_a_duration_sends_each_text_in_turn():
    sent = []

    def predict(texts):
        sent.append(texts[0])
        time.sleep(0.01)
        return [0]

    result = measure_clients(predict, ["a", "b", "c"], clients=1, duration_s=0.2)
    assert 0.2 <= result["seconds"] < 2.0
    assert 2 <= result["requests"] <= 21 and result["requests"] == len(sent)
    assert sent[:3] == ["a", "b", "c"]


def test_measure_clients_counts_refusals_and_raises_other_errors():
    calls = []

    def refuse_every_other(texts):
        calls.append(texts)
        if len(calls) % 2:
            raise QueueFull("full")
        return [0]

    result = measure_clients(refuse_every_other, ["a"], clients=1, requests_per_client=6)
    assert (result["requests"], result["rejected"]) == (3, 3)

    def broken(texts):
        raise KeyError("broken")

    with pytest.raises(KeyError, match="broken"):
        measure_clients(broken, ["a"], clients=2, requests_per_client=3)
    with pytest.raises(ValueError, match="exactly one"):
        measure_clients(broken, ["a"], clients=2)
    with pytest.raises(ValueError, match="exactly one"):
        measure_clients(broken, ["a"], clients=2, duration_s=1, requests_per_client=1)
