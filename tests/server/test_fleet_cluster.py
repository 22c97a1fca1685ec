"""A fleet of `fak serve` workers on a 3-master Redis Cluster (docs/fleet.md): the workers are given
one node's address and discover the rest. A conversation continued on another worker pages its
prefix in from the shared tier (whose keys are spread over the masters) and answers the same bits;
an erasure on one worker leaves no reuse of the text on the others and a seal on all three,
including one restarted afterwards; one master down refuses (503) only the chats whose seals it
holds, within a bound, and seals nothing. One cluster for the module (starting one takes seconds).
"""

import hashlib
import os
import shutil
import socket
import subprocess
import uuid

import pytest

from test_fleet import cached, chat
from test_server import MODEL, FakServer, redis_keys, sample_value, wait_for


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port():
    """A free port whose cluster bus port (port + 10000) exists and is free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port + 10000)) != 0:
                return port


def cluster_ok(cli, port):
    p = subprocess.run([cli, "-p", str(port), "cluster", "info"], capture_output=True, text=True, timeout=10)
    return "cluster_state:ok" in p.stdout


class Cluster:
    """Three redis-server masters on free ports, joined into one cluster; a node can be stopped and
    started again (same port and nodes.conf: it rejoins with its slots)."""

    def __init__(self, tmp_path_factory):
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        if not os.path.exists(self.binary) or not os.path.exists(self.cli):
            pytest.skip("redis-server / redis-cli not installed (scripts/setup installs them)")
        self.dirs = [tmp_path_factory.mktemp(f"cluster-node-{i}") for i in range(3)]
        self.ports = [free_cluster_port() for _ in range(3)]
        self.procs = [None] * 3

    def start(self, i):
        # Without full coverage required, the masters left serve their slots while one is down (docs/fleet.md).
        self.procs[i] = subprocess.Popen([self.binary, "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", str(self.dirs[i]),
                                          "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
                                          "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                                          "--cluster-require-full-coverage", "no"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: socket.socket().connect_ex(("127.0.0.1", self.ports[i])) == 0, 10), "redis-server did not start"

    def stop(self, i):
        if self.procs[i] and self.procs[i].poll() is None:
            self.procs[i].terminate()
            self.procs[i].wait(10)

    def ok(self):
        return all(cluster_ok(self.cli, p) for p in self.ports)

    def master_of(self, hex_digest):
        """The port of the master holding the slot of a digest's blob and seal keys ({hex})."""
        return next(p for p in self.ports if "MOVED" not in subprocess.run(
            [self.cli, "-p", str(p), "EXISTS", "{%s}" % hex_digest], capture_output=True, text=True, timeout=10).stdout)

    def seal_masters(self, text, tenant="alice"):
        """The masters a chat carrying `text` asks whether it is sealed: the text's own seal and the
        tenant's (TenantSealKey: sha256 of "fak.seal.tenant.v1", the tenant's length, ":", the tenant
        and the text's digest)."""
        digest = hashlib.sha256(text.encode()).digest()
        tenant_key = hashlib.sha256(b"fak.seal.tenant.v1" + f"{len(tenant)}:{tenant}".encode() + digest).hexdigest()
        return {self.master_of(digest.hex()), self.master_of(tenant_key)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory)
    try:
        for i in range(3):
            c.start(i)
        subprocess.run([c.cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in c.ports], "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        assert wait_for(c.ok, 20), "the cluster did not form"
        yield c
    finally:
        for i in range(3):
            c.stop(i)


@pytest.fixture(scope="module")
def cluster_ports(cluster):
    return cluster.ports


def worker(tmp_path, seed_port, name):
    state = tmp_path / f"state-{name}"
    state.mkdir(exist_ok=True)
    return FakServer(tmp_path, "--fleet", f"redis://127.0.0.1:{seed_port}", "--worker-id", name, "--state", str(state))


def test_on_a_cluster_a_conversation_continues_on_another_worker(tmp_path, cluster_ports):
    first = "Remember the cluster word: " + uuid.uuid4().hex + ". " + "Padding the prefix so it spans slabs. " * 6
    # Each worker is given a different node: any node leads to the whole cluster.
    a, b, c = (worker(tmp_path, cluster_ports[i], n) for i, n in enumerate(("a", "b", "c")))
    try:
        r1 = chat(a, first, max_tokens=6)
        history = [{"role": "user", "content": first}, {"role": "assistant", "content": r1.choices[0].message.content},
                   {"role": "user", "content": "And again?"}]
        on_a = a.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        on_b = b.client().chat.completions.create(model=MODEL, messages=history, max_tokens=6, temperature=0)
        assert on_b.choices[0].message.content == on_a.choices[0].message.content
        assert on_b.usage.prompt_tokens_details.cached_tokens > 0, on_b.usage
        assert sample_value(b.metrics(), "fak_kv_tier_paged_tokens_total") > 0
        # The shared state really is spread: the tier's chunks and the texts sit on several masters.
        holding = [p for p in cluster_ports if redis_keys(p, "fak:*")]
        assert len(holding) >= 2, holding
        # Control: a text no worker has seen is reused by none (the counters above are not free).
        other = [{"role": "user", "content": "An unrelated opening " + uuid.uuid4().hex}]
        fresh = c.client().chat.completions.create(model=MODEL, messages=other, max_tokens=2, temperature=0)
        assert fresh.usage.prompt_tokens_details.cached_tokens == 0
    finally:
        for w in (a, b, c):
            w.stop()


def test_on_a_cluster_an_erasure_reaches_every_worker_and_a_restarted_one(tmp_path, cluster_ports):
    text = "the cluster forgets this: " + uuid.uuid4().hex
    a, b, c = (worker(tmp_path, cluster_ports[i], n) for i, n in enumerate(("a", "b", "c")))
    try:
        for w in (b, c):
            chat(w, text)
        held = {w: cached(w, text) for w in (b, c)}
        assert all(n > 0 for n in held.values()), held
        status, reply = a.request("POST", "/fak/v1/erase", {"content": text, "reason": "asked"})
        assert status == 200, reply
        fleet = reply["removed"]["fleet"]
        assert fleet["confirmed"] == ["a", "b", "c"] and fleet["pending"] == [], fleet
        cert = reply["certificate"]  # signed, naming the three
        assert cert["version"] == 2 and cert["fleet"] == {"event": fleet["event"], "confirmed": ["a", "b", "c"]}, cert
        status, verdict = a.request("POST", "/fak/v1/certificates/verify", cert)
        assert status == 200 and verdict["valid"] is True, verdict
        for w in (b, c):
            assert cached(w, text) < held[w]  # no reuse of the text's KV on the others
        for w in (a, b, c):
            chat(w, text)
            assert sample_value(w.metrics(), "fak_chat_sealed_messages_total", tenant="alice", cause="sealed") >= 1
        c.stop()
        c = worker(tmp_path, cluster_ports[2], "c")  # restarted: asks the cluster's denylist before serving
        chat(c, text)
        assert sample_value(c.metrics(), "fak_chat_sealed_messages_total", tenant="alice", cause="sealed") == 1
        assert cached(c, text) < held[b]
    finally:
        for w in (a, b, c):
            w.stop()


def test_on_a_cluster_one_master_down_is_unavailable_for_its_slots_never_a_seal(tmp_path, cluster):
    """One master stopped: a chat whose message has a seal key (the text's or the tenant's) on it is
    refused with 503 naming that node within a bound (never served unsealed, never sealed), while a
    chat whose seal keys live on the other masters is served; once the master is back the refused chat is served and nothing was sealed.
    Last in the module: the restarted master comes back empty."""
    import time
    down = 2
    a = worker(tmp_path, cluster.ports[0], "a")
    texts = iter(lambda: "one master down: " + uuid.uuid4().hex, None)
    lost = next(t for t in texts if cluster.ports[down] in cluster.seal_masters(t))
    kept = next(t for t in texts if cluster.ports[down] not in cluster.seal_masters(t))

    def ask(text):
        started = time.monotonic()
        status, reply = a.request("POST", "/v1/chat/completions",
                                  {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 2})
        return status, reply, time.monotonic() - started

    try:
        cluster.stop(down)
        for _ in range(2):  # the first meets the refused connection, the second its open breaker
            status, reply, took = ask(lost)
            assert status == 503 and reply["error"]["code"] == "screen_unavailable", reply
            assert f"127.0.0.1:{cluster.ports[down]}" in reply["error"]["message"], reply
            assert took < 2.0, took
        status, reply, _ = ask(kept)
        assert status == 200, reply  # the other masters' slots keep serving
        cluster.start(down)
        assert wait_for(cluster.ok, 20), "the master did not rejoin"
        assert wait_for(lambda: ask(lost)[0] == 200, 20)
        assert sample_value(a.metrics(), "fak_chat_sealed_messages_total", tenant="alice") == 0
    finally:
        a.stop()
        if cluster.procs[down].poll() is not None:
            cluster.start(down)
