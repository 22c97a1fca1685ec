"""fak: exact, evictable KV caches rebuilt from text — fak's C++ inference core from Python.

    import fak
    model = fak.Model.load("embedded")              # or a GGUF path
    reply = model.create_chat_completion([{"role": "user", "content": "Hello"}], max_tokens=16)
    print(reply["choices"][0]["message"]["content"])

    llm = fak.Llama(model_path="model.gguf")         # llama-cpp-python's entry point
    print(llm.create_completion("Once upon a time", max_tokens=16)["choices"][0]["text"])

docs/python.md describes the package; every failing call raises a fak.Error subclass.
"""

from __future__ import annotations

from . import errors
from ._chat import Llama, LlamaState, create_chat_completion, create_completion
from ._fak import (
    Auditor,
    BlobStore,
    Certificate,
    ChatTemplate,
    decode_loop_seconds,
    json_object_gbnf,
    json_schema_to_gbnf,
    parse_tool_calls,
    ToolCallReader,
    Engine,
    Model,
    Planner,
    RadixTree,
    RecallStore,
    Request,
    ScreenChain,
    Session,
    TextCorpus,
    kernel_tier,
    set_kernel_tier,
    sha256,
    supported_kernel_tiers,
    version,
)
from .errors import (
    CorruptionError,
    Error,
    FailedPreconditionError,
    InvalidArgumentError,
    IOFailureError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
    UnsupportedError,
    VerificationFailedError,
)

__version__ = version()


__all__ = [
    "Auditor", "BlobStore", "Certificate", "ChatTemplate", "Engine", "Model", "Planner", "RadixTree", "RecallStore", "Request",
    "ScreenChain", "Session", "TextCorpus",
    "Llama", "LlamaState", "create_chat_completion", "create_completion", "errors", "json_object_gbnf", "json_schema_to_gbnf", "kernel_tier", "parse_tool_calls", "set_kernel_tier", "sha256", "supported_kernel_tiers", "ToolCallReader",
    "version", "Error", "InvalidArgumentError", "NotFoundError", "CorruptionError", "IOFailureError",
    "UnsupportedError", "ResourceExhaustedError", "FailedPreconditionError", "VerificationFailedError",
    "UnavailableError",
]
