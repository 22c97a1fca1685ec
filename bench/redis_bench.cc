// fak_redis_bench: Redis BlobStore put/get throughput and latency (p50/p99) against the directory
// store measured in the same run (the baseline), for 1 KiB and 64 KiB payloads, one call at a time
// and pipelined (PutMany / GetMany in batches of 128).
//
// Starts its own redis-server (AOF, appendfsync everysec: Redis's usual durable setting) on a free
// loopback port in a temporary directory, unless FAK_REDIS_PORT names a running one. The directory
// store is measured with sync on (the default; fsync per put) and off. Output: one row per
// (store, op, size) with ops/s, MB/s, p50 and p99 µs, and the ratio to the directory store (sync
// off) on the same op. FAK_REDIS_BENCH_N sets the ops per row (default 2000).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "fak/store/blob_store.h"
#include "fak/store/redis_store.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string Payload(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

pid_t StartRedis(const std::string& dir, int port) {
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir", dir,
                                    "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--logfile",
                                    dir + "/redis.log"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  return pid;
}

struct Row {
  std::string store, op;
  size_t size_bytes = 0;
  double ops_per_s = 0, p50_us = 0, p99_us = 0;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Latency per call (or per batch, divided by its size, for the pipelined forms).
Row Measure(const std::string& store_name, const std::string& op, size_t size, size_t n, size_t batch,
            const std::function<void(size_t begin, size_t end)>& call) {
  std::vector<double> lat_us;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < n; i += batch) {
    const auto s = Clock::now();
    call(i, std::min(n, i + batch));
    lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  Row r{store_name, op, size, static_cast<double>(n) / total_s, Percentile(lat_us, 0.5), Percentile(lat_us, 0.99)};
  return r;
}

void BenchStore(const std::string& name, fak::BlobStore& store, size_t size, size_t n, std::vector<Row>* rows) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < n; ++i) payloads.push_back(Payload(size, (size << 20) + i + (name == "redis" ? 0 : 7)));
  std::vector<fak::Digest> digests(n);
  rows->push_back(Measure(name, "put", size, n, 1, [&](size_t b, size_t) { digests[b] = *store.Put(payloads[b]); }));
  rows->push_back(Measure(name, "get", size, n, 1, [&](size_t b, size_t) {
    if (!store.Get(digests[b]).has_value()) std::abort();
  }));
  for (auto& p : payloads) p[0] ^= 1;  // new content for the batch put
  rows->push_back(Measure(name, "put_many/128", size, n, 128, [&](size_t b, size_t e) {
    std::vector<std::string_view> v(payloads.begin() + static_cast<long>(b), payloads.begin() + static_cast<long>(e));
    if (!store.PutMany(v).has_value()) std::abort();
  }));
  rows->push_back(Measure(name, "get_many/128", size, n, 128, [&](size_t b, size_t e) {
    for (auto& r : store.GetMany(std::span<const fak::Digest>(digests.data() + b, e - b)))
      if (!r.has_value()) std::abort();
  }));
}

}  // namespace

int main() {
  const size_t n = std::getenv("FAK_REDIS_BENCH_N") ? std::strtoul(std::getenv("FAK_REDIS_BENCH_N"), nullptr, 10) : 2000;
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/fak_redis_bench_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl.data());
  pid_t redis_pid = -1;
  fak::RedisOptions ro;
  ro.prefix = "fakbench";
  if (const char* p = std::getenv("FAK_REDIS_PORT")) {
    ro.port = std::atoi(p);
  } else {
    ro.port = FreePort();
    redis_pid = StartRedis(dir, ro.port);
  }
  fak::Result<std::unique_ptr<fak::BlobStore>> redis = fak::Status(fak::StatusCode::kIOError, "not tried");
  for (int i = 0; i < 100 && !redis.has_value(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    redis = fak::OpenRedisBlobStore(ro);
  }
  if (!redis.has_value()) {
    std::fprintf(stderr, "fak_redis_bench: %s (is redis-server installed? run scripts/setup)\n", redis.error().ToString().c_str());
    if (redis_pid > 0) ::kill(redis_pid, SIGKILL);
    return 1;
  }
  fak::BlobStoreOptions sync_on, sync_off;
  sync_on.capacity_bytes = sync_off.capacity_bytes = uint64_t{8} << 30;
  sync_off.sync = false;
  auto dir_sync = std::move(*fak::OpenDirectoryBlobStore(dir + "/dir_sync", sync_on));
  auto dir_nosync = std::move(*fak::OpenDirectoryBlobStore(dir + "/dir_nosync", sync_off));

  std::vector<Row> rows;
  for (size_t size : {size_t{1024}, size_t{64} << 10}) {
    BenchStore("directory", *dir_nosync, size, n, &rows);
    BenchStore("directory+sync", *dir_sync, size, std::min<size_t>(n, 500), &rows);
    BenchStore("redis", **redis, size, n, &rows);
  }
  std::map<std::pair<std::string, size_t>, double> baseline;
  for (const Row& r : rows)
    if (r.store == "directory") baseline[{r.op, r.size_bytes}] = r.ops_per_s;
  std::printf("%-15s %-13s %7s %12s %10s %10s %10s %9s\n", "store", "op", "bytes", "ops/s", "MB/s", "p50_us", "p99_us",
              "x_dir");
  for (const Row& r : rows) {
    std::printf("%-15s %-13s %7zu %12.0f %10.1f %10.1f %10.1f %9.3f\n", r.store.c_str(), r.op.c_str(), r.size_bytes, r.ops_per_s,
                r.ops_per_s * static_cast<double>(r.size_bytes) / 1e6, r.p50_us, r.p99_us,
                r.ops_per_s / baseline[{r.op, r.size_bytes}]);
  }
  std::printf("(p50/p99 of the batched rows are per batch of 128; x_dir = ops/s over the directory store without sync)\n");
  redis->reset();
  if (redis_pid > 0) {
    ::kill(redis_pid, SIGTERM);
    ::waitpid(redis_pid, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
