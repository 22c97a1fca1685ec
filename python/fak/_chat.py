"""OpenAI-shaped completions on fak's Engine, as llama-cpp-python returns them, with `fak serve`'s
defaults: create_chat_completion, create_completion and the Llama-like entry point fak.Llama."""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

# fak's finish reasons as OpenAI names them.
_FINISH = {"stop_token": "stop", "stop_string": "stop", "length": "length", "cancelled": "stop", "deadline": "length"}

# `fak serve`'s defaults (docs/server.md): OpenAI's temperature 1, 256 tokens, a random seed.
DEFAULT_MAX_TOKENS = 256
MAX_CHOICES = 16


def _finish_name(reason: str) -> str:
    return _FINISH.get(reason, reason)


def _draw_seed() -> int:
    """A random seed below 2**53, as the server draws one (a JavaScript client reads it exactly)."""
    return random.SystemRandom().getrandbits(53)


def _logprob_entry(model: Any, token: int, logprob: float) -> Dict[str, Any]:
    raw = model.detokenize_bytes([token])
    return {"token": raw.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(raw)}


def _chat_logprobs(model: Any, entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    content = []
    for e in entries:
        item = _logprob_entry(model, e["token"], e["logprob"])
        item["top_logprobs"] = [_logprob_entry(model, t, lp) for t, lp in e["top_logprobs"]]
        content.append(item)
    return {"content": content, "refusal": None}


def _completion_logprobs(model: Any, entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    tokens, token_logprobs, top, offsets, offset = [], [], [], [], 0
    for e in entries:
        raw = model.detokenize_bytes([e["token"]])
        tokens.append(raw.decode("utf-8", "replace"))
        token_logprobs.append(e["logprob"])
        alternatives: Dict[str, float] = {}
        for t, lp in e["top_logprobs"]:
            alternatives.setdefault(model.detokenize([t]), lp)
        top.append(alternatives)
        offsets.append(offset)
        offset += len(raw)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets}


def _usage(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    # As the server counts n choices: the prompt once, the most any choice reused, every reply.
    prompt = results[0]["usage"]["prompt_tokens"]
    completion = sum(r["usage"]["generated_tokens"] for r in results)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": max(r["usage"]["cached_tokens"] for r in results)},
    }


def _constraint(response_format: Optional[Dict[str, Any]], grammar: Optional[str]) -> Optional[str]:
    """The GBNF a reply must be a sentence of, as `fak serve` reads ``response_format`` and ``grammar``:
    None for no constraint. Refusals raise InvalidArgumentError naming the keyword."""
    from ._fak import json_object_gbnf, json_schema_to_gbnf
    from .errors import InvalidArgumentError

    def refuse(param: str, message: str) -> InvalidArgumentError:
        return InvalidArgumentError("InvalidArgument", f"{param}: {message}")

    if grammar is not None:
        plain_text = isinstance(response_format, dict) and response_format.get("type") == "text"
        if response_format is not None and not plain_text:
            raise refuse("grammar", "give one of response_format (json_object, json_schema) and grammar")
        if not isinstance(grammar, str):
            raise refuse("grammar", f"expected GBNF text (str), not {type(grammar).__name__}")
        return grammar
    if response_format is None:
        return None
    if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
        raise refuse("response_format", "expected a dict with a type (text, json_object or json_schema)")
    kind = response_format["type"]
    for key in response_format:
        if key != "type" and not (kind == "json_schema" and key == "json_schema"):
            raise refuse(f"response_format.{key}", f"unknown field in response_format of type {kind}")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_object_gbnf()
    if kind != "json_schema":
        raise refuse("response_format.type", f"expected text, json_object or json_schema, not {kind!r}")
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise refuse("response_format.json_schema", "expected a dict with name and schema")
    for key, value in spec.items():
        if key in ("name", "description") and not isinstance(value, str):
            raise refuse(f"response_format.json_schema.{key}", "expected a str")
        if key == "strict" and value is not None and not isinstance(value, bool):
            raise refuse("response_format.json_schema.strict", "expected a bool")
        if key not in ("name", "description", "strict", "schema"):
            raise refuse(f"response_format.json_schema.{key}", "unknown field in json_schema")
    for key in ("name", "schema"):
        if key not in spec:
            raise refuse(f"response_format.json_schema.{key}", "required")
    try:
        schema_json = json.dumps(spec["schema"], allow_nan=False)
    except (TypeError, ValueError) as e:
        raise refuse("response_format.json_schema.schema", f"not JSON: {e}") from None
    try:  # strict or not, the reply is held to the whole schema: a grammar cannot half-enforce one
        return json_schema_to_gbnf(schema_json)
    except InvalidArgumentError as e:
        raise refuse("response_format.json_schema.schema", e.message) from None


def _tool_fields(tools: Optional[List[Dict[str, Any]]], tool_choice: Optional[Union[str, Dict[str, Any]]],
                 parallel_tool_calls: bool) -> Dict[str, Any]:
    """Engine.submit's tools, tool_choice and parallel_tool_calls for the OpenAI fields; {} for no tools."""
    from .errors import InvalidArgumentError

    if tools is None:
        if tool_choice not in (None, "none", "auto"):
            raise InvalidArgumentError("InvalidArgument", "tool_choice: needs tools")
        return {}
    if not isinstance(tools, list) or not tools:
        raise InvalidArgumentError("InvalidArgument", "tools: expected a non-empty list of function tools")
    if tool_choice is None or tool_choice in ("auto", "none", "required"):
        choice = tool_choice or "auto"
    elif (isinstance(tool_choice, dict) and tool_choice.get("type") == "function"
          and isinstance(tool_choice.get("function"), dict) and isinstance(tool_choice["function"].get("name"), str)):
        choice = tool_choice["function"]["name"]
    else:
        raise InvalidArgumentError("InvalidArgument",
                                   "tool_choice: expected auto, none, required or {'type': 'function', 'function': {'name': ...}}")
    return {"tools": json.dumps(tools), "tool_choice": choice, "parallel_tool_calls": bool(parallel_tool_calls)}


def _submit_all(engine: Any, n: int, seed: Optional[int], stream: bool, logprobs: bool, top_logprobs: int,
                max_tokens: Optional[int], stop: Optional[Union[str, List[str]]],
                response_format: Optional[Dict[str, Any]], grammar: Optional[str], **request: Any) -> Any:
    from .errors import InvalidArgumentError

    if not 1 <= n <= MAX_CHOICES:
        raise InvalidArgumentError("InvalidArgument", f"n must be in [1, {MAX_CHOICES}], not {n}")
    if stream and n != 1:
        raise InvalidArgumentError("InvalidArgument", "stream=True takes n=1 (use fak serve for streamed choices)")
    if stream and logprobs:
        raise InvalidArgumentError("InvalidArgument", "stream=True does not report logprobs here (fak serve streams them)")
    if top_logprobs and not logprobs:
        raise InvalidArgumentError("InvalidArgument", "top_logprobs needs logprobs=True")
    gbnf = _constraint(response_format, grammar)
    if gbnf is not None:
        request["grammar"] = gbnf
    seed = _draw_seed() if seed is None else seed
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    requests = []
    try:
        for i in range(n):  # the later choices wait for the first one's prompt in the tree
            requests.append(engine.submit(max_tokens=DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
                                          seed=(seed + i) % 2**64, stop=stops, stream=stream, logprobs=logprobs,
                                          top_logprobs=top_logprobs, **request))
    except BaseException:
        for r in requests:
            r.cancel()
        raise
    return seed, requests


def create_chat_completion(
    engine: Any,
    messages: Sequence[Dict[str, Any]],
    *,
    stream: bool = False,
    max_tokens: Optional[int] = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float = 0.0,
    seed: Optional[int] = None,
    stop: Optional[Union[str, List[str]]] = None,
    repeat_penalty: float = 1.0,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    logit_bias: Optional[Dict[int, float]] = None,
    logprobs: bool = False,
    top_logprobs: int = 0,
    n: int = 1,
    response_format: Optional[Dict[str, Any]] = None,
    grammar: Optional[str] = None,
    tools: Optional[List[Dict[str, Any]]] = None,
    tool_choice: Optional[Union[str, Dict[str, Any]]] = None,
    parallel_tool_calls: bool = True,
    model: Optional[str] = None,
    tenant: str = "default",
    _results: Optional[List[Dict[str, Any]]] = None,
) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    """A chat completion on `engine`, shaped like llama-cpp-python's ``Llama.create_chat_completion``.

    Returns a ``chat.completion`` dict, or with ``stream=True`` an iterator of ``chat.completion.chunk``
    dicts (a role delta, content deltas, then one with ``finish_reason``). Breaking out of the
    iteration cancels the request. Defaults are `fak serve`'s: temperature 1, ``max_tokens`` None
    means 256, no seed means a random one (reported as the reply's ``seed``; choice i of n uses
    seed + i). ``response_format`` ({"type": "json_object"} or {"type": "json_schema", "json_schema":
    {"name", "schema"}}) or ``grammar`` (GBNF text) holds the reply to a grammar, as the server does
    (docs/grammar.md). ``tools`` (OpenAI's list of function tools), ``tool_choice`` ("auto" by default,
    "none", "required" or {"type": "function", "function": {"name": ...}}) and ``parallel_tool_calls``
    work as on the server (docs/server.md "Tool calls"): the tools are rendered by the model's template,
    required/named force calls by a grammar, and each reply's calls become ``message.tool_calls`` with
    ``finish_reason`` "tool_calls"; streamed, the text before a call comes as content deltas and the
    calls as ``tool_calls`` deltas after it, as fak serve streams them.
    """
    tool_fields = _tool_fields(tools, tool_choice, parallel_tool_calls)
    reads_calls = tool_fields.get("tool_choice", "none") != "none"
    seed, requests = _submit_all(engine, n, seed, stream, logprobs, top_logprobs, max_tokens, stop,
                                 response_format, grammar, messages=list(messages), **tool_fields, temperature=temperature,
                                 top_p=top_p, top_k=top_k, min_p=min_p, repeat_penalty=repeat_penalty,
                                 presence_penalty=presence_penalty, frequency_penalty=frequency_penalty,
                                 logit_bias=logit_bias, tenant=tenant)
    completion_id = "chatcmpl-" + uuid.uuid4().hex
    created = int(time.time())
    model_name = model or "fak"
    if stream:
        reader = None
        if reads_calls:
            from ._fak import ToolCallReader

            reader = ToolCallReader(engine.model.chat_template, tool_fields["tools"])
        return _stream(requests[0], completion_id, created, model_name, seed, tool_reader=reader)
    results = [r.wait() for r in requests]
    if _results is not None:  # fak.Llama keeps its context from them
        _results.extend(results)
    choices = []
    for i, result in enumerate(results):
        message: Dict[str, Any] = {"role": "assistant", "content": result["text"]}
        finish = _finish_name(result["finish_reason"])
        if reads_calls:
            from ._fak import parse_tool_calls

            read = parse_tool_calls(engine.model.chat_template, tool_fields["tools"], result["text"], _draw_seed())
            if read["tool_calls"]:
                message = {"role": "assistant", "content": read["content"].strip() or None, "tool_calls": read["tool_calls"]}
                finish = "tool_calls" if finish == "stop" else finish
        choices.append({
            "index": i,
            "message": message,
            "logprobs": _chat_logprobs(engine.model, result.get("logprobs", [])) if logprobs else None,
            "finish_reason": finish,
        })
    return {"id": completion_id, "object": "chat.completion", "created": created, "model": model_name, "seed": seed,
            "choices": choices, "usage": _usage(results)}


def create_completion(
    engine: Any,
    prompt: str,
    *,
    stream: bool = False,
    max_tokens: Optional[int] = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float = 0.0,
    seed: Optional[int] = None,
    stop: Optional[Union[str, List[str]]] = None,
    repeat_penalty: float = 1.0,
    presence_penalty: float = 0.0,
    frequency_penalty: float = 0.0,
    logit_bias: Optional[Dict[int, float]] = None,
    logprobs: Optional[int] = None,
    n: int = 1,
    response_format: Optional[Dict[str, Any]] = None,
    grammar: Optional[str] = None,
    model: Optional[str] = None,
    tenant: str = "default",
    _results: Optional[List[Dict[str, Any]]] = None,
) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    """A text completion of `prompt` (BOS first where the model wants one), shaped like
    llama-cpp-python's ``Llama.create_completion``: a ``text_completion`` dict, or with ``stream=True``
    an iterator of them. ``logprobs=k`` reports each token's log-probability and the k most likely
    alternatives, as OpenAI's completions do. Defaults, ``response_format`` and ``grammar`` as
    create_chat_completion's."""
    m = engine.model
    ids = m.tokenize(prompt, add_bos=True)
    seed, requests = _submit_all(engine, n, seed, stream, logprobs is not None, logprobs or 0, max_tokens, stop,
                                 response_format, grammar, prompt=ids, stop_tokens=[m.eos_id] if m.eos_id >= 0 else [],
                                 temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                 repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                                 frequency_penalty=frequency_penalty, logit_bias=logit_bias, tenant=tenant)
    completion_id = "cmpl-" + uuid.uuid4().hex
    created = int(time.time())
    model_name = model or "fak"
    if stream:
        return _stream(requests[0], completion_id, created, model_name, seed, chat=False)
    results = [r.wait() for r in requests]
    if _results is not None:  # fak.Llama keeps its context from them
        _results.extend(results)
    choices = [{
        "index": i,
        "text": result["text"],
        "logprobs": _completion_logprobs(m, result.get("logprobs", [])) if logprobs is not None else None,
        "finish_reason": _finish_name(result["finish_reason"]),
    } for i, result in enumerate(results)]
    return {"id": completion_id, "object": "text_completion", "created": created, "model": model_name, "seed": seed,
            "choices": choices, "usage": _usage(results)}


def model_chat_completion(fak_model: Any, messages: Sequence[Dict[str, Any]], /, engine: Any = None,
                          **kwargs: Any) -> Any:
    """create_chat_completion on the model's own engine (Model.create_chat_completion), or on
    `engine`; `model` in kwargs is the name the reply carries."""
    if fak_model.chat_template is None:
        from .errors import FailedPreconditionError

        raise FailedPreconditionError(
            "FailedPrecondition",
            f"model {fak_model.label} has no chat template fak can render: {fak_model.chat_template_error}",
        )
    kwargs.setdefault("model", fak_model.label)
    return create_chat_completion(fak_model.engine if engine is None else engine, messages, **kwargs)


def _chunk(completion_id: str, created: int, model: str, seed: int, delta: Dict[str, Any], finish: Optional[str],
           chat: bool) -> Dict[str, Any]:
    choice: Dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
    if chat:
        choice["delta"] = delta
    else:
        choice["text"] = delta.get("content", "")
    return {"id": completion_id, "object": "chat.completion.chunk" if chat else "text_completion", "created": created,
            "model": model, "seed": seed, "choices": [choice]}


def _stream(request: Any, completion_id: str, created: int, model: str, seed: int,
            chat: bool = True, tool_reader: Any = None) -> Iterator[Dict[str, Any]]:
    """The chunks of a streamed reply. With `tool_reader` (a fak.ToolCallReader) the text is read for
    calls: only what cannot be the start of a call streams as content, and once the reply is done its
    calls follow as ``tool_calls`` deltas, as fak serve streams them."""
    finished = False
    try:
        if chat:
            yield _chunk(completion_id, created, model, seed, {"role": "assistant"}, None, chat)
        while True:
            event = request.next_event()
            if event is None:
                break
            _token, text = event
            if tool_reader is not None:
                text = tool_reader.feed(text)
            if text:
                yield _chunk(completion_id, created, model, seed, {"content": text}, None, chat)
        result = request.wait()
        finished = True
        finish = _finish_name(result["finish_reason"])
        if tool_reader is not None:
            tool_reader.finish(result["text"], _draw_seed())
            rest = tool_reader.unshown_content()
            if rest:
                yield _chunk(completion_id, created, model, seed, {"content": rest}, None, chat)
            for delta in tool_reader.deltas():
                yield _chunk(completion_id, created, model, seed, {"tool_calls": [delta]}, None, chat)
            if tool_reader.tool_calls and finish == "stop":
                finish = "tool_calls"
        yield _chunk(completion_id, created, model, seed, {}, finish, chat)
    finally:
        if not finished:
            request.cancel()  # the caller stopped iterating: free the engine's slot


# The format tag of a saved Llama state (LlamaState.to_bytes).
STATE_FORMAT = "fak.llama_state/1"


class LlamaState:
    """A saved Llama context, the fak way: the transcript (token ids and their text) rather than KV
    bytes, plus the sha256 of the next-token logits after it, which restoring recomputes and checks,
    and the KV tier directory the context's slabs were written through to, when there was one.
    ``to_bytes()`` / ``LlamaState.from_bytes()``: UTF-8 JSON (docs/python.md, "Saved state")."""

    def __init__(self, tokens: List[int], text: str, weights_digest: str, logits_sha256: str,
                 kv_tier_dir: Optional[str]) -> None:
        self.tokens = tokens
        self.text = text
        self.weights_digest = weights_digest
        self.logits_sha256 = logits_sha256
        self.kv_tier_dir = kv_tier_dir

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def to_bytes(self) -> bytes:
        return json.dumps({"format": STATE_FORMAT, "weights_digest": self.weights_digest, "tokens": self.tokens,
                           "text": self.text, "next_logits_sha256": self.logits_sha256,
                           "kv_tier_dir": self.kv_tier_dir}, ensure_ascii=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> "LlamaState":
        from .errors import CorruptionError

        try:
            d = json.loads(data)
        except (UnicodeDecodeError, ValueError) as e:
            raise CorruptionError("Corruption", f"state: not JSON: {e}") from None
        if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
            raise CorruptionError("Corruption", f"state: not a {STATE_FORMAT} record")
        tokens = d.get("tokens")
        if (not isinstance(tokens, list) or not tokens
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)):
            raise CorruptionError("Corruption", "state: tokens must be a non-empty list of ints")
        fields = {"text": str, "weights_digest": str, "next_logits_sha256": str}
        for key, kind in fields.items():
            if not isinstance(d.get(key), kind):
                raise CorruptionError("Corruption", f"state: {key} must be a str")
        if d.get("kv_tier_dir") is not None and not isinstance(d["kv_tier_dir"], str):
            raise CorruptionError("Corruption", "state: kv_tier_dir must be a str or null")
        return cls(tokens, d["text"], d["weights_digest"], d["next_logits_sha256"], d.get("kv_tier_dir"))


class Llama:
    """llama-cpp-python's entry point over fak: ``fak.Llama(model_path=...)`` loads the model (a GGUF
    file, a Hugging Face checkpoint or "embedded") and answers ``create_completion`` and
    ``create_chat_completion`` with the OpenAI-shaped dicts llama-cpp-python returns, with `fak
    serve`'s defaults. ``n_ctx`` caps the context (0: the model's), ``n_threads`` the threads per
    forward pass (None: one per hardware thread), ``seed`` is the default seed of every call (None:
    a random one per call, reported in the reply). ``kv_tier_dir``: a directory KV tier the engine
    writes its prefix tree through to and pages prompts in from (another Llama, or a later process,
    over the same directory reuses it). ``kv_dtype``: the KV cache's element type (None: FAK_KV_DTYPE, else
    'f16'; Model.load). ``save_state``/``load_state`` keep the last completion's
    context (its prompt and reply)."""

    def __init__(self, model_path: str, *, n_ctx: int = 0, n_threads: Optional[int] = None,
                 seed: Optional[int] = None, kv_tier_dir: Optional[str] = None, kv_dtype: Optional[str] = None,
                 verbose: bool = False) -> None:
        from ._fak import Engine, Model

        del verbose  # accepted for llama-cpp-python's callers; fak logs nothing here
        self.model_path = model_path
        self.model = Model.load(model_path, threads=n_threads or 0, max_context=n_ctx, kv_dtype=kv_dtype)
        self.seed = seed
        self.kv_tier_dir = kv_tier_dir
        self.engine = self.model.engine if kv_tier_dir is None else Engine(self.model, kv_tier_dir=kv_tier_dir)
        self._context: List[int] = []  # the last completion's prompt and reply tokens

    def n_ctx(self) -> int:
        return self.model.context_length

    def tokenize(self, text: Union[str, bytes], add_bos: bool = True) -> List[int]:
        return self.model.tokenize(text, add_bos=add_bos)

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return self.model.detokenize_bytes(list(tokens))

    def embed(self, text: Union[str, Sequence[int]], pooling: Optional[str] = None) -> List[float]:
        """The text's (or token ids') embedding, unit length, as `fak serve`'s /v1/embeddings gives it."""
        ids = self.model.tokenize(text, add_bos=True) if isinstance(text, str) else list(text)
        return self.model.embed(ids, pooling=pooling).tolist()

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None,
                         pooling: Optional[str] = None) -> Dict[str, Any]:
        """OpenAI's embeddings object for one text or a list, with the pooling named."""
        texts = [input] if isinstance(input, str) else list(input)
        data, tokens = [], 0
        for i, text in enumerate(texts):
            ids = self.model.tokenize(text, add_bos=True)
            tokens += len(ids)
            data.append({"object": "embedding", "index": i, "embedding": self.model.embed(ids, pooling=pooling).tolist()})
        return {"object": "list", "data": data, "model": model or self.model_path,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                "fak": {"pooling": pooling or self.model.pooling, "normalized": True}}

    def create_completion(self, prompt: str, **kwargs: Any) -> Any:
        kwargs.setdefault("seed", self.seed)
        kwargs.setdefault("model", self.model_path)
        results: List[Dict[str, Any]] = []
        reply = create_completion(self.engine, prompt, _results=results, **kwargs)
        if results:
            self._context = self.model.tokenize(prompt, add_bos=True) + results[0]["tokens"]
        return reply

    __call__ = create_completion

    def create_chat_completion(self, messages: Sequence[Dict[str, Any]], **kwargs: Any) -> Any:
        kwargs.setdefault("seed", self.seed)
        kwargs.setdefault("model", self.model_path)
        results: List[Dict[str, Any]] = []
        reply = model_chat_completion(self.model, messages, engine=self.engine, _results=results, **kwargs)
        if results:
            self._context = self.model.encode_chat(list(messages)) + results[0]["tokens"]
        return reply

    def next_token_logits(self, tokens: Optional[Sequence[int]] = None) -> Any:
        """The logits (float32 array) of the token after ``tokens`` (default: the saved context), run
        on this Llama's engine, so a cached prefix is read from its tree or tier."""
        logits, _ = self._next_token_logits(list(self._context if tokens is None else tokens))
        return logits

    def _next_token_logits(self, tokens: List[int]) -> Any:
        from .errors import FailedPreconditionError

        if not tokens:
            raise FailedPreconditionError("FailedPrecondition", "no context: run a completion first")
        result = self.engine.submit(tokens, max_tokens=1, stop_tokens=[], record_logits=True).wait()
        return result["logits"][0], result["usage"]

    def save_state(self) -> LlamaState:
        """The last (non-streamed) completion's context as a LlamaState: its tokens and text, the
        sha256 of the next-token logits after it, and the KV tier its slabs were flushed to, if any."""
        from ._fak import sha256

        logits, _ = self._next_token_logits(self._context)
        self.engine.flush()  # with a tier: the context's slabs are on disk before the state names them
        return LlamaState(list(self._context), self.model.detokenize(self._context), self.model.weights_digest,
                          sha256(logits.tobytes()), self.kv_tier_dir)

    def load_state(self, state: Union[LlamaState, bytes]) -> Dict[str, int]:
        """Restores a saved context: rebuilds its KV in this Llama's engine (read from the tree, paged
        in from the KV tier, or recomputed) and checks that the next-token logits equal the saved
        ones bit for bit. Returns how the KV was rebuilt ({tokens, cached_tokens, paged_tokens}).
        A state of other weights is FailedPreconditionError, a malformed one CorruptionError, one
        whose logits differ (a tampered transcript) VerificationFailedError; on any of them this
        Llama keeps its context."""
        from ._fak import sha256
        from .errors import CorruptionError, FailedPreconditionError, VerificationFailedError

        if isinstance(state, (bytes, bytearray)):
            state = LlamaState.from_bytes(bytes(state))
        if state.weights_digest != self.model.weights_digest:
            raise FailedPreconditionError(
                "FailedPrecondition", f"state: saved from other weights (sha256 {state.weights_digest[:16]}..., "
                f"this model's {self.model.weights_digest[:16]}...)")
        if self.model.detokenize(state.tokens) != state.text:
            raise CorruptionError("Corruption", "state: text is not the text of its tokens")
        logits, usage = self._next_token_logits(list(state.tokens))
        digest = sha256(logits.tobytes())
        if digest != state.logits_sha256:
            raise VerificationFailedError(
                "VerificationFailed", f"state: the next-token logits after restoring {len(state.tokens)} tokens "
                f"differ from those saved (sha256 {digest[:16]}..., saved {state.logits_sha256[:16]}...)")
        self._context = list(state.tokens)
        return {"tokens": len(state.tokens), "cached_tokens": usage["cached_tokens"],
                "paged_tokens": usage["paged_tokens"]}
