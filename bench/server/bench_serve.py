"""One client program for any OpenAI-compatible server: the same request mix, the same measures.

Workloads (greedy, streamed, every request distinct so no answer is cached whole):
  chats   independent one-turn chats, `--requests-per-client` per client
  agents  each client is an agent: a shared instruction prompt, its own task, then `--turns` turns,
          each adding a tool result and the model's reply to the conversation (where exact prefix
          reuse pays)
Measures per run: output tokens/s over the wall time, TTFT p50/p99 (request sent → first content
chunk), ITL p50/p99 (gaps between content chunks). Output tokens are the streamed content chunks
(both servers send one per token, except where a multi-byte character or a stop-string prefix is
held back), counted the same way for every server.

  python bench_serve.py --base-url http://127.0.0.1:8080/v1 --model ID --label fak \
      --workload agents --clients 1,4,16 [--max-tokens 16] [--turns 3] [--json-out FILE]
"""

import argparse
import concurrent.futures
import json
import statistics
import sys
import time

import openai

INSTRUCTIONS = (
    "You are an operations agent. You read tool results, decide the next step and answer briefly. "
    "Rules: never invent tool output; quote numbers exactly; prefer the cheapest safe action; when a "
    "tool fails, say which and why; keep every answer under two sentences. Tools: search(query), "
    "read(path), run(command), ask(question). The environment is a staging cluster with three "
    "services (api, worker, cache) and a nightly deploy window. ")


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


def stream_one(client, model, messages, max_tokens):
    """(content text, TTFT seconds, inter-chunk gaps, chunks) of one streamed chat."""
    start = time.perf_counter()
    last = None
    ttft = None
    gaps = []
    chunks = 0
    text = ""
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens,
                                                temperature=0, stream=True):
        for choice in chunk.choices:
            piece = choice.delta.content or ""
            if not piece:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - start
            else:
                gaps.append(now - last)
            last = now
            chunks += 1
            text += piece
    return text, ttft, gaps, chunks


def run_client(base_url, model, workload, index, args):
    client = openai.OpenAI(base_url=base_url, api_key=args.api_key, max_retries=0, timeout=600)
    ttfts, gaps, tokens = [], [], 0
    if workload == "chats":
        for j in range(args.requests_per_client):
            messages = [{"role": "user", "content": f"Question {index}.{j}: in one sentence, what is a "
                                                    f"{['queue', 'cache', 'lock', 'index'][j % 4]} number {index * 97 + j}?"}]
            _, ttft, g, n = stream_one(client, model, messages, args.max_tokens)
            ttfts.append(ttft)
            gaps += g
            tokens += n
    else:
        messages = [{"role": "system", "content": INSTRUCTIONS},
                    {"role": "user", "content": f"Task {index}: find why service {['api', 'worker', 'cache'][index % 3]} "
                                                f"restarted {index + 2} times last night."}]
        for turn in range(args.turns):
            text, ttft, g, n = stream_one(client, model, messages, args.max_tokens)
            ttfts.append(ttft)
            gaps += g
            tokens += n
            messages.append({"role": "assistant", "content": text})
            messages.append({"role": "user", "content": f"Tool result {turn}: exit code {turn + index}, "
                                                        f"log line 'oom-killed pid {1000 + index * 10 + turn}', "
                                                        f"memory limit 512Mi, usage peak {400 + turn * 60}Mi."})
    return ttfts, gaps, tokens


def run(args, clients):
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda i: run_client(args.base_url, args.model, args.workload, i, args), range(clients)))
    wall = time.perf_counter() - start
    ttfts = [t for r in results for t in r[0] if t is not None]
    gaps = [g for r in results for g in r[1]]
    tokens = sum(r[2] for r in results)
    return {
        "server": args.label, "workload": args.workload, "clients": clients,
        "requests": len([t for r in results for t in r[0]]), "output_tokens": tokens, "wall_s": round(wall, 2),
        "throughput_tok_s": round(tokens / wall, 2),
        "ttft_p50_ms": round(1000 * percentile(ttfts, 50), 1), "ttft_p99_ms": round(1000 * percentile(ttfts, 99), 1),
        "itl_p50_ms": round(1000 * percentile(gaps, 50), 1), "itl_p99_ms": round(1000 * percentile(gaps, 99), 1),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--api-key", default="unused")
    p.add_argument("--workload", choices=["chats", "agents"], required=True)
    p.add_argument("--clients", default="1,4,16")
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--json-out")
    args = p.parse_args()
    rows = []
    for clients in [int(c) for c in args.clients.split(",")]:
        row = run(args, clients)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json_out:
        with open(args.json_out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())
