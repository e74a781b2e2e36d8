"""Results computed once per process (geonp.memo)."""

import threading

from geonp.memo import ProcessMemo


def test_each_key_is_computed_once_and_the_oldest_are_forgotten():
    calls = []
    memo = ProcessMemo(size=2)

    def compute(value):
        return lambda: calls.append(value) or value

    assert [memo.get(k, compute(v)) for k, v in (("a", 1), ("a", 9), ("b", 2), ("a", 9))] == [1, 1, 2, 1]
    assert calls == [1, 2]
    memo.get("c", compute(3))  # "b" is the least recently used: forgotten
    assert memo.get("b", compute(4)) == 4 and memo.get("a", compute(5)) == 5  # and then "a"
    memo.clear()
    assert memo.get("c", compute(6)) == 6


def test_threads_asking_together_get_one_result():
    memo, results = ProcessMemo(), []
    threads = [threading.Thread(target=lambda: results.append(memo.get("k", lambda: 7))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [7] * 8


def test_threads_asking_together_wait_for_one_computation():
    memo, calls, results = ProcessMemo(), [], []
    started = threading.Event()

    def slow():
        calls.append(1)
        started.wait(1.0)  # the other threads arrive while this one computes
        return 7

    threads = [threading.Thread(target=lambda: results.append(memo.get("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    started.set()
    for t in threads:
        t.join()
    assert results == [7] * 8 and calls == [1]


def test_a_failed_computation_is_not_kept_and_can_be_retried():
    memo = ProcessMemo()

    def fail():
        raise RuntimeError("boom")

    try:
        memo.get("k", fail)
    except RuntimeError:
        pass
    assert memo.get("k", lambda: 3) == 3
