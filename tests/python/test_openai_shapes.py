"""fak.Llama, create_completion and the sampling fields from Python: the server's defaults, seeds,
penalties, logit_bias, logprobs and n choices."""

import math

import pytest

import fak

MESSAGES = [{"role": "user", "content": "Tell me something."}]


def test_llama_entry_point_answers_both_shapes():
    llm = fak.Llama(model_path="embedded", n_ctx=512, n_threads=2, seed=3)
    assert llm.n_ctx() == 512
    out = llm.create_completion("Once upon a time", max_tokens=6)
    assert out["object"] == "text_completion" and out["seed"] == 3
    assert out["usage"]["prompt_tokens"] == len("Once upon a time") + 1  # byte tokenizer + BOS
    assert llm("Once upon a time", max_tokens=6)["choices"][0]["text"] == out["choices"][0]["text"]  # the seed
    chat = llm.create_chat_completion(MESSAGES, max_tokens=4)
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
    assert llm.detokenize(llm.tokenize(b"abc", add_bos=False)) == b"abc"


def test_defaults_are_the_servers(model):
    # temperature 1 and a random seed, reported: two calls differ, and the reported seed reproduces.
    # The tokens' bytes are compared, not the text: the embedded model draws mostly stray bytes,
    # which all decode to U+FFFD, so two different draws often read alike as text.
    def drawn_bytes(reply):
        return [entry["bytes"] for entry in reply["choices"][0]["logprobs"]["content"]]

    a = model.create_chat_completion(MESSAGES, max_tokens=32, logprobs=True)
    b = model.create_chat_completion(MESSAGES, max_tokens=32, logprobs=True)
    assert a["seed"] != b["seed"] and 0 <= a["seed"] < 2**53
    assert drawn_bytes(a) != drawn_bytes(b)
    again = model.create_chat_completion(MESSAGES, max_tokens=32, logprobs=True, seed=a["seed"])
    assert drawn_bytes(again) == drawn_bytes(a)
    assert again["choices"][0]["message"]["content"] == a["choices"][0]["message"]["content"]


def test_penalties_bias_and_min_p_change_the_reply(model):
    greedy = dict(max_tokens=24, temperature=0)
    control = fak.create_completion(model.engine, "penalties", **greedy)["choices"][0]["text"]
    for extra in [dict(frequency_penalty=2.0), dict(repeat_penalty=3.0)]:
        assert fak.create_completion(model.engine, "penalties", **greedy, **extra)["choices"][0]["text"] != control
    drawn = dict(max_tokens=24, temperature=1, seed=8)  # a presence penalty is one fixed step: it moves the draws
    plain = fak.create_completion(model.engine, "penalties", **drawn)["choices"][0]["text"]
    assert fak.create_completion(model.engine, "penalties", **drawn)["choices"][0]["text"] == plain
    assert fak.create_completion(model.engine, "penalties", presence_penalty=2.0, **drawn)["choices"][0]["text"] != plain
    favourite = max((c for c in control if c.isascii()), key=control.count)
    [token] = model.tokenize(favourite)
    banned = fak.create_completion(model.engine, "penalties", logit_bias={token: -100}, **greedy)["choices"][0]["text"]
    assert favourite not in banned  # control: it is in the unbiased reply
    promoted = fak.create_completion(model.engine, "penalties", logit_bias={token: 100}, **greedy)["choices"][0]["text"]
    assert promoted == favourite * 24
    assert fak.create_completion(model.engine, "penalties", max_tokens=24, temperature=1.5, seed=9,
                                 min_p=1.0)["choices"][0]["text"] == control
    with pytest.raises(fak.InvalidArgumentError, match="min_p"):
        fak.create_completion(model.engine, "x", min_p=2.0)
    with pytest.raises(fak.InvalidArgumentError, match="logit_bias"):
        fak.create_completion(model.engine, "x", logit_bias={-1: 1.0})


def test_logprobs_and_n_choices(model):
    out = model.create_chat_completion(MESSAGES, max_tokens=5, temperature=0, logprobs=True, top_logprobs=2)
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == out["usage"]["completion_tokens"]
    for entry in content:
        assert entry["logprob"] <= 0 and len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] == entry["logprob"]  # greedy takes the most likely
    probs = fak.create_completion(model.engine, "logprobs", max_tokens=4, temperature=0, logprobs=3)
    lp = probs["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 4
    assert all(math.isclose(max(alt.values()), chosen) for alt, chosen in zip(lp["top_logprobs"], lp["token_logprobs"]))
    three = fak.create_completion(model.engine, "share " * 20, max_tokens=6, temperature=1, seed=21, n=3)
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    assert three["usage"]["prompt_tokens_details"]["cached_tokens"] >= len("share " * 20)  # prefilled once
    for i, choice in enumerate(three["choices"]):
        alone = fak.create_completion(model.engine, "share " * 20, max_tokens=6, temperature=1, seed=21 + i)
        assert alone["choices"][0]["text"] == choice["text"]
    with pytest.raises(fak.InvalidArgumentError, match="top_logprobs needs logprobs"):
        model.create_chat_completion(MESSAGES, top_logprobs=2)


def test_embeddings_are_the_servers(model):
    llm = fak.Llama(model_path="embedded", n_threads=2)
    out = llm.create_embedding(["the cat sat", "something else"])
    a, b = (d["embedding"] for d in out["data"])
    assert len(a) == model.config["hidden_size"] and a != b and out["fak"]["pooling"] == "mean"
    assert llm.embed("the cat sat") == a  # deterministic
    assert llm.embed(model.tokenize("the cat sat", add_bos=True)) == a
    assert abs(sum(x * x for x in a) - 1.0) < 1e-4  # unit length, as the server's
    # Through the model's engine (batched with its other requests), pooled as asked.
    ids = model.tokenize("the cat sat", add_bos=True)
    assert model.pooling == "mean" and model.embed(ids).tolist() == a
    last = model.embed(ids, pooling="last")
    assert last.tolist() != a and last.tolist() == llm.embed("the cat sat", pooling="last")
    assert model.embed(ids, normalize=False).tolist() != a
    # Engine.submit(embed=...): the same vectors, batched beside a generation on a user-made engine.
    engine = fak.Engine(model)
    chat = engine.submit("a reply beside the embeddings", max_tokens=8)
    reqs = [engine.submit(ids, embed=True), engine.submit(ids, embed="last")]
    got = [r.wait() for r in reqs]
    assert got[0]["embedding"].tolist() == a and got[1]["embedding"].tolist() == last.tolist()
    assert got[0]["tokens"] == [] and "embedding" not in chat.wait()
    with pytest.raises(fak.InvalidArgumentError, match="embed: only with a prompt"):
        engine.submit(messages=[{"role": "user", "content": "hi"}], embed=True)
    with pytest.raises(fak.InvalidArgumentError, match="mean, last, cls"):
        engine.submit(ids, embed="max")
    with pytest.raises(fak.InvalidArgumentError, match="empty prompt"):
        model.embed([])
    with pytest.raises(fak.InvalidArgumentError, match="mean, last, cls"):
        model.embed(ids, pooling="max")
