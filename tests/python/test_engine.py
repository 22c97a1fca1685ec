"""fak.Engine from Python: OpenAI-shaped chat completions, streaming, concurrent threads, statistics."""

import _thread
import signal
import threading
import time

import numpy as np
import pytest

import fak

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there"}]


def test_chat_completion_has_the_openai_shape(model):
    out = model.create_chat_completion(MESSAGES, max_tokens=6)
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    assert isinstance(out["created"], int) and out["model"] == model.label
    (choice,) = out["choices"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = out["usage"]
    assert usage["prompt_tokens"] == len(model.encode_chat(MESSAGES))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 1 <= usage["completion_tokens"] <= 6


def test_streamed_chunks_concatenate_to_the_whole_reply(model):
    engine = fak.Engine(model)
    whole = engine.create_chat_completion(MESSAGES, max_tokens=10, seed=5)
    chunks = list(engine.create_chat_completion(MESSAGES, max_tokens=10, seed=5, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    # The second call reused the first one's prompt from the radix tree.
    assert engine.tree_stats()["hit_tokens"] > 0
    gate = engine.gate_stats()
    assert gate["hits"] >= 1 and set(gate["misses_by_axis"]) >= {"model_id", "tokenizer_id", "precision"}


def test_concurrent_threads_get_the_bits_they_get_alone(model):
    prompts = [model.tokenize(f"request number {i}: tell me a story") for i in range(4)]
    alone = []
    for p in prompts:
        e = fak.Engine(model)
        alone.append(e.submit(p, max_tokens=12, record_logits=True).wait())
        e.shutdown()

    engine = fak.Engine(model, max_running=4)
    results = [None] * len(prompts)

    def run(i):
        results[i] = engine.submit(prompts[i], max_tokens=12, record_logits=True).wait()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, r in zip(alone, results):
        assert r["tokens"] == a["tokens"]
        assert np.max(np.abs(r["logits"] - a["logits"])) == 0.0
    assert engine.stats()["max_batch_items"] > 1  # they really ran batched together
    # The engine's first logits are the bits a Session's prefill gives.
    assert np.max(np.abs(alone[0]["logits"][0] - fak.Session(model).prefill(prompts[0]))) == 0.0
    # Control: a different prompt gives different logits.
    assert np.max(np.abs(alone[0]["logits"][0] - alone[1]["logits"][0])) > 0.0


def test_speculative_decoding_changes_no_bit(model):
    # A prompt that repeats itself, so prompt lookup has drafts to verify.
    prompt = model.tokenize("the cat sat on the mat. " * 6 + "the cat")
    plain = fak.Engine(model).submit(prompt, max_tokens=24, record_logits=True).wait()
    sampled_plain = fak.Engine(model).submit(prompt, max_tokens=24, temperature=0.8, seed=3).wait()
    for engine in (fak.Engine(model, speculate="ngram:4"), fak.Engine(model, draft_model=model)):
        got = engine.submit(prompt, max_tokens=24, record_logits=True).wait()
        assert got["tokens"] == plain["tokens"]
        assert np.max(np.abs(got["logits"] - plain["logits"])) == 0.0
        assert engine.submit(prompt, max_tokens=24, temperature=0.8, seed=3).wait()["tokens"] == sampled_plain["tokens"]
        stats = engine.stats()
        assert stats["accepted_draft_tokens"] > 0 and stats["draft_tokens"] >= stats["accepted_draft_tokens"]
        assert got["usage"]["draft_tokens"] > 0
        engine.shutdown()
    with pytest.raises(fak.InvalidArgumentError, match="ngram"):
        fak.Engine(model, speculate="ngram:0")
    with pytest.raises(fak.InvalidArgumentError, match="not both"):
        fak.Engine(model, speculate="ngram", draft_model=model)


def test_waiting_releases_the_gil(model):
    engine = fak.Engine(model)
    request = engine.submit(model.tokenize("a long prompt " * 40), max_tokens=48)
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    result = request.wait()  # blocks in C++; the counter thread must keep running meanwhile
    stop.set()
    counter.join()
    assert result["usage"]["generated_tokens"] >= 1
    assert ticks > 10


def test_cancel_and_errors(model):
    engine = fak.Engine(model)
    r = engine.submit(model.tokenize("x" * 50), max_tokens=4000, stream=True)
    assert r.next_event() is not None
    r.cancel()
    while r.next_event() is not None:
        pass
    assert r.wait()["finish_reason"] == "cancelled"
    with pytest.raises(fak.InvalidArgumentError):
        engine.submit([model.vocab_size + 1]).wait()
    with pytest.raises(fak.InvalidArgumentError):
        engine.submit()
    with pytest.raises(fak.InvalidArgumentError):
        engine.submit([1], messages=MESSAGES)
    with pytest.raises(fak.ResourceExhaustedError):
        engine.submit([1], max_tokens=model.context_length + 1)
    with pytest.raises(fak.InvalidArgumentError):
        fak.Engine(model, policy="random")
    engine.shutdown()
    with pytest.raises(fak.FailedPreconditionError):
        engine.submit([1])


def test_radix_tree_reuse_is_exact_and_gated(model):
    tree = fak.RadixTree(model)
    tokens = model.tokenize("a shared system prompt, then the question")
    first = fak.Session(model)
    expected = first.prefill(tokens)
    tree.insert(first)
    assert tree.stats()["unique_tokens"] == len(tokens)

    session, matched, verdict = tree.lookup(tokens)
    assert matched == len(tokens) - 1 and verdict == "HIT"  # one token is always left to prefill
    logits = session.prefill(tokens[matched:])
    assert np.max(np.abs(logits - expected)) == 0.0
    assert session.digest() == first.digest()

    # Another tenant's namespace holds nothing: no reuse across tenants.
    other, matched_other, _ = tree.lookup(tokens, tenant="acme")
    assert matched_other == 0 and len(other) == 0
    assert tree.match_length(tokens) == len(tokens)
    assert tree.gate_stats()["hits"] >= 1
    assert tree.lookup(tokens, tenant="")[1] == 0  # an invalid tenant is served nothing
    with pytest.raises(fak.InvalidArgumentError):
        tree.insert(first, tenant="")


@pytest.fixture()
def sigint_raises():
    """SIGINT raises KeyboardInterrupt during the test, as at a terminal. A shell starts background
    jobs (scripts/test under nohup, CI) with SIGINT ignored, and Python then leaves it ignored, so
    interrupt_main would do nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_interrupts_a_wait_and_cancels_the_request(model, sigint_raises):
    engine = fak.Engine(model)
    request = engine.submit(model.tokenize("never ending"), max_tokens=4000)  # seconds of work
    timer = threading.Timer(0.3, _thread.interrupt_main)  # a SIGINT while the main thread waits in C++
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        request.wait()
    assert time.monotonic() - started < 30
    timer.join()
    # The request was cancelled: the engine is free again and the request reports it.
    assert engine.submit([1, 2, 3], max_tokens=2).wait()["usage"]["generated_tokens"] == 2
    assert request.wait()["finish_reason"] == "cancelled"


def test_leaving_a_stream_early_cancels_it(model):
    engine = fak.Engine(model)
    stream = engine.create_chat_completion(MESSAGES, max_tokens=2000, stream=True)
    next(stream)
    next(stream)
    stream.close()  # the finally clause cancels the request
    deadline = time.monotonic() + 30
    while engine.stats()["running"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.stats()["running"] == 0


def test_background_prefill_only_requests_warm_the_tree(model):
    engine = fak.Engine(model)
    prompt = model.tokenize("a system prompt every agent shares, warmed ahead of time")
    warm = engine.submit(prompt, max_tokens=0, priority="background").wait()
    assert warm["tokens"] == [] and warm["finish_reason"] == "length"
    hit = engine.submit(prompt + model.tokenize(" and a question"), max_tokens=2).wait()
    assert hit["usage"]["cached_tokens"] >= len(prompt) - 1
    assert "background_running" in engine.stats()
    with pytest.raises(fak.InvalidArgumentError, match="priority"):
        engine.submit(prompt, priority="urgent")


def test_kv_tier_pages_a_prefix_in_and_counts_it(model, tmp_path):
    """An engine with kv_tier_dir writes its tree through to the directory; a second engine over the
    same directory pages the prompt in (stats and usage say how many tokens) and answers the same.
    Controls: the first engine found nothing there (an absence, not a refusal); a tampered slab is
    refused as 'checksum', counted, and recomputed to the same answer."""
    tier = str(tmp_path / "kv-tier")
    messages = [{"role": "system", "content": "Remember this. " * 10}, {"role": "user", "content": "What was it?"}]

    def serve():
        engine = fak.Engine(model, kv_tier_dir=tier)
        result = engine.submit(messages=messages, max_tokens=6).wait()
        engine.shutdown(drain=True)  # flushes the write-through queue
        return result, engine.stats()

    first, first_stats = serve()
    prompt = first["usage"]["prompt_tokens"]
    assert first_stats["page_ins"] == 1 and first_stats["paged_tokens"] == 0
    assert first_stats["page_in_refusals"] == 0 and first_stats["page_in_failures"]["absent"] == 1
    assert first["usage"]["paged_tokens"] == 0

    second, second_stats = serve()
    assert second["tokens"] == first["tokens"]
    assert second_stats["paged_tokens"] == prompt and second["usage"]["paged_tokens"] == prompt
    assert second["usage"]["cached_tokens"] == prompt - 1  # the last prompt token is prefilled for its logits
    assert second_stats["page_in_refusals"] == 0

    slabs = list((tmp_path / "kv-tier" / "slabs").glob("*.kvslab"))
    assert slabs
    for slab in slabs:
        data = bytearray(slab.read_bytes())
        data[-5] ^= 0x20  # a bit of V
        slab.write_bytes(bytes(data))
    third, third_stats = serve()
    assert third["tokens"] == first["tokens"]
    assert third_stats["paged_tokens"] == 0 and third["usage"]["paged_tokens"] == 0
    assert third_stats["page_in_refusals"] == 1 and third_stats["page_in_failures"]["checksum"] == 1
    # Without a tier nothing is asked.
    plain = fak.Engine(model)
    plain.submit(messages=messages, max_tokens=1).wait()
    assert plain.stats()["page_ins"] == 0 and sum(plain.stats()["page_in_failures"].values()) == 0
