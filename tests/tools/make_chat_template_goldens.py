#!/usr/bin/env python3
"""Renders the real chat templates in tests/data/chat_templates/*.jinja with jinja2, the way
Hugging Face `apply_chat_template` does, over a fixed set of conversations, and writes
tests/data/chat_templates/goldens.json: the expected text of every (template, conversation,
add_generation_prompt, tools), or the error jinja raised. tests/tokenizer/chat_template_test.cc
checks fak's hand-written renderers and tests/tokenizer/jinja_test.cc fak's Jinja interpreter
against it byte for byte.

Usage: python3 tests/tools/make_chat_template_goldens.py   (jinja2 3.1.x; writes the file in place)

Two deliberate departures from transformers, both documented in docs/chat-templates.md:
  * `strftime_now` formats a fixed instant (NOW, UTC) and only for the templates that call it
    unguarded (Granite, gpt-oss) and the "dated" case; elsewhere it is undefined, so Llama 3.2's
    template prints its fixed default date ("26 Jul 2024") and renderings do not change daily;
  * tool messages, for templates that have no tool role (they raise on it or drop it), are
    passed as user messages — the convention fak applies (TOOL_AS_USER below).
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "chat_templates")

# Per template: the model's BOS/EOS texts (tokenizer_config.json) and whether a tool message
# becomes a user message before rendering (the template has no tool role).
MODELS = {
    "google-gemma-2-2b-it": dict(bos="<bos>", eos="<eos>", tool_as_user=True),
    "google-gemma-3-1b-it": dict(bos="<bos>", eos="<eos>", tool_as_user=True),
    "meta-llama-Meta-Llama-3-8B-Instruct": dict(bos="<|begin_of_text|>", eos="<|eot_id|>", tool_as_user=False),
    "meta-llama-Llama-3.2-3B-Instruct": dict(bos="<|begin_of_text|>", eos="<|eot_id|>", tool_as_user=False),
    "meta-llama-Llama-3.3-70B-Instruct": dict(bos="<|begin_of_text|>", eos="<|eot_id|>", tool_as_user=False),
    "teknium-OpenHermes-2.5-Mistral-7B": dict(bos="<s>", eos="<|im_end|>", tool_as_user=False),
    "Qwen-Qwen2-7B-Instruct": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "Qwen-Qwen2.5-0.5B-Instruct": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "HuggingFaceTB-SmolLM2-135M-Instruct": dict(bos="<|im_start|>", eos="<|im_end|>", tool_as_user=False),
    "mistralai-Mistral-7B-Instruct-v0.2-legacy": dict(bos="<s>", eos="</s>", tool_as_user=True),
    "mistralai-Mistral-7B-Instruct-v0.1": dict(bos="<s>", eos="</s>", tool_as_user=True),
    "mistralai-Mistral-7B-Instruct-v0.2": dict(bos="<s>", eos="</s>", tool_as_user=True),
    # v0.3 has its own tool role: [TOOL_RESULTS] (ids of 9 letters or digits).
    "mistralai-Mistral-7B-Instruct-v0.3": dict(bos="<s>", eos="</s>", tool_as_user=False),
    "meta-llama-Llama-2-7b-chat-hf": dict(bos="<s>", eos="</s>", tool_as_user=True),
    "microsoft-Phi-3-mini-4k-instruct": dict(bos="<s>", eos="<|endoftext|>", tool_as_user=True),
    "microsoft-Phi-3.5-mini-instruct": dict(bos="<s>", eos="<|endoftext|>", tool_as_user=True),
    # Templates outside the hand-rendered families: rendered by fak's Jinja interpreter only.
    "Qwen-Qwen3-0.6B": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "Qwen-QwQ-32B": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "Qwen-Qwen2.5-7B-Instruct": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "meta-llama-Llama-3.1-8B-Instruct": dict(bos="<|begin_of_text|>", eos="<|eot_id|>", tool_as_user=False),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": dict(bos="<|begin_of_text|>", eos="<|im_end|>", tool_as_user=False),
    "microsoft-Phi-4-mini-instruct": dict(bos="<|endoftext|>", eos="<|endoftext|>", tool_as_user=False),
    "HuggingFaceTB-SmolLM3-3B": dict(bos=None, eos="<|im_end|>", tool_as_user=False),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": dict(bos="<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                                                     eos="<\uff5cend\u2581of\u2581sentence\uff5c>", tool_as_user=False),
    "deepseek-ai-DeepSeek-V3.1": dict(bos="<\uff5cbegin\u2581of\u2581sentence\uff5c>",
                                      eos="<\uff5cend\u2581of\u2581sentence\uff5c>", tool_as_user=False),
    "openai-gpt-oss-120b": dict(bos="<|startoftext|>", eos="<|return|>", tool_as_user=False, dated=True),
    "ibm-granite-granite-3.3-2B-Instruct": dict(bos="<|end_of_text|>", eos="<|end_of_text|>", tool_as_user=False,
                                                dated=True),
    "mistralai-Mistral-Nemo-Instruct-2407": dict(bos="<s>", eos="</s>", tool_as_user=False),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": dict(bos="<BOS_TOKEN>", eos="<|END_OF_TURN_TOKEN|>",
                                                          tool_as_user=False),
}

# The instant strftime_now formats where it is defined (2026-01-02 03:04:05 UTC).
NOW = 1767323045


def m(role, content):
    return {"role": role, "content": content}


SYS = "You are a concise assistant."
CONVERSATIONS = {
    "single_user": [m("user", "What is the capital of France?")],
    "system_user": [m("system", SYS), m("user", "Hello!")],
    "multi_turn": [m("user", "Hi"), m("assistant", "Hello! How can I help?"), m("user", "Tell me a joke.")],
    "system_multi_turn": [m("system", SYS), m("user", "Hi"), m("assistant", "Hello! How can I help?"),
                          m("user", "Tell me a joke.")],
    "ends_with_assistant": [m("system", SYS), m("user", "Hi"), m("assistant", "Hello!")],
    "tool_result": [m("user", "What's the weather in Paris?"), m("assistant", "Let me check."),
                    m("tool", '{"temp": 21, "sky": "clear"}')],
    "system_tool_result": [m("system", SYS), m("user", "Weather?"), m("assistant", "Checking."),
                           m("tool", 'line one\nline "two"\t\\ café ☀\x01')],
    "two_tool_results": [m("user", "Compare"), m("assistant", "Fetching both."), m("tool", "A=1"),
                         m("tool", "B=2")],
    "whitespace": [m("system", "  Be brief.  \n"), m("user", "\n  Hello there  \t\n"), m("assistant", "  Hi!  "),
                   m("user", " \u3000Next\u00a0\u2028")],
    "unicode": [m("user", "Grüße, 世界! 🌍 — naïve café \"quotes\" \\ back\\slash <b>&amp;</b>")],
    "empty_content": [m("system", ""), m("user", "")],
    "empty_user": [m("user", "")],
    "system_only": [m("system", SYS)],
    "system_in_middle": [m("user", "Hi"), m("system", "Switch to French."), m("user", "Bonjour")],
    "two_users": [m("user", "First"), m("user", "Second")],
    "assistant_first": [m("assistant", "I start."), m("user", "OK")],
}

# Conversations with what ChatMessage cannot carry (tool calls) and a tool list, for the
# interpreter: rendered with tools=TOOLS.
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
    "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"temp": 21, "sky": "clear"}'}
# The same with Mistral's call ids (its v0.3 template requires 9 letters or digits).
CALL9 = {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "id": "a1B2c3D4e"}]}
RESULT9 = {**RESULT, "tool_call_id": "a1B2c3D4e"}
TOOL_CONVERSATIONS = {
    "tools_offered": [m("user", "What's the weather in Paris?")],
    "tools_system_offered": [m("system", SYS), m("user", "What's the weather in Paris?")],
    "tool_call_result": [m("user", "What's the weather in Paris?"), CALL, RESULT],
    "tool_call_answered": [m("system", SYS), m("user", "What's the weather in Paris?"), CALL, RESULT,
                           m("assistant", "It is 21 degrees and clear in Paris."), m("user", "Thanks!")],
    "tool_call_answered_id9": [m("system", SYS), m("user", "What's the weather in Paris?"), CALL9, RESULT9,
                               m("assistant", "It is 21 degrees and clear in Paris."), m("user", "Thanks!")],
}
# Reasoning in an earlier assistant turn (Qwen3 and DeepSeek drop it from history).
CONVERSATIONS["reasoning_history"] = [
    m("user", "What is 2+2?"), m("assistant", "<think>\nSimple arithmetic.\n</think>\n\n2+2 = 4."),
    m("user", "And 3+3?")]

# Pairs (base, extended = base + assistant reply + next user turn) for the prefix-stability check.
PREFIX_PAIRS = [("single_user", "single_user_next"), ("system_user", "system_user_next"),
                ("tool_result", "tool_result_next")]
for base, ext in PREFIX_PAIRS:
    CONVERSATIONS[ext] = CONVERSATIONS[base] + [m("assistant", "Here you go."), m("user", "And now?")]


# Single constructs (name, template, variables) for tests/tokenizer/jinja_test.cc: what jinja2 renders
# for each, or the error it raises; written to jinja_constructs.json.
CONSTRUCTS = [
 ("whitespace", "  {% if true %}\n  yes\n  {% endif %}\n{{- ' x ' -}}\n  {# c #}\nend\n", {}),
 ("lstrip_after_output", "{{ 'a' }}  {% if true %}b{% endif %}", {}),
 ("plus_keeps", "  {%+ if true %}b{% endif %}", {}),
 ("plus_keeps_newline", "{% if true +%}\nx{% endif +%}\n{# c +#}\ny", {}),
 ("loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %}", {"xs": ["a","b","c"]}),
 ("loop_else_filter", "{% for x in xs if x > 1 %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}|{% for x in xs if x > 1 %}{{ loop.length }}{% endfor %}", {"xs": [1,2,3]}),
 ("loop_scope", "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 10 %}{{ x }},{% endfor %}{{ x }}", {}),
 ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
 ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
 ("macro", "{% macro greet(name, greeting='Hello', end='!') %}{{ greeting }}, {{ name }}{{ end }}{% endmacro %}{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet('C', end='?') }}", {}),
 ("macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", {}),
 ("set_block", "{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]", {}),
 ("literals", "{{ 1 }} {{ 1.5 }} {{ 1e3 }} {{ 'a' \"b\" }} {{ true }} {{ none }} {{ [1, 'x', none, true] }} {{ {'k': [1.0, 2]} }} {{ (1,) }} {{ (1, 2) }}", {}),
 ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2 * 3 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 0.1 + 0.2 }} {{ 1e20 * 10 }} {{ 1 / 3 }}", {}),
 ("concat_binds_tighter_than_plus", "{{ 1 + 2 ~ 3 }}", {}),
 ("precedence", "{{ 1 ~ 2 + 3 }} {{ -2 ** 2 }} {{ 2 * 3 ~ 4 }} {{ not 1 == 2 }} {{ 1 if false }}|{{ 'y' if 0 else 'n' }} {{ 1 or 2 }} {{ 0 and 2 }} {{ none or 'd' }}", {}),
 ("compare_in", "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 'ell' in 'hello' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 'x' in undefined_thing }}", {}),
 ("access", "{{ m.role }} {{ m['content'] }} {{ m.missing }}|{{ m.missing is defined }} {{ xs[0] }} {{ xs[-1] }} {{ xs[5] }}| {{ xs.1 }} {{ m.get('role') }} {{ m.get('nope', 'dflt') }} {{ m['items'] is defined }}", {"m": {"role": "user", "content": "hi"}, "xs": ["a","b"]}),
 ("slices", "{{ s[1:3] }} {{ s[::-1] }} {{ s[-2:] }} {{ xs[1:] }} {{ xs[::2] }} {{ s[:100] }}|{{ 'héllo'[1:3] }}", {"s": "hello", "xs": [1,2,3,4]}),
 ("string_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ s.strip().upper() }} {{ 'HeLLo wORLD'.lower() }} {{ 'hello world'.title() }} {{ 'hello World'.capitalize() }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }} {{ 'aXbX'.replace('X', '-') }} {{ 'xxabcxx'.strip('x') }} {{ 'abc'.find('c') }} {{ ', '.join(['a','b']) }}", {"s": "  Hi there \n"}),
 ("filters", "{{ ' x '|trim }}|{{ [1,2,3]|length }} {{ 'héllo'|length }} {{ 'abc'|upper }} {{ 'ABC'|lower }} {{ 'hello world-foo'|title }} {{ 'hELLO'|capitalize }} {{ [1,2]|join('-') }} {{ undefined_x|default('dflt') }} {{ ''|default('e', true) }} {{ [3,1]|first }} {{ [3,1]|last }} {{ 'ab'|list }} {{ 5|string }} {{ '42'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '1.5'|float }} {{ 'a-b'|replace('-', '+') }} {{ {'a':1,'b':2}|items|list }} {{ [1,2,3]|reverse|list }} {{ [3,1,2]|sort }} {{ [1,2,2]|unique|list }} {{ [1,2,3]|sum }} {{ -3|abs }} {{ 'a\nb'|indent(2) }} {{ '<&>'|e }} {{ 'x'|safe }}", {}),
 ("attr_filters", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }} {{ ms|rejectattr('role', 'eq', 'user')|list|length }} {{ ms|map(attribute='content')|map('upper')|list }} {{ [0,1,2]|select|list }} {{ [0,1,2]|reject('odd')|list }} {{ ms|selectattr('tool')|list }}", {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
 ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é\"\\n'|tojson }}|{{ [1.5, none, true]|tojson }}|{{ {}|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}", {"d": {"z": 1, "a": [1, {"b": "c"}], "e": []}}),
 ("tests", "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }} {{ 1 is number }} {{ 1.0 is float }} {{ 1 is integer }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'abc' is lower }} {{ x is not none }}", {"x": 1}),
 ("items_dict", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys()|list }} {{ d.values()|list }} {% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
 ("raise", "{% if x %}{{ raise_exception('bad x: ' ~ x) }}{% endif %}ok", {"x": 3}),
 ("undefined_attr_error", "{{ nothing.attr }}", {}),
 ("undefined_ops", "[{{ nothing }}] {{ nothing|length }} {{ nothing|trim }}[{% for x in nothing %}x{% endfor %}] {{ nothing is none }} {{ not nothing }}", {}),
 ("type_error", "{{ 'a' + 1 }}", {}),
 ("none_iter_error", "{% for t in tools %}{% endfor %}", {"tools": None}),
 ("trailing_newline", "a\n\n", {}),
 ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
 ("string_escapes", "{{ 'a\\tb\\\\c\\'d\\u00e9\\x41' }}", {}),
 ("nested_braces", "{{ {'a': {'b': 1}} }}", {}),
 ("dict_literal_set", "{% set d = {'x': 1, 'y': [2, 3]} %}{{ d.y[1] }} {{ d['x'] }}", {}),
]


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override of jinja's tojson (no HTML escaping).
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(compiled, model, messages, add_generation_prompt, tools=None, now=None):
    """jinja2's text, or the error it raised, as a case's fields."""
    kwargs = dict(messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt)
    if model["bos"] is not None:
        kwargs["bos_token"] = model["bos"]
    kwargs["eos_token"] = model["eos"]
    if now is not None:
        kwargs["strftime_now"] = strftime_now
    try:
        return dict(expected=compiled.render(**kwargs))
    except TemplateError as e:
        return dict(error=str(e))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:  # Python errors inside the template
        return dict(error=f"{type(e).__name__}: {e}")


def main():
    env = environment()
    cases = []
    templates = {}
    for name, model in MODELS.items():
        with open(os.path.join(DATA, name + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        templates[name] = dict(file=name + ".jinja", bos=model["bos"] or "", eos=model["eos"] or "",
                               tool_as_user=model["tool_as_user"])
        compiled = env.from_string(source)
        now = NOW if model.get("dated") else None

        def as_model_sees(conv):
            return [m("user", x["content"]) if model["tool_as_user"] and x["role"] == "tool" else dict(x) for x in conv]

        for conv_name, conv in CONVERSATIONS.items():
            for add_generation_prompt in (True, False):
                case = dict(template=name, conversation=conv_name, add_generation_prompt=add_generation_prompt)
                if now is not None:
                    case["now"] = now
                case.update(render(compiled, model, as_model_sees(conv), add_generation_prompt, now=now))
                cases.append(case)
        for conv_name, conv in TOOL_CONVERSATIONS.items():
            for add_generation_prompt in (True, False):
                case = dict(template=name, conversation=conv_name, add_generation_prompt=add_generation_prompt,
                            tools="TOOLS")
                if now is not None:
                    case["now"] = now
                case.update(render(compiled, model, as_model_sees(conv), add_generation_prompt, TOOLS, now))
                cases.append(case)
    # strftime_now defined for a template that guards it: Llama 3.2 prints the day instead of its default.
    model = MODELS["meta-llama-Llama-3.2-3B-Instruct"]
    with open(os.path.join(DATA, "meta-llama-Llama-3.2-3B-Instruct.jinja"), encoding="utf-8") as f:
        compiled = env.from_string(f.read())
    case = dict(template="meta-llama-Llama-3.2-3B-Instruct", conversation="single_user", add_generation_prompt=True,
                now=NOW)
    case.update(render(compiled, model, CONVERSATIONS["single_user"], True, now=NOW))
    cases.append(case)
    out = dict(
        generator="tests/tools/make_chat_template_goldens.py",
        jinja2=jinja2.__version__,
        templates=templates,
        conversations={k: v for k, v in CONVERSATIONS.items()},
        tool_conversations=TOOL_CONVERSATIONS,
        tools=dict(TOOLS=TOOLS),
        prefix_pairs=[list(p) for p in PREFIX_PAIRS],
        cases=cases,
    )
    path = os.path.join(DATA, "goldens.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{path}: {len(cases)} cases, {sum('error' in c for c in cases)} errors", file=sys.stderr)
    constructs = []
    for name, source, variables in CONSTRUCTS:
        case = dict(name=name, source=source, variables=variables)
        try:
            case["expected"] = env.from_string(source).render(**variables)
        except Exception as e:  # noqa: BLE001 - jinja2 and Python errors alike are the expected outcome
            case["error"] = f"{type(e).__name__}: {e}"
        constructs.append(case)
    path = os.path.join(DATA, "jinja_constructs.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(constructs, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{path}: {len(constructs)} constructs", file=sys.stderr)


if __name__ == "__main__":
    main()
