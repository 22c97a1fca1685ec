"""Python's per-token decode overhead: Session.decode from Python against the C++ Model::Decode loop.

Both run in this process on the same model, from the same prefilled context over the same tokens,
in alternating rounds so machine noise hits both; the report is the per-token time of each (median
and min over rounds) and their ratio. Two models: the SmolLM2-135M shape (random weights; the
target: < 5% overhead there) and the embedded default, whose ~1 ms decode exposes the absolute
per-call cost of the binding; that cost over the SmolLM2 C++ time is the overhead it implies there,
a figure machine noise disturbs far less than the direct ratio of two ~100 ms timings.
docs/python.md has the numbers.

    python bench/python/decode_overhead.py [--threads 2] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time

import fak


def python_decode_seconds(model: fak.Model, prompt: list[int], tokens: list[int]) -> float:
    session = fak.Session(model)
    if prompt:
        session.prefill(prompt)
    decode = session.decode
    start = time.perf_counter()
    for t in tokens:
        decode(t)
    elapsed = time.perf_counter() - start
    session.close()
    return elapsed


def measure(model: fak.Model, prompt_tokens: int, decode_tokens: int, rounds: int) -> tuple[list[float], list[float]]:
    """Per-token seconds of the C++ loop and of the Python loop, one pair per round."""
    vocab = model.vocab_size
    prompt = [(17 * i + 3) % vocab for i in range(prompt_tokens)]
    tokens = [(31 * i + 5) % vocab for i in range(decode_tokens)]
    fak.decode_loop_seconds(model, prompt, tokens[:4])  # warm up both paths (page in the weights)
    python_decode_seconds(model, prompt, tokens[:4])
    cpp, py = [], []
    for _ in range(rounds):
        cpp.append(fak.decode_loop_seconds(model, prompt, tokens) / len(tokens))
        py.append(python_decode_seconds(model, prompt, tokens) / len(tokens))
    return cpp, py


def report(label: str, cpp: list[float], py: list[float]) -> None:
    c_med, p_med = statistics.median(cpp) * 1e3, statistics.median(py) * 1e3
    c_min, p_min = min(cpp) * 1e3, min(py) * 1e3
    print(f"{label}")
    print(f"  C++ Model::Decode     {c_med:9.3f} ms/token median  {c_min:9.3f} min")
    print(f"  Python Session.decode {p_med:9.3f} ms/token median  {p_min:9.3f} min")
    print(f"  overhead              {(p_med / c_med - 1) * 100:+8.2f}% median     {(p_min / c_min - 1) * 100:+8.2f}% min")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0, help="threads per forward pass (0: one per hardware thread)")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    print(f"fak {fak.version()}, kernel tier {fak.kernel_tier()}, threads {args.threads or 'all'}, "
          f"{args.prompt_tokens} prompt tokens, {args.rounds} rounds")

    smol = fak.Model.load("shape:smollm2-135m", threads=args.threads)
    s_cpp, s_py = measure(smol, args.prompt_tokens, 16, args.rounds)
    report(smol.label + ", 16 tokens per round", s_cpp, s_py)

    small = fak.Model.load("embedded", threads=args.threads)
    e_cpp, e_py = measure(small, args.prompt_tokens, 256, args.rounds)
    report(small.label + ", 256 tokens per round", e_cpp, e_py)

    per_call_us = (min(e_py) - min(e_cpp)) * 1e6
    print(f"binding cost per decode call (embedded, min): {per_call_us:.1f} us "
          f"= {per_call_us / (min(s_cpp) * 1e6) * 100:.3f}% of a SmolLM2-135M decode")


if __name__ == "__main__":
    main()
