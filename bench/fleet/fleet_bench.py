#!/usr/bin/env python3
"""Fleet benchmark (docs/fleet.md; outside CI): multi-turn chats from many clients against
  one        one worker with all the threads,
  rr         N workers (1 thread each) behind HAProxy round-robin, each with its own cache,
  rr+kv      the same with --fleet (shared KV tier: a miss another worker made is paged in),
  hash       N fleet workers behind deploy/haproxy/fak-fleet.cfg (conversation hash + shared tier),
  sglang     N workers, each with its own cache, behind SGLang's router in its cache-aware mode,
  sglang+kv  the same with fleet workers (cache-aware + cross-worker page-in),
  tree       N fleet workers behind TreeRouter (below): routed by what the workers' trees publish
             (the fleet's tree stream), not by a guess; a request whose prefix another request is
             computing right now waits for that prefill (then hits or pages in) rather than
             computing it again,
  tree-eager the same without that wait.
Two traces, each client one conversation, all sharing one system prompt:
  chat       a short question, then short follow-ups (each turn: the reply and a follow-up),
  agents     the radix bench's "agents" trace (bench/radix_traces.h) from many clients: a 128-word
             system prompt, then each turn a 24-word observation (the same LCG-seeded segments,
             one word per token id), the model's reply between turns.
Reports prompt-token hit rate (cached / prompt) — overall, on first turns (where only the shared
system prompt can be reused) and on later turns (the conversation's own prefix) —, the share of
prompt tokens paged in from the shared tier, the busiest worker's share of the prompt tokens,
completion tokens/s (and its ratio to round-robin's in the same round) and TTFT p50/p99 per setup.
--arrival S spreads the clients' first requests evenly over S seconds (0: all at once, a cold
fleet's worst case: every worker computes the shared system prompt at the same moment).

  bench/fleet/fleet_bench.py [--fak build/release/tools/fak/fak] [--model embedded] [--workers 3]
                             [--trace chat|agents] [--clients 12] [--turns 4] [--arrival 0]
                             [--rounds 3] [--setups one,rr,...]
Needs redis-server, haproxy (scripts/setup) and the openai and sglang-router packages: run it with
build/server-venv/bin/python (scripts/test_server makes that venv). Without sglang-router the
sglang setups are left out (hash is the cache-aware router then).
"""
import argparse
import hashlib
import os
import re
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
from urllib.request import urlopen

import openai

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "You are a careful assistant for a large engineering team. " * 8
# One word per token id of the radix traces: common words, about one token each in a BPE vocabulary.
WORDS = ("time year people way day man thing woman life child world school state family student group country "
         "problem hand part place case week company system program question work government number night point "
         "home water room mother area money story fact month lot right study book eye job word business issue side "
         "kind head house service friend father power hour game line end member law car city community name").split()


def lcg_tokens(n, seed):
    """bench/radix_traces.h's LcgTokens: the same ids, so the segments are the radix bench's."""
    state, out = 2463534242 + seed, []
    for _ in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(state % 49152)
    return out


def words(ids):
    return " ".join(WORDS[i % len(WORDS)] for i in ids) + "."


def conversation(trace, client_id, turns):
    """(system prompt, the user message of each turn) of one client's conversation."""
    if trace == "agents":  # radix_traces.h Agents(): system LcgTokens(128, 5001), turn t of agent a LcgTokens(24, 5100 + 97a + t)
        return words(lcg_tokens(128, 5001)), [words(lcg_tokens(24, 5100 + 97 * client_id + t)) for t in range(1, turns + 1)]
    return SYSTEM, [f"Client {client_id} asks about topic {client_id * 7919 % 1000}."] + \
        [f"Follow-up {t} from {client_id}." for t in range(turns - 1)]


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

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Resp:
    """Just enough of a Redis client (RESP2 over a socket) to read a stream."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        self.sock.sendall(out)
        return self.read()

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest.decode() if kind == b"+" else int(rest)
        n = int(rest)
        if n < 0:
            return None
        if kind == b"$":
            return self.file.read(n + 2)[:-2].decode()
        return [self.read() for _ in range(n)]

    def close(self):
        self.sock.close()


def prefix_chain(messages):
    """prefix_k for k = 1..len(messages), as docs/fleet.md defines it (no tokenizer needed)."""
    chain, h = [], hashlib.sha256(b"fak.prefix.v1\n")
    for m in messages:
        h.update(hashlib.sha256(m["content"].encode()).digest())
        chain.append(h.copy().hexdigest())
    return chain


class Lease:
    """Where a router sent one request; the client says when its first token came and when it ended."""

    def __init__(self, port, on_first=lambda: None, on_end=lambda: None):
        self.port, self.on_first, self.on_end = port, on_first, on_end

    def first_token(self):
        self.on_first()
        self.on_first = lambda: None

    def end(self):
        self.on_end()


class TreeRouter:
    """Routes a chat to the worker whose tree holds its longest prefix, by fact: what each worker
    published on the fleet's tree stream (<prefix>:{fleet}:tree: reset / insert / evict of prefix
    digests per worker and tenant). A worker publishes once a heartbeat (500 ms), so a conversation's
    next turn often comes before its last one is published: for `recent` seconds after a request's
    prefill (its first token) the router also counts its prompt as held there, until the publication
    says what the worker really kept. Among the holders, and when no worker holds more than the
    others, the least busy (requests in flight) wins; a holder more than `slack` requests busier than
    the least busy worker is passed over (the other pages the prefix in from the shared tier).

    With `coalesce`, a request whose prefix is being computed right now on some worker (another
    request's prefill, not yet at its first token) and held longer nowhere waits for that prefill (at
    most `coalesce` seconds) before it is routed: computing the same prefix again elsewhere would take
    as long as the wait, and the wait turns it into a hit there or a page-in anywhere else. A request
    sent to a worker that does not hold its prefix (the holders are busy) pages it in from the shared
    tier, which has an entry ending there only once a worker split it off (two conversations
    diverging after it on one worker: docs/kv-tier.md §5); until the router saw that happen, it waits
    for a prefill sharing the prefix in flight, which makes the split. This is a cold fleet's case:
    many conversations opening with one system prompt at once."""

    def __init__(self, redis_port, workers, tenant="default", slack=2, recent=1.0, coalesce=5.0, stream="fak:{fleet}:tree"):
        self.workers = workers  # worker id -> port
        self.tenant, self.slack, self.recent, self.coalesce, self.stream = tenant, slack, recent, coalesce, stream
        self.held = {w: set() for w in workers}
        self.sent = {w: {} for w in workers}  # prefix -> when its prefill ended, until the publication catches up
        self.prefilling = []  # (prefix chain, event set at its first token or end) of requests before their first token
        self.branches = {w: {} for w in workers}  # prefix -> the next prefixes prefilled after it there
        self.busy = {w: 0 for w in workers}
        self.lock = threading.Lock()
        self.stop = False
        self.redis = Resp(redis_port)
        self.reader = threading.Thread(target=self.follow, daemon=True)
        self.reader.start()

    def follow(self):
        last = "0-0"
        while not self.stop:
            reply = self.redis.call("XREAD", "COUNT", "1000", "BLOCK", "100", "STREAMS", self.stream, last)
            for entry_id, fields in (reply[0][1] if reply else []):
                last = entry_id
                e = dict(zip(fields[::2], fields[1::2]))
                with self.lock:
                    held = self.held.setdefault(e["worker"], set())
                    if e["op"] == "reset":
                        held.clear()
                    elif e.get("tenant") in (self.tenant, ""):
                        (held.add if e["op"] == "insert" else held.discard)(e["prefix"])

    def holds(self, w, prefix, now):
        return prefix in self.held[w] or now - self.sent[w].get(prefix, -1e9) < self.recent

    def held_depth(self, chain, now):
        """(messages of the longest prefix some worker holds, the workers holding it)."""
        for k in range(len(chain), 0, -1):
            found = [w for w in self.workers if self.holds(w, chain[k - 1], now)]
            if found:
                return k, found
        return 0, list(self.workers)

    def prefill_to_wait_for(self, chain, depth):
        """The event of a prefill now computing a longer prefix of `chain` than `depth`, if any."""
        for other, event in self.prefilling:
            shared = next((k for k in range(min(len(chain), len(other)), 0, -1) if chain[k - 1] == other[k - 1]), 0)
            if shared > depth:
                return event
        return None

    def split_off(self, prefix):
        """Whether some worker prefilled two contexts diverging right after `prefix`: its tree split
        there, and the tier has an entry ending there."""
        return any(len(b.get(prefix, ())) >= 2 for b in self.branches.values())

    def pick(self, chain):
        deadline = time.monotonic() + self.coalesce
        while True:
            now = time.monotonic()
            with self.lock:
                depth, holders = self.held_depth(chain, now)
                waiting = now < deadline
                event = self.prefill_to_wait_for(chain, depth) if waiting else None
                if event is None:
                    choice = min(holders, key=lambda w: self.busy[w])
                    least = min(self.workers, key=lambda w: self.busy[w])
                    if self.busy[choice] - self.busy[least] > self.slack:
                        choice = least
                    if waiting and depth > 0 and choice not in holders and not self.split_off(chain[depth - 1]):
                        event = self.prefill_to_wait_for(chain, depth - 1)
                if event is None:
                    self.busy[choice] += 1
                    mine = (chain, threading.Event())
                    self.prefilling.append(mine)
                    return choice, mine
            event.wait(max(0.0, deadline - now))

    def route(self, messages):
        chain = prefix_chain(messages)
        w, mine = self.pick(chain)

        def prefilled():  # the worker's tree holds the prompt now
            now = time.monotonic()
            with self.lock:
                if mine in self.prefilling:
                    self.prefilling.remove(mine)
                sent = self.sent[w]
                for p in [p for p, t in sent.items() if now - t >= self.recent]:
                    del sent[p]
                sent.update((p, now) for p in chain)
                branches = self.branches[w]
                for before, after in zip(chain, chain[1:]):
                    branches.setdefault(before, set()).add(after)
            mine[1].set()

        def end():
            prefilled()  # no-op after the first token, but a request that failed before it frees its waiters
            with self.lock:
                self.busy[w] -= 1
        return Lease(self.workers[w], prefilled, end)

    def close(self):
        self.stop = True
        self.reader.join(5)
        self.redis.close()


def fixed(port):
    return lambda messages: Lease(port)


def start_setup(kind, args, tmp):
    procs = []
    redis_port = None
    if kind in ("rr+kv", "hash", "sglang+kv", "tree", "tree-eager"):
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
        return procs, workers, fixed(workers[0].port)
    if kind.startswith("tree"):
        router = TreeRouter(redis_port, {f"w{i + 1}": w.port for i, w in enumerate(workers)},
                            coalesce=0.0 if kind == "tree-eager" else 5.0)
        return procs + [router], workers, router.route
    if kind.startswith("sglang"):
        port = free_port()
        procs.append(Proc([sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                           "--policy", "cache_aware", "--log-level", "warn", "--worker-urls",
                           *[f"http://127.0.0.1:{w.port}" for w in workers]], env=dict(os.environ, NO_PROXY="*")))
        wait_port(port, 60)
        return procs, workers, fixed(port)
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
    return procs, workers, fixed(port)


def run_client(route, model, trace, client_id, turns, delay, results):
    time.sleep(delay)
    clients = {}
    system, asks = conversation(trace, client_id, turns)
    messages = [{"role": "system", "content": system}]
    for t, ask in enumerate(asks):
        messages.append({"role": "user", "content": ask})
        lease = route(messages)
        port = lease.port
        if port not in clients:
            clients[port] = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=2, timeout=300)
        start = time.perf_counter()
        ttft = None
        text = ""
        usage = None
        try:
            stream = clients[port].chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0,
                                                           stream=True, stream_options={"include_usage": True})
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if ttft is None:
                        ttft = time.perf_counter() - start
                        lease.first_token()
                    text += chunk.choices[0].delta.content
                if chunk.usage:
                    usage = chunk.usage
        finally:
            lease.end()
        results.append((ttft or time.perf_counter() - start, usage, t))
        messages.append({"role": "assistant", "content": text})


def counter(workers, name):
    """A counter of each worker's /metrics (summed over its labels)."""
    values = []
    for w in workers:
        text = urlopen(f"http://127.0.0.1:{w.port}/metrics", timeout=30).read().decode()
        values.append(sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.M)))
    return values


def measure(kind, args):
    tmp = tempfile.mkdtemp(prefix="fak-fleet-bench-")
    procs, workers, route = start_setup(kind, args, tmp)
    try:
        model = args.model_id or ("embedded" if args.model == "embedded" else Path(args.model).name)
        results = []
        start = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            for f in [pool.submit(run_client, route, model, args.trace, c, args.turns, c * args.arrival / args.clients, results)
                      for c in range(args.clients)]:
                f.result()
        wall = time.perf_counter() - start
        paged = sum(counter(workers, "fak_kv_tier_paged_tokens_total"))
        prompts = counter(workers, "fak_prompt_tokens_total")
    finally:
        for p in reversed(procs):
            p.close()
        shutil.rmtree(tmp, ignore_errors=True)
    def hit(which):
        usages = [u for _, u, t in results if u and which(t)]
        cached = sum(u.prompt_tokens_details.cached_tokens for u in usages if u.prompt_tokens_details)
        return cached / max(sum(u.prompt_tokens for u in usages), 1)

    prompt = sum(u.prompt_tokens for _, u, _ in results if u)
    completion = sum(u.completion_tokens for _, u, _ in results if u)
    ttfts = sorted(t for t, _, _ in results)
    return {"hit": hit(lambda t: True), "hit1": hit(lambda t: t == 0), "hitn": hit(lambda t: t > 0),
            "paged": paged / max(prompt, 1), "busiest": max(prompts) / max(sum(prompts), 1),
            "tps": completion / wall, "p50": statistics.median(ttfts),
            "p99": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fak", default=str(ROOT / "build/release/tools/fak/fak"))
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--model-id", default=None)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--trace", choices=["chat", "agents"], default="chat")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--arrival", type=float, default=0.0, help="seconds over which the clients' first requests spread")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setups", default="one,rr,rr+kv,hash,sglang,sglang+kv,tree-eager,tree")
    args = ap.parse_args()
    setups = args.setups.split(",")
    try:
        import sglang_router  # noqa: F401
    except ImportError:
        print("sglang-router is not installed: the sglang setups are left out", file=sys.stderr)
        setups = [k for k in setups if not k.startswith("sglang")]
    runs = {k: [] for k in setups}
    for r in range(args.rounds):  # interleaved rounds, each in another order: the machine's noise falls on every setup alike
        for k in setups[r % len(setups):] + setups[:r % len(setups)]:
            runs[k].append(measure(k, args))
            print(f"round {r + 1} {k}: {runs[k][-1]}", file=sys.stderr, flush=True)
    base = "rr" if "rr" in runs else setups[0]
    for k, v in runs.items():  # throughput against the base setup of the same round: the machine's load varies
        for r, x in enumerate(v):
            x["vs"] = x["tps"] / runs[base][r]["tps"]
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in runs.items()}
    print(f"model {args.model}, {args.trace} trace, {args.workers} workers x 1 thread (one: 1 x {args.workers}), "
          f"{args.clients} clients x {args.turns} turns arriving over {args.arrival:g} s, medians of {args.rounds} interleaved rounds")
    print(f"| setup | hit rate | first turns | later turns | paged in | busiest worker | tokens/s | vs {base} | TTFT p50 ms "
          "| TTFT p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, m in med.items():
        print(f"| {k} | {m['hit']:.1%} | {m['hit1']:.1%} | {m['hitn']:.1%} | {m['paged']:.1%} | {m['busiest']:.0%} | "
              f"{m['tps']:.1f} | {m['vs']:.2f}x | {m['p50'] * 1e3:.0f} | {m['p99'] * 1e3:.0f} |")


if __name__ == "__main__":
    main()
