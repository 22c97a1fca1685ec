#!/usr/bin/env python3
"""Fleet benchmark (docs/fleet.md; outside CI): multi-turn chats from many clients against
  one    one worker with all the threads,
  rr     N workers (1 thread each) behind HAProxy round-robin, each with its own cache,
  rr+kv  the same with --fleet (shared KV tier: a miss another worker made is paged in),
  hash   N fleet workers behind deploy/haproxy/fak-fleet.cfg (conversation hash + shared tier).
Reports prompt-token hit rate (cached / prompt), completion tokens/s and TTFT p50/p99 per setup.

  bench/fleet/fleet_bench.py [--fak build/release/tools/fak/fak] [--model embedded] [--workers 3]
                             [--clients 12] [--turns 4] [--rounds 3]
Needs redis-server, haproxy (scripts/setup) and the openai package (build/server-venv has it).
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "You are a careful assistant for a large engineering team. " * 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if socket.socket().connect_ex(("127.0.0.1", port)) == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Proc:
    def __init__(self, argv, env=None, port_from_log=False):
        self.proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE if port_from_log else subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, text=True)
        self.port = None
        if port_from_log:
            for line in self.proc.stderr:
                if "listening on http://" in line:
                    self.port = int(line.rsplit(":", 1)[1])
                    break
            threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_setup(kind, args, tmp):
    procs = []
    redis_port = None
    if kind in ("rr+kv", "hash"):
        redis_port = free_port()
        procs.append(Proc(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", tmp]))
        wait_port(redis_port)
    n = 1 if kind == "one" else args.workers
    threads = args.workers if kind == "one" else 1
    workers = []
    for i in range(n):
        argv = [args.fak, "serve", args.model, "--port", "0", "--threads", str(threads)]
        if redis_port:
            argv += ["--fleet", f"redis://127.0.0.1:{redis_port}", "--worker-id", f"w{i + 1}",
                     "--state", tempfile.mkdtemp(dir=tmp)]
        w = Proc(argv, port_from_log=True)
        workers.append(w)
        procs.append(w)
    if kind == "one":
        return procs, workers[0].port
    cfg = (ROOT / "deploy/haproxy/fak-fleet.cfg").read_text()
    if kind != "hash":
        cfg = "\n".join(l for l in cfg.splitlines() if not l.strip().startswith(("balance", "hash-type")))
        cfg = cfg.replace("backend fak_workers\n", "backend fak_workers\n    balance roundrobin\n")
    servers = "".join(f"    server w{i + 1} 127.0.0.1:{w.port}\n" for i, w in enumerate(workers))
    cfg = "\n".join(l for l in cfg.splitlines() if not l.strip().startswith("server ")) + "\n" + servers
    path = Path(tmp) / f"haproxy-{kind}.cfg"
    path.write_text(cfg)
    port = free_port()
    procs.append(Proc(["haproxy", "-db", "-f", str(path)], env=dict(os.environ, FAK_ROUTER_BIND=f"127.0.0.1:{port}")))
    wait_port(port)
    return procs, port


def run_client(port, model, client_id, turns, results):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=2, timeout=300)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Client {client_id} asks about topic {client_id * 7919 % 1000}."}]
    for t in range(turns):
        start = time.perf_counter()
        ttft = None
        text = ""
        usage = None
        stream = client.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0,
                                                stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                ttft = ttft or time.perf_counter() - start
                text += chunk.choices[0].delta.content
            if chunk.usage:
                usage = chunk.usage
        results.append((ttft or time.perf_counter() - start, usage))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Follow-up {t} from {client_id}."}]


def measure(kind, args):
    tmp = tempfile.mkdtemp(prefix="fak-fleet-bench-")
    procs, port = start_setup(kind, args, tmp)
    try:
        model = args.model_id or ("embedded" if args.model == "embedded" else Path(args.model).name)
        results = []
        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            for f in [pool.submit(run_client, port, model, c, args.turns, results) for c in range(args.clients)]:
                f.result()
        wall = time.perf_counter() - start
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    prompt = sum(u.prompt_tokens for _, u in results if u)
    cached = sum(u.prompt_tokens_details.cached_tokens for _, u in results if u and u.prompt_tokens_details)
    completion = sum(u.completion_tokens for _, u in results if u)
    ttfts = sorted(t for t, _ in results)
    return {"hit": cached / max(prompt, 1), "tps": completion / wall, "p50": statistics.median(ttfts),
            "p99": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fak", default=str(ROOT / "build/release/tools/fak/fak"))
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--model-id", default=None)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setups", default="one,rr,rr+kv,hash")
    args = ap.parse_args()
    setups = args.setups.split(",")
    runs = {k: [] for k in setups}
    for r in range(args.rounds):  # interleaved rounds: the machine's noise falls on every setup alike
        for k in setups:
            runs[k].append(measure(k, args))
            print(f"round {r + 1} {k}: {runs[k][-1]}", file=sys.stderr, flush=True)
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in runs.items()}
    base = med.get("rr", next(iter(med.values())))
    print(f"model {args.model}, {args.workers} workers x 1 thread (one: 1 x {args.workers}), {args.clients} clients x "
          f"{args.turns} turns, medians of {args.rounds} interleaved rounds")
    print("| setup | hit rate | tokens/s | vs rr | TTFT p50 ms | TTFT p99 ms |")
    print("|---|---|---|---|---|---|")
    for k, m in med.items():
        print(f"| {k} | {m['hit']:.1%} | {m['tps']:.1f} | {m['tps'] / base['tps']:.2f}x | {m['p50'] * 1e3:.0f} | {m['p99'] * 1e3:.0f} |")


if __name__ == "__main__":
    main()
