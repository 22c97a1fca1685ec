"""create_chat_completion: fak's Engine behind the OpenAI-shaped dicts llama-cpp-python returns."""

from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

# fak's finish reasons as OpenAI names them.
_FINISH = {"stop_token": "stop", "stop_string": "stop", "length": "length", "cancelled": "stop", "deadline": "length"}


def _finish_name(reason: str) -> str:
    return _FINISH.get(reason, reason)


def create_chat_completion(
    engine: Any,
    messages: Sequence[Dict[str, Any]],
    *,
    stream: bool = False,
    max_tokens: Optional[int] = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: Optional[int] = None,
    stop: Optional[Union[str, List[str]]] = None,
    repeat_penalty: float = 1.0,
    model: Optional[str] = None,
    tenant: str = "default",
) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
    """A chat completion on `engine`, shaped like llama-cpp-python's ``Llama.create_chat_completion``.

    Returns a ``chat.completion`` dict, or with ``stream=True`` an iterator of ``chat.completion.chunk``
    dicts (a role delta, content deltas, then one with ``finish_reason``). Breaking out of the
    iteration cancels the request. ``max_tokens`` None means 256.
    """
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    request = engine.submit(
        messages=list(messages),
        max_tokens=256 if max_tokens is None else max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=0 if seed is None else seed,
        stop=stops,
        repeat_penalty=repeat_penalty,
        tenant=tenant,
        stream=stream,
    )
    completion_id = "chatcmpl-" + uuid.uuid4().hex
    created = int(time.time())
    model_name = model or "fak"
    if stream:
        return _stream(request, completion_id, created, model_name)
    result = request.wait()
    prompt_tokens = result["usage"]["prompt_tokens"]
    completion_tokens = result["usage"]["generated_tokens"]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model_name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result["text"]},
                "logprobs": None,
                "finish_reason": _finish_name(result["finish_reason"]),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": result["usage"]["cached_tokens"]},
        },
    }


def model_chat_completion(model: Any, messages: Sequence[Dict[str, Any]], **kwargs: Any) -> Any:
    """create_chat_completion on the model's own engine (Model.create_chat_completion)."""
    if model.chat_template is None:
        from .errors import FailedPreconditionError

        raise FailedPreconditionError(
            "FailedPrecondition", f"model {model.label} has no chat template fak can render: {model.chat_template_error}"
        )
    kwargs.setdefault("model", model.label)
    return create_chat_completion(model.engine, messages, **kwargs)


def _chunk(completion_id: str, created: int, model: str, delta: Dict[str, Any], finish: Optional[str]) -> Dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _stream(request: Any, completion_id: str, created: int, model: str) -> Iterator[Dict[str, Any]]:
    finished = False
    try:
        yield _chunk(completion_id, created, model, {"role": "assistant"}, None)
        while True:
            event = request.next_event()
            if event is None:
                break
            _token, text = event
            if text:
                yield _chunk(completion_id, created, model, {"content": text}, None)
        result = request.wait()
        finished = True
        yield _chunk(completion_id, created, model, {}, _finish_name(result["finish_reason"]))
    finally:
        if not finished:
            request.cancel()  # the caller stopped iterating: free the engine's slot
