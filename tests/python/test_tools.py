"""Tool calls from Python, as fak serve takes them: create_chat_completion(tools=..., tool_choice=...)
on the embedded model. Its choices are near-random, so the grammar tool_choice required/named makes
is what makes every call parse and validate against its schema (jsonschema when installed, else the
keys and types by hand)."""

import json

import pytest

import fak

ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
       "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"],
           "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": ADD}},
         {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
ASK = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture(scope="module")
def llm():
    return fak.Llama(model_path="embedded", n_threads=2)


def check(call):
    args = json.loads(call["function"]["arguments"])
    if call["function"]["name"] == "add":
        assert set(args) == {"a", "b"} and all(isinstance(v, int) for v in args.values())
    else:
        assert call["function"]["name"] == "get_weather" and isinstance(args["city"], str) and len(args["city"]) <= 8
    assert call["id"].startswith("call_") and call["type"] == "function"


def test_required_and_named_calls_parse(llm):
    for seed in (1, 2):
        reply = llm.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                           seed=seed, max_tokens=1500)
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        assert choice["message"]["content"] is None
        (call,) = choice["message"]["tool_calls"]
        check(call)
    named = llm.create_chat_completion(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}},
                                       seed=3, max_tokens=1500)
    (call,) = named["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "add"
    check(call)


def test_round_trip_and_none(llm):
    reply = llm.create_chat_completion(ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, seed=4,
                                       max_tokens=1500)
    message = reply["choices"][0]["message"]
    history = ASK + [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "5"}]
    answer = llm.create_chat_completion(history, tools=TOOLS, seed=1, max_tokens=4)
    assert answer["usage"]["prompt_tokens"] > reply["usage"]["prompt_tokens"]
    # none: the tools are not rendered (the prompt is as without them) and no reply is read for calls.
    none = llm.create_chat_completion(ASK, tools=TOOLS, tool_choice="none", seed=1, max_tokens=2)
    plain = llm.create_chat_completion(ASK, seed=1, max_tokens=2)
    assert none["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"]
    assert "tool_calls" not in none["choices"][0]["message"]


def test_parse_tool_calls_reads_the_templates_format(model):
    text = 'Sure.<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    read = fak.parse_tool_calls(model.chat_template, json.dumps(TOOLS), text)
    assert read["content"] == "Sure."
    assert read["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a":1,"b":2}'}
    bad = fak.parse_tool_calls(model.chat_template, json.dumps(TOOLS), '<tool_call>{"name": "sub"}</tool_call>')
    assert bad["tool_calls"] == [] and bad["content"] == '<tool_call>{"name": "sub"}</tool_call>'


def test_streamed_calls_are_tool_call_deltas(llm):
    """Streamed with tools, a forced call arrives as OpenAI's tool_calls deltas (the first with id, type
    and name, then the arguments in pieces); joined, they equal the non-streamed reply's call."""
    kwargs = dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}, seed=5,
                  max_tokens=1500)
    chunks = list(llm.create_chat_completion(ASK, stream=True, **kwargs))
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # Nothing of the call streams as content.
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ""
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas[0]["index"] == 0 and deltas[0]["type"] == "function" and deltas[0]["id"].startswith("call_")
    assert deltas[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert len(deltas) >= 2 and all("id" not in d and d["index"] == 0 for d in deltas[1:])
    arguments = "".join(d["function"]["arguments"] for d in deltas)
    whole = llm.create_chat_completion(ASK, **kwargs)["choices"][0]["message"]["tool_calls"][0]
    assert arguments == whole["function"]["arguments"]
    check({"id": deltas[0]["id"], "type": "function", "function": {"name": "get_weather", "arguments": arguments}})
    # auto on this model writes text: it streams as content, and no call deltas follow (the control).
    free = list(llm.create_chat_completion(ASK, stream=True, tools=TOOLS, seed=5, max_tokens=8))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in free) != ""
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in free)


def test_tool_call_reader_holds_back_what_may_be_a_call(model):
    reader = fak.ToolCallReader(model.chat_template, json.dumps(TOOLS))
    assert reader.feed("Sure. <tool") == "Sure. "
    assert reader.feed("_call>") == ""
    text = 'Sure. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    reader.feed(text[len("Sure. <tool_call>"):])
    reader.finish(text, 3)
    assert reader.content == "Sure." and reader.unshown_content() == ""
    assert [d["function"] for d in reader.deltas()] == [{"name": "add", "arguments": ""}, {"arguments": '{"a":1,"b":2}'}]


def test_refusals(llm):
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tool_choice="required", max_tokens=2)
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}, max_tokens=2)
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "string", "pattern": "^a"}}}], tool_choice="required", max_tokens=2)
