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


def test_refusals(llm):
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tool_choice="required", max_tokens=2)
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}, max_tokens=2)
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tools=TOOLS, stream=True, max_tokens=2)
    with pytest.raises(fak.InvalidArgumentError):
        llm.create_chat_completion(ASK, tools=[{"type": "function", "function": {"name": "f", "parameters": {
            "type": "string", "pattern": "^a"}}}], tool_choice="required", max_tokens=2)
