"""fak.Session: exactness through Python, zero-copy logits, clone/prefix, certified eviction, errors."""

import json
import os

import numpy as np
import pytest

import fak


def test_prefill_equals_token_by_token_decode_bit_for_bit(model):
    tokens = model.tokenize("The cache is a build artifact of the text.")
    whole = fak.Session(model).prefill(tokens)

    stepwise = fak.Session(model)
    logits = stepwise.prefill(tokens[:1])
    for t in tokens[1:]:
        logits = stepwise.decode(t)

    assert whole.dtype == np.float32 and whole.shape == (model.vocab_size,)
    assert np.max(np.abs(whole - logits)) == 0.0
    # Control: the compared logits depend on the context, so equality above is not vacuous.
    other = fak.Session(model).prefill(tokens[:-1] + [(tokens[-1] + 1) % 256])
    assert np.max(np.abs(whole - other)) > 0.0


def test_logits_are_numpy_arrays_that_own_no_copy(model):
    logits = fak.Session(model).prefill(model.tokenize("hi"))
    assert isinstance(logits, np.ndarray)
    assert not logits.flags["OWNDATA"]  # a view of the buffer the C++ call returned
    assert logits.base is not None
    assert np.isfinite(logits).all()


def test_clone_and_prefix_are_independent_and_exact(model):
    tokens = model.tokenize("abcdefgh")
    s = fak.Session(model)
    s.prefill(tokens[:4], segment="head")
    s.prefill(tokens[4:], segment="tail")
    c = s.clone()
    assert c.digest() == s.digest() and len(c) == len(s) == len(tokens)
    a = s.decode(ord("!"))
    b = c.decode(ord("!"))
    assert np.max(np.abs(a - b)) == 0.0
    assert len(s) == len(tokens) + 1

    p = s.prefix(6)
    assert len(p) == 6 and [seg["n_tokens"] for seg in p.segments] == [4, 2]
    fresh = fak.Session(model)
    fresh.prefill(tokens[:6])
    assert p.digest() == fresh.digest()
    assert np.max(np.abs(p.decode(7) - fresh.decode(7))) == 0.0


def test_evict_returns_a_certificate_that_verifies(model, auditor, tmp_path):
    s = fak.Session(model, auditor=auditor)
    s.prefill("You are terse.", segment="system", kind="system")
    secret = "tool: the door code is 4921"
    s.prefill(secret, segment="tool", kind="tool_result")
    never_saw = fak.Session(model)
    never_saw.prefill("You are terse.")

    cert = s.evict("tool", reason="quarantined by test")
    assert cert.subject == fak.sha256(secret.encode())
    assert cert.segment_id == "tool" and cert.evicted_count == len(secret)
    assert cert.max_abs_delta == 0.0
    assert cert.cache_digest_after == s.digest() == never_saw.digest()
    assert cert.verify(auditor.public_key)
    assert cert.check(auditor.public_key) == ("none", "")
    assert [seg["id"] for seg in s.segments] == ["system"]

    # The JSON round trip keeps a verifiable certificate.
    again = fak.Certificate.from_json(cert.to_json(), auditor.journal_path)
    assert again.verify(auditor.public_key)

    # Another key does not verify it.
    other = fak.Auditor(str(tmp_path / "other.log"))
    with pytest.raises(fak.VerificationFailedError, match="unknown_key"):
        cert.verify(other.public_key)

    # Editing the journal breaks it.
    path = tmp_path / "journal.log"
    rows = path.read_text().splitlines()
    row = json.loads(rows[-1])
    row["subject"] = "0" * 64
    rows[-1] = json.dumps(row, separators=(",", ":"), sort_keys=True)
    path.write_text("\n".join(rows) + "\n")
    fault, detail = cert.check(auditor.public_key)
    assert fault != "none" and detail


def test_evict_refuses_inexact_and_leaves_the_session_as_it_was(model, auditor):
    s = fak.Session(model, auditor=auditor)
    s.prefill("first", segment="a")
    s.prefill("second", segment="b")
    before = s.digest()
    with pytest.raises(fak.FailedPreconditionError):
        s.evict("a")  # "b" attended to it: not exact without repair
    assert s.digest() == before and len(s.segments) == 2

    cert = s.evict("a", repair="recompute_tail")
    assert cert.n_recomputed == len("second")
    assert cert.verify()
    fresh = fak.Session(model)
    fresh.prefill("second")
    assert s.digest() == fresh.digest()


def test_evict_needs_an_auditor_and_a_known_segment(model, auditor):
    s = fak.Session(model)
    s.prefill("x", segment="x")
    with pytest.raises(fak.FailedPreconditionError, match="auditor"):
        s.evict("x")
    s2 = fak.Session(model, auditor=auditor)
    s2.prefill("x", segment="x")
    with pytest.raises(fak.NotFoundError):
        s2.evict("nope")
    with pytest.raises(fak.InvalidArgumentError):
        s2.evict("x", repair="approximate")


def test_error_paths_raise_typed_exceptions(model):
    with pytest.raises(fak.NotFoundError) as info:
        fak.Model.load("/no/such/model.gguf")
    assert info.value.code == "NotFound" and "/no/such/model.gguf" in info.value.message

    s = fak.Session(model)
    s.prefill("ok")
    digest = s.digest()
    with pytest.raises(fak.InvalidArgumentError, match="outside the vocabulary"):
        s.decode(model.vocab_size)
    with pytest.raises(fak.InvalidArgumentError):
        s.prefill([1, 2, -5])
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        s.prefill([])
    with pytest.raises(fak.InvalidArgumentError, match="token ids"):
        s.prefill(["a"])
    with pytest.raises(fak.InvalidArgumentError, match="token ids"):
        s.prefill([2**40])
    assert s.digest() == digest  # failed calls changed nothing
    assert s.prefill(np.array([1, 2], dtype=np.int32)).shape == (model.vocab_size,)  # NumPy ids work

    s.close()
    assert s.closed
    with pytest.raises(fak.FailedPreconditionError, match="closed"):
        s.decode(1)
    with pytest.raises(fak.FailedPreconditionError):
        len(s)


def test_generate_is_greedy_and_reproducible(model):
    prompt = model.tokenize("Once upon a time")
    a = fak.Session(model).generate(prompt, max_tokens=8)
    b = fak.Session(model).generate(prompt, max_tokens=8)
    assert a == b and 1 <= len(a) <= 8
    c = fak.Session(model).generate(prompt, max_tokens=8, temperature=0.9, seed=7)
    d = fak.Session(model).generate(prompt, max_tokens=8, temperature=0.9, seed=7)
    assert c == d


def test_generate_is_the_engine_s_generation(model):
    """Session.generate and the engine run the same Generation: the same prompt and seed give the
    same tokens (the CLI check compares `fak run`, fak::Generate and the engine with this prompt and
    these seeds). Control: the two seeds differ, so agreement is not one fixed answer."""
    prompt = [256] + list(b"hello")  # BOS, then the text, as `fak run -p hello` encodes it
    engine = fak.Engine(model)
    by_seed = []
    sampling = dict(max_tokens=24, temperature=1.5, top_p=0.98, repeat_penalty=1.3)
    for seed in (1, 3, 5):
        params = dict(sampling, seed=seed, stop_tokens=[257])
        session_tokens = fak.Session(model).generate(prompt, **params)
        served = engine.submit(prompt, **params).wait()
        assert session_tokens == served["tokens"], seed
        by_seed.append(session_tokens)
    assert by_seed[0] != by_seed[1] != by_seed[2]
    # A stop token ends both on it.
    stop = by_seed[0][4]
    params = dict(sampling, seed=1, stop_tokens=[stop])
    cut = fak.Session(model).generate(prompt, **params)
    assert cut == by_seed[0][: by_seed[0].index(stop) + 1]
    assert engine.submit(prompt, **params).wait()["tokens"] == cut


def test_sessions_in_threads_run_without_the_gil_and_stay_exact(model):
    import threading

    prompts = [model.tokenize(f"thread {i} says hello") for i in range(4)]
    expected = [fak.Session(model).prefill(p) for p in prompts]
    got = [None] * len(prompts)

    def run(i):
        got[i] = fak.Session(model).prefill(prompts[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e, g in zip(expected, got):
        assert np.max(np.abs(e - g)) == 0.0

    # Two threads sharing one session take turns: every token lands, none is lost.
    shared = fak.Session(model)
    shared.prefill([1])

    def feed():
        for t in range(50):
            shared.decode(t)

    pair = [threading.Thread(target=feed) for _ in range(2)]
    for t in pair:
        t.start()
    for t in pair:
        t.join()
    assert len(shared) == 101


def test_auditor_keeps_its_key_and_its_journal_has_one_writer(tmp_path):
    journal, key = str(tmp_path / "j.log"), str(tmp_path / "k.pem")
    first = fak.Auditor(journal, key)
    assert (tmp_path / "k.pem").stat().st_mode & 0o077 == 0  # owner-only
    with pytest.raises(fak.FailedPreconditionError):
        fak.Auditor(journal)  # the journal is locked by `first`
    public_key = first.public_key
    del first
    import gc

    gc.collect()
    assert fak.Auditor(journal, key).public_key == public_key


GEMMA_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "llama_cpp", "gemma3_f32.gguf")


def test_sliding_window_session_gives_the_same_logits():
    # The llama.cpp-made Gemma 3 fixture: 5 sliding layers (window 16) and a global one.
    gemma = fak.Model.load(GEMMA_FIXTURE, threads=1)
    tokens = [(i * 37 + 11) % gemma.vocab_size for i in range(120)]
    full = fak.Session(gemma)
    windowed = fak.Session(gemma, sliding_window=True)
    assert np.max(np.abs(full.prefill(tokens) - windowed.prefill(tokens))) == 0.0
    for t in tokens[:20]:
        assert np.max(np.abs(full.decode(t) - windowed.decode(t))) == 0.0
    assert windowed.allocated_bytes >= windowed.size_bytes > 0
    # Control: the logits depend on the first token, which only the global layer still reads.
    moved = fak.Session(gemma, sliding_window=True).prefill([(tokens[0] + 1) % gemma.vocab_size] + tokens[1:])
    assert np.max(np.abs(moved - fak.Session(gemma).prefill(tokens))) > 0.0
