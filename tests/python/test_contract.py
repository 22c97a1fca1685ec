"""The cross-surface contract (docs/reliability.md section 11) from Python: the inputs C, the fak tool
and HTTP refuse are refused here with the same fak.Error, a failed call changes nothing, and Ctrl-C
stops a long generate and keeps what it generated."""

import os
import signal
import threading
import time

import pytest

import fak

LONE = "\ud800"  # a lone surrogate: a str with no UTF-8 form


def test_a_thread_count_past_the_limit_is_an_error_naming_it():
    with pytest.raises(fak.InvalidArgumentError, match="limit of 1024 threads"):
        fak.Model.load("embedded", threads=100000)
    assert fak.Model.load("embedded", threads=2).vocab_size == 258  # control


def test_an_empty_stop_string_is_refused_everywhere(model):
    engine = fak.Engine(model)
    with pytest.raises(fak.InvalidArgumentError, match="stop string 1 is empty"):
        engine.submit([1, 2], max_tokens=4, stop=["ok", ""])
    messages = [{"role": "user", "content": "hi"}]
    for stop in ("", [""]):
        with pytest.raises(fak.InvalidArgumentError, match="is empty"):
            model.create_chat_completion(messages, max_tokens=4, stop=stop)
    assert engine.submit([1, 2], max_tokens=2, stop=["ok"]).wait()["tokens"]  # control


def test_an_empty_token_list_is_refused(model):
    tree = fak.RadixTree(model)
    with pytest.raises(fak.InvalidArgumentError, match="at least one token"):
        tree.lookup([])
    session = fak.Session(model)
    for call in (lambda: session.prefill([]), lambda: session.generate([]), lambda: fak.Engine(model).submit([])):
        with pytest.raises(fak.InvalidArgumentError, match="empty|no tokens"):
            call()
    assert len(session) == 0
    session, matched, _ = tree.lookup([1, 2])  # control
    assert matched == 0 and len(session) == 0


def test_a_count_past_the_context_is_refused_and_changes_nothing(model):
    session = fak.Session(model)
    session.prefill([1, 2, 3])
    before = session.tokens
    with pytest.raises(fak.ResourceExhaustedError, match="context length 4096"):
        session.generate([4, 5], max_tokens=10**6)
    with pytest.raises(fak.ResourceExhaustedError, match="context length 4096"):
        session.generate([4, 5], max_tokens=2**64 - 1)
    assert session.tokens == before and len(session.segments) == 1
    assert len(session.generate([4, 5], max_tokens=3, stop_tokens=[])) == 3  # control


@pytest.mark.parametrize("field, value", [("top_p", 5e-324), ("top_p", 1e-40), ("temperature", 1e-50),
                                          ("repeat_penalty", 1e39)])
def test_sampling_values_are_checked_as_the_floats_the_sampler_uses(model, field, value):
    with pytest.raises(fak.InvalidArgumentError, match="normal float"):
        fak.Session(model).generate([1, 2], max_tokens=2, **{field: value})
    with pytest.raises(fak.InvalidArgumentError, match="normal float"):
        fak.Engine(model).submit([1, 2], max_tokens=2, **{field: value})


def test_a_str_without_utf8_raises_a_fak_error_wherever_it_enters(model, tmp_path):
    calls = {
        "tokenize": lambda: model.tokenize(LONE),
        "prefill": lambda: fak.Session(model).prefill("a" + LONE),
        "chat content": lambda: model.create_chat_completion([{"role": "user", "content": LONE}]),
        "chat role": lambda: model.chat_template.render([{"role": LONE, "content": "x"}]),
        "submit prompt": lambda: fak.Engine(model).submit(LONE),
        "stop": lambda: fak.Engine(model).submit([1, 2], stop=[LONE]),
        "tenant": lambda: fak.Engine(model).submit([1, 2], tenant=LONE),
        "model path": lambda: fak.Model.load(LONE),
        "screen text": lambda: fak.ScreenChain().screen(LONE),
        "phrases": lambda: fak.ScreenChain().add_phrases("p", [LONE]),
        "blob digest": lambda: fak.BlobStore.memory().get(LONE),
        "auditor path": lambda: fak.Auditor(str(tmp_path / "j.log"), LONE),
        "planner": lambda: fak.Planner(model, str(tmp_path / "p.log")).complete([{"role": "user", "content": LONE}]),
    }
    for name, call in calls.items():
        with pytest.raises(fak.InvalidArgumentError, match="surrogate") as raised:
            call()
        assert "index" in str(raised.value), name
    assert model.tokenize("a\u00e9") == [97, 0xC3, 0xA9]  # control: ordinary non-ASCII text


def test_ctrl_c_stops_a_long_generate_and_keeps_what_it_generated(model):
    session = fak.Session(model)
    max_tokens = 4000  # the whole context: seconds of generation
    # Ctrl-C is pressed every 0.2 s until generate returns (one timer once failed to land inside it
    # on a loaded machine); the handler raises KeyboardInterrupt, as Python's default one does, for
    # the first press only, so a press that lands after generate raised changes nothing.
    pressed = []

    def ctrl_c(*_):
        if not pressed:
            pressed.append(True)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    done = threading.Event()

    def press():
        while not done.wait(0.2):
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            session.generate([1, 2, 3], max_tokens=max_tokens, stop_tokens=[])
    finally:
        done.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    generated = raised.value.tokens
    assert 0 < len(generated) < max_tokens // 2, len(generated)  # stopped soon after the signal
    # The session holds the prompt and every generated token but the last, as after any finish.
    assert session.tokens == [1, 2, 3] + generated[:-1]
    assert len(session.segments) == 1
    # Control: the session goes on from there.
    assert len(session.generate([4], max_tokens=2, stop_tokens=[])) == 2


def test_a_python_signal_handler_runs_during_generate_and_one_that_does_not_raise_lets_it_finish(model):
    seen = []
    previous = signal.signal(signal.SIGINT, lambda *_: seen.append(time.monotonic()))
    try:
        timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        tokens = fak.Session(model).generate([1, 2, 3], max_tokens=2000, stop_tokens=[])
        end = time.monotonic()
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(tokens) == 2000 and len(seen) == 1
    assert seen[0] - start < (end - start) / 2, "the handler ran only after generate returned"
