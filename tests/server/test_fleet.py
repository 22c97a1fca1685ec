"""A fleet of `fak serve` workers on one Redis (docs/fleet.md): an erasure on one worker reaches
every other (their trees, the shared tier, the shared denylist) and names who confirmed; a worker
that was down applies the seal before it serves again; a conversation continued on another worker
pages its prefix in from the shared tier and answers the same bits; a killed worker loses no text
it acknowledged. Real redis-server, real workers, the openai client and raw HTTP.
"""

import hashlib
import signal
import uuid

import pytest

from test_server import MODEL, FakServer, redis_keys, redis_port, sample_value, wait_for  # noqa: F401 (redis_port: fixture)


def worker(tmp_path, port, name, *extra):
    state = tmp_path / f"state-{name}"
    state.mkdir(exist_ok=True)
    return FakServer(tmp_path, "--fleet", f"redis://127.0.0.1:{port}", "--worker-id", name, "--state", str(state), *extra)


def chat(server, text, key="key-alice", max_tokens=4):
    return server.client(key).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": text}], max_tokens=max_tokens, temperature=0)


def cached(server, text, key="key-alice"):
    status, reply = server.request("POST", "/fak/v1/prefix", {"model": MODEL, "messages": [{"role": "user", "content": text}]},
                                   key=key)
    assert status == 200, reply
    return reply["cached_tokens"]


def test_an_erasure_on_one_worker_reaches_every_worker(tmp_path, redis_port):
    text = "the fleet forgets this: " + uuid.uuid4().hex
    a, b, c = (worker(tmp_path, redis_port, n) for n in ("a", "b", "c"))
    try:
        for w in (b, c):
            chat(w, text)
            chat(w, text, key="key-bob")  # another tenant's copy of the same text
        held = {w: cached(w, text) for w in (b, c)}
        assert all(n > 0 for n in held.values()), held
        status, reply = a.request("POST", "/fak/v1/erase", {"content": text, "reason": "asked"})
        assert status == 200, reply
        fleet = reply["removed"]["fleet"]
        assert fleet["confirmed"] == ["a", "b", "c"] and fleet["pending"] == [], fleet
        # The reply's certificate names (signed) the three workers and verifies; the list cannot be edited.
        assert_erasure_certificate(a, reply, text, ["a", "b", "c"])
        for w in (b, c):
            # The text's KV is gone from the other workers' trees (what precedes it may stay) ...
            assert cached(w, text) < held[w]
            # ... and the text is sealed there: a chat carrying it gets its stub.
            chat(w, text)
            assert sample_value(w.metrics(), "fak_chat_sealed_messages_total", tenant="alice", cause="sealed") >= 1
            assert sample_value(w.metrics(), "fak_fleet_erasures_total", direction="applied", outcome="applied") == 1
            # Bob's copy is Bob's: still reused, never sealed.
            assert cached(w, text, key="key-bob") == held[w]
        assert sample_value(a.metrics(), "fak_fleet_erasures_total", direction="announced", outcome="confirmed") == 1
    finally:
        for w in (a, b, c):
            w.stop()


def verify(server, cert):
    status, verdict = server.request("POST", "/fak/v1/certificates/verify", cert)
    assert status == 200, verdict
    return verdict


def assert_erasure_certificate(origin, reply, text, confirmed):
    """/fak/v1/erase's reply carries a version 2 certificate of the erasure naming exactly the workers
    that confirmed, bound to the journal row it reports; the origin verifies it, and not once the list
    is edited (a worker dropped or added) or the subject relabelled."""
    cert = reply["certificate"]
    assert cert["version"] == 2 and cert["fleet"]["confirmed"] == confirmed, cert
    assert cert["fleet"]["event"] == reply["removed"]["fleet"]["event"] != ""
    assert cert["subject"] == hashlib.sha256(text.encode()).hexdigest() and cert["journal_seq"] == reply["journal_seq"]
    assert "sealed the content" in cert["scope"], cert["scope"]
    assert verify(origin, cert)["valid"] is True
    for forged in (confirmed[:-1], confirmed + ["z"]):
        verdict = verify(origin, {**cert, "fleet": {**cert["fleet"], "confirmed": forged}})
        assert verdict["valid"] is False and verdict["fault"] == "bad_signature", verdict
    verdict = verify(origin, {**cert, "subject": hashlib.sha256(b"another text").hexdigest()})
    assert verdict["valid"] is False and verdict["fault"] == "bad_signature", verdict


def test_an_evicted_messages_certificate_names_the_workers_that_confirmed(tmp_path, redis_port):
    secret = "evicted fleet-wide: " + uuid.uuid4().hex
    a, b, c = (worker(tmp_path, redis_port, n) for n in ("a", "b", "c"))
    try:
        for w in (b, c):
            chat(w, secret)
        status, conv = a.request("POST", "/fak/v1/conversations", {"model": MODEL, "messages": [{"role": "user", "content": secret}],
                                                                   "max_tokens": 2})
        assert status == 200, conv
        status, evicted = a.request("POST", f"/fak/v1/conversations/{conv['id']}/evict", {"message": 0, "reason": "asked"})
        assert status == 200, evicted
        cert = evicted["certificate"]
        assert cert["version"] == 2 and cert["fleet"]["confirmed"] == ["a", "b", "c"], cert
        assert cert["fleet"]["event"] == evicted["removed"]["fleet"]["event"]
        status, verdict = a.request("POST", "/fak/v1/certificates/verify", cert)
        assert status == 200 and verdict["valid"] is True, verdict
        # The list is signed: a worker dropped from it (or added) breaks the certificate.
        for confirmed in (["a", "b"], ["a", "b", "c", "d"]):
            forged = {**cert, "fleet": {**cert["fleet"], "confirmed": confirmed}}
            status, verdict = a.request("POST", "/fak/v1/certificates/verify", forged)
            assert status == 200 and verdict["valid"] is False and verdict["fault"] == "bad_signature", verdict
    finally:
        for w in (a, b, c):
            w.stop()


def test_a_worker_down_at_the_erasure_applies_the_seal_before_it_serves(tmp_path, redis_port):
    """Three workers, one down when a text is erased: the certificate names the two that confirmed
    (not the one that was down), and the one that comes back serves the text sealed from its first
    request, before any announcement could reach it."""
    text = "sealed while you slept: " + uuid.uuid4().hex
    a, b, c = (worker(tmp_path, redis_port, n) for n in ("a", "b", "c"))
    try:
        chat(c, text)
        c.stop()  # leaves the fleet: nobody waits for it
        status, reply = a.request("POST", "/fak/v1/erase", {"content": text})
        assert status == 200 and reply["removed"]["fleet"]["confirmed"] == ["a", "b"], reply
        assert_erasure_certificate(a, reply, text, ["a", "b"])
        c = worker(tmp_path, redis_port, "c")  # same state directory, back in the fleet
        chat(c, text)
        assert sample_value(c.metrics(), "fak_chat_sealed_messages_total", tenant="alice", cause="sealed") == 1
        assert cached(c, text) < len(text)  # nothing of the text is reused (it pages in nothing sealed)
        # The certificate is the origin's: another worker's journal does not hold its row.
        assert verify(b, reply["certificate"])["valid"] is False
    finally:
        for w in (a, b, c):
            w.stop()


def test_a_conversation_continues_on_another_worker_from_the_shared_tier(tmp_path, redis_port):
    first = "Remember the fleet word: " + uuid.uuid4().hex + ". " + "Padding the prefix so it spans slabs. " * 6
    a, b = worker(tmp_path, redis_port, "a"), worker(tmp_path, redis_port, "b")
    try:
        r1 = chat(a, first, max_tokens=6)
        history = [{"role": "user", "content": first}, {"role": "assistant", "content": r1.choices[0].message.content},
                   {"role": "user", "content": "And again?"}]
        on_a = a.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        on_b = b.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        assert on_b.choices[0].message.content == on_a.choices[0].message.content
        assert on_b.usage.prompt_tokens_details.cached_tokens > 0, on_b.usage
        assert sample_value(b.metrics(), "fak_kv_tier_paged_tokens_total") > 0
        # Control: a third worker without the fleet's tier computes it all, and answers the same.
        lone = FakServer(tmp_path)
        try:
            alone = lone.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        finally:
            lone.stop()
        assert alone.choices[0].message.content == on_a.choices[0].message.content
        assert alone.usage.prompt_tokens_details.cached_tokens == 0
    finally:
        a.stop()
        b.stop()


def test_a_system_prompt_two_conversations_share_is_paged_in_by_another_worker(tmp_path, redis_port):
    """Two conversations opening with one system prompt on worker A split A's node where they diverge,
    and that shared prefix is written through: worker B pages it in for a third conversation, with the
    reply a worker without the fleet gives. Control: after A's first conversation alone the tier
    holds only its whole edge, which no other conversation continues; C pages in nothing."""
    system = "You are the fleet's shared assistant " + uuid.uuid4().hex + ". " + "Answer briefly and exactly. " * 8
    a, b, c = (worker(tmp_path, redis_port, n) for n in ("a", "b", "c"))

    def opening(w, who):
        return w.client().chat.completions.create(model=MODEL, max_tokens=4, temperature=0, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": f"I am {who}."}])

    def tier_entries():
        return len(redis_keys(redis_port, "fak:{kvt}:m:*"))

    try:
        opening(a, "Ann")
        assert wait_for(lambda: tier_entries() >= 1, 10)
        assert opening(c, "Cyd").usage.prompt_tokens_details.cached_tokens == 0
        assert wait_for(lambda: tier_entries() >= 2, 10)  # C's own edge
        before = tier_entries()
        opening(a, "Bob")  # diverges from Ann's after the system prompt: the split's upper half is written through
        assert wait_for(lambda: tier_entries() >= before + 2, 10), (before, tier_entries())
        on_b = opening(b, "Dee")
        cached_b = on_b.usage.prompt_tokens_details.cached_tokens
        assert cached_b > len(system) and sample_value(b.metrics(), "fak_kv_tier_paged_tokens_total") == cached_b
        lone = FakServer(tmp_path)
        try:
            alone = opening(lone, "Dee")
        finally:
            lone.stop()
        assert on_b.choices[0].message.content == alone.choices[0].message.content
    finally:
        for w in (a, b, c):
            w.stop()


def test_a_killed_worker_loses_no_acknowledged_text(tmp_path, redis_port):
    a = worker(tmp_path, redis_port, "a")
    text = "acknowledged before the crash: " + uuid.uuid4().hex
    status, conv = a.request("POST", "/fak/v1/conversations", {"model": MODEL, "messages": [{"role": "user", "content": text}],
                                                               "max_tokens": 2})
    assert status == 200, conv
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    assert redis_keys(redis_port, f"*{hashlib.sha256(text.encode()).hexdigest()}*"), "the text is not in the fleet's store"


def prefix_digest(*texts):
    """What a router computes from a chat's messages alone (docs/fleet.md, tree publication)."""
    return hashlib.sha256(b"fak.prefix.v1\n" + b"".join(hashlib.sha256(t.encode()).digest() for t in texts)).hexdigest()


def tree_events(port):
    """The fleet's tree stream as dicts, oldest first (redis-cli prints each entry's id, then its fields)."""
    import re
    import shutil
    import subprocess
    cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    out = subprocess.run([cli, "-p", str(port), "XRANGE", "fak:{fleet}:tree", "-", "+"], capture_output=True, text=True,
                         timeout=10).stdout.splitlines()
    events, fields = [], []
    for line in out + ["0-0"]:
        if re.fullmatch(r"\d+-\d+", line):
            if fields:
                events.append(dict(zip(fields[::2], fields[1::2])))
            fields = []
        else:
            fields.append(line)
    return events


def test_a_worker_publishes_what_its_tree_holds_and_evicts(tmp_path, redis_port):
    """GET /fak/v1/tree lists the prefixes a worker's tree holds as digests a router computes from
    the messages alone, with their tenant; the fleet's stream carries a reset, then the inserts and
    the evictions."""
    first, second = "publish me: " + uuid.uuid4().hex, "and then this"
    a = worker(tmp_path, redis_port, "a")
    try:
        messages = [{"role": "user", "content": first}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": second}]
        a.client().chat.completions.create(model=MODEL, messages=messages, max_tokens=2, temperature=0)
        whole, opening = prefix_digest(first, "ok", second), prefix_digest(first)
        status, tree = a.request("GET", "/fak/v1/tree")
        assert status == 200 and tree["worker"] == "a", tree
        held = {(p["tenant"], p["prefix"]): p for p in tree["prefixes"]}
        assert ("alice", whole) in held and ("alice", opening) in held, tree
        assert held[("alice", whole)]["messages"] == 3 and held[("alice", whole)]["tokens"] > held[("alice", opening)]["tokens"]
        # Control: another tenant is shown none of alice's prefixes.
        status, bobs = a.request("GET", "/fak/v1/tree", key="key-bob")
        assert status == 200 and all(p["tenant"] in ("", "bob") for p in bobs["prefixes"]), bobs
        assert wait_for(lambda: any(e.get("op") == "insert" and e.get("prefix") == whole and e.get("tenant") == "alice"
                                    for e in tree_events(redis_port)), 10), tree_events(redis_port)
        events = tree_events(redis_port)
        assert events[0] == {"worker": "a", "op": "reset"}, events[0]
        status, reply = a.request("POST", "/fak/v1/erase", {"content": first})
        assert status == 200, reply
        status, tree = a.request("GET", "/fak/v1/tree")
        assert not any(p["prefix"] in (whole, opening) for p in tree["prefixes"]), tree
        assert wait_for(lambda: any(e.get("op") == "evict" and e.get("prefix") == whole for e in tree_events(redis_port)), 10)
    finally:
        a.stop()


def test_fleet_flags_are_checked(tmp_path):
    import subprocess
    from test_server import FAK
    for extra, message in [(["--fleet", "http://x"], "--fleet 'http://x'"), (["--worker-id", "w"], "give --fleet too"),
                           (["--fleet", "redis://127.0.0.1:1", "--worker-id", "bad name"], "worker id")]:
        p = subprocess.run([FAK, "serve", MODEL, "--port", "0", *extra], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and message in p.stderr, (extra, p.stderr)


@pytest.mark.parametrize("how", ["stopped", "frozen"])
def test_redis_down_is_unavailable_never_a_seal(tmp_path, how):
    """With the fleet's Redis gone (stopped: connections refused; frozen by SIGSTOP: nothing answers)
    a chat is refused as unavailable (503, naming Redis) within a bounded time, not served unsealed and
    not sealed; once Redis is back the same chat is served, and nothing was sealed meanwhile."""
    import shutil
    import socket
    import subprocess
    import time
    from test_server import wait_for
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def start_redis():
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
                                 "--save", "", "--appendonly", "yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10)
        return proc

    redis = start_redis()
    w = worker(tmp_path, port, "a")
    text = "ask the fleet first: " + uuid.uuid4().hex
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 2}
    try:
        chat(w, text)
        if how == "stopped":
            redis.terminate()
            redis.wait(10)
        else:
            redis.send_signal(signal.SIGSTOP)
        # Bounded: a refused connection fails within its retries (then the breaker answers at once); a
        # frozen server within the command timeout (3 s, never retried).
        bound = 2.0 if how == "stopped" else 4.5
        for attempt in range(2):
            started = time.monotonic()
            status, reply = w.request("POST", "/v1/chat/completions", body)
            took = time.monotonic() - started
            assert status == 503 and reply["error"]["code"] == "screen_unavailable", reply
            assert "retry later" in reply["error"]["message"] and f"redis 127.0.0.1:{port}" in reply["error"]["message"], reply
            assert took < bound, (attempt, took)
        if how == "stopped":
            redis = start_redis()  # the append-only file brings the fleet's state back
        else:
            redis.send_signal(signal.SIGCONT)
        # Served again once the connection's breaker lets a probe through.
        assert wait_for(lambda: w.request("POST", "/v1/chat/completions", body)[0] == 200, 20)
        assert sample_value(w.metrics(), "fak_chat_sealed_messages_total", tenant="alice") == 0
    finally:
        w.stop()
        redis.send_signal(signal.SIGCONT)
        redis.terminate()
        redis.wait(10)


@pytest.fixture
def router(tmp_path):
    """HAProxy (Debian) with deploy/haproxy/fak-fleet.cfg in front of the workers given to start()."""
    import os
    import shutil
    import socket
    import subprocess
    from test_server import ROOT, wait_for
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.path.exists(binary):
        pytest.skip("haproxy not installed (scripts/setup installs it)")
    procs = []

    def start(workers):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, FAK_ROUTER_BIND=f"127.0.0.1:{port}",
                   **{f"FAK_WORKER_{i + 1}": f"127.0.0.1:{w.port}" for i, w in enumerate(workers)})
        procs.append(subprocess.Popen([binary, "-db", "-f", str(ROOT / "deploy/haproxy/fak-fleet.cfg")], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10), "haproxy did not start"
        return port

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def test_behind_haproxy_a_conversation_stays_and_survives_its_worker(tmp_path, redis_port, router):
    """Through HAProxy (consistent hash on the first message): a conversation's turns land on one
    worker and reuse its tree; SIGKILL that worker and the next turn is served by another, which pages
    the prefix in from the shared tier and answers what the first would have; an erasure sent through
    the router reaches the surviving workers."""
    import openai
    workers = {n: worker(tmp_path, redis_port, n) for n in ("w1", "w2", "w3")}
    port = router(list(workers.values()))
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="key-alice", max_retries=0, timeout=60)

    def turn(messages):
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, max_tokens=6, temperature=0)
        return raw.headers["X-Fak-Served-By"], raw.parse()

    try:
        first = "Router, keep me with my worker: " + uuid.uuid4().hex + ". " + "Padding for a longer prefix. " * 6
        history = [{"role": "user", "content": first}]
        served, r1 = turn(history)
        history += [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "More?"}]
        again, r2 = turn(history)
        assert again == served and r2.usage.prompt_tokens_details.cached_tokens > 0
        # Control: other conversations spread over the workers (the hash is on the conversation).
        seen = {turn([{"role": "user", "content": f"another conversation {i}"}])[0] for i in range(12)}
        assert len(seen) >= 2, seen
        # The reply the first worker would give to the next turn, asked of it directly.
        history += [{"role": "assistant", "content": r2.choices[0].message.content}, {"role": "user", "content": "Last?"}]
        expected = workers[served].client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        workers[served].proc.send_signal(signal.SIGKILL)
        workers[served].proc.wait(10)
        other, r3 = turn(history)
        assert other != served
        assert r3.choices[0].message.content == expected.choices[0].message.content
        assert r3.usage.prompt_tokens_details.cached_tokens > 0  # paged in from the shared tier
        # An erasure through the router reaches every live worker.
        import http.client
        import json
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/fak/v1/erase", body=json.dumps({"content": first}),
                     headers={"Authorization": "Bearer key-alice", "Content-Type": "application/json"})
        resp = conn.getresponse()
        status, reply = resp.status, json.loads(resp.read())
        assert status == 200, reply
        fleet = reply["removed"]["fleet"]
        assert sorted(fleet["confirmed"]) == sorted(n for n in workers if n != served), reply
        assert fleet["pending"] in ([], [served]), reply  # the killed one, until its heartbeat is 3 s old
    finally:
        for w in workers.values():
            w.stop()


def stream_through(port, messages, max_tokens):
    """A streamed chat through the router: (the worker that serves it, its open response)."""
    import http.client
    import json
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/chat/completions", headers={"Authorization": "Bearer key-alice", "Content-Type": "application/json"},
                 body=json.dumps({"model": MODEL, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
                                  "stream": True, "stream_options": {"include_usage": True}}))
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    return resp.getheader("X-Fak-Served-By"), resp


def read_events(resp, stop_after=None):
    """The stream's events (parsed chunks, then "[DONE]"), up to `stop_after` of them; a stream cut
    by the worker's death ends early, without "[DONE]"."""
    import http.client
    import json
    events = []
    try:
        for line in resp:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip().decode()
            events.append(data if data == "[DONE]" else json.loads(data))
            if stop_after and len(events) >= stop_after:
                break
    except (http.client.IncompleteRead, ConnectionError):
        pass
    return events


def content_of(events):
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                   if isinstance(e, dict) and e.get("choices"))


def usage_of(events):
    return next(e["usage"] for e in events if isinstance(e, dict) and e.get("usage"))


def test_behind_haproxy_a_worker_killed_mid_stream_loses_nothing_acknowledged(tmp_path, redis_port, router):
    """Through HAProxy: SIGKILL the worker while it streams a reply. The cut stream ends without
    [DONE] (nothing of it was acknowledged); the client's retry is answered by another worker, which
    pages the conversation's prefix in from the shared tier and streams the reply a worker without the
    fleet computes from scratch. Every acknowledged message is in the fleet's text store, and the
    killed worker, restarted on its state directory with an empty tree, serves the next turn warm
    from the shared tier with the same bits."""
    workers = {n: worker(tmp_path, redis_port, n) for n in ("w1", "w2", "w3")}
    port = router(list(workers.values()))
    lone = FakServer(tmp_path)  # the control: computes every turn from scratch, no fleet
    # Long enough that the kill, at the stream's first event, lands mid-stream: 160 tokens of the
    # embedded model streamed whole before the kill about one run in four.
    reply_tokens = 700  # (its text, re-read as the next turn, must fit the 4096-token context)
    try:
        first = "Stream to me, then die: " + uuid.uuid4().hex + ". " + "Padding for a longer prefix. " * 6
        history = [{"role": "user", "content": first}]
        served, resp = stream_through(port, history, 6)
        r1 = content_of(read_events(resp))
        history += [{"role": "assistant", "content": r1}, {"role": "user", "content": "Now a long answer, please."}]
        expected = lone.client().chat.completions.create(model=MODEL, messages=history, max_tokens=reply_tokens, temperature=0)
        assert expected.usage.prompt_tokens_details.cached_tokens == 0  # computed from scratch
        assert expected.choices[0].finish_reason == "length"  # so a stream cut early is visibly short
        killed, resp = stream_through(port, history, reply_tokens)
        assert killed == served  # the conversation stays on its worker
        cut = read_events(resp, stop_after=1)
        assert cut and "[DONE]" not in cut
        workers[killed].proc.send_signal(signal.SIGKILL)
        workers[killed].proc.wait(10)
        cut += read_events(resp)
        assert "[DONE]" not in cut and len(content_of(cut)) < len(expected.choices[0].message.content), cut[-1]
        # The client retries the turn; the router sends it to a survivor (the dead worker refuses the connection).
        other, resp = stream_through(port, history, reply_tokens)
        retried = read_events(resp)
        assert other != killed and retried[-1] == "[DONE]", retried[-2:]
        r2 = content_of(retried)
        assert r2 == expected.choices[0].message.content
        assert usage_of(retried)["prompt_tokens_details"]["cached_tokens"] > 0  # paged in from the shared tier
        assert sample_value(workers[other].metrics(), "fak_kv_tier_paged_tokens_total") > 0
        # The killed worker comes back (same id and state directory): an empty tree, warm from the shared tier.
        workers[killed] = worker(tmp_path, redis_port, killed)
        history += [{"role": "assistant", "content": r2}, {"role": "user", "content": "And the last word?"}]
        again = workers[killed].client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        control = lone.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        assert again.choices[0].message.content == control.choices[0].message.content
        assert again.usage.prompt_tokens_details.cached_tokens > 0
        assert sample_value(workers[killed].metrics(), "fak_kv_tier_paged_tokens_total") > 0
        # Every acknowledged message (both replies included) is in the fleet's text store.
        for m in history:
            assert redis_keys(redis_port, f"*{hashlib.sha256(m['content'].encode()).hexdigest()}*"), m
    finally:
        lone.stop()
        for w in workers.values():
            w.stop()


def test_behind_the_sglang_router_cache_aware(tmp_path, redis_port):
    """Through SGLang's router (PyPI sglang-router, policy cache_aware): a conversation's second turn
    goes where its prefix is cached; SIGKILL that worker and the next turn is answered by another,
    paging the prefix in from the fleet's shared tier, with the reply the first would have given."""
    import os
    import socket
    import subprocess
    import sys
    import openai
    from test_server import wait_for
    try:
        import sglang_router  # noqa: F401
    except ImportError:
        pytest.skip("sglang-router not installed (tests/server/requirements.txt)")
    workers = [worker(tmp_path, redis_port, n) for n in ("w1", "w2", "w3")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    router = subprocess.Popen([sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                               "--policy", "cache_aware", "--log-level", "warn", "--worker-urls",
                               *[f"http://127.0.0.1:{w.port}" for w in workers]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, NO_PROXY="*"))
    try:
        assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 60), "the router did not start"
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="key-alice", max_retries=3, timeout=60)

        def turn(messages):
            return client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, temperature=0)

        history = [{"role": "user", "content": "SGLang, route me by my prefix: " + uuid.uuid4().hex + " " + "pad " * 40}]
        r1 = turn(history)
        history += [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "More?"}]
        r2 = turn(history)
        assert r2.usage.prompt_tokens_details.cached_tokens > 0  # routed to the worker that holds it
        holder = [w for w in workers if sample_value(w.metrics(), "fak_cached_tokens_total", tenant="alice") > 0]
        assert len(holder) == 1, [sample_value(w.metrics(), "fak_cached_tokens_total", tenant="alice") for w in workers]
        history += [{"role": "assistant", "content": r2.choices[0].message.content}, {"role": "user", "content": "Last?"}]
        expected = holder[0].client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        holder[0].proc.send_signal(signal.SIGKILL)
        holder[0].proc.wait(10)
        r3 = turn(history)
        assert r3.choices[0].message.content == expected.choices[0].message.content
        assert r3.usage.prompt_tokens_details.cached_tokens > 0  # paged in by a survivor
    finally:
        router.terminate()
        router.wait(10)
        for w in workers:
            w.stop()
