// fak_store_bench: directory BlobStore throughput for 1 KiB - 1 MiB payloads, against sha256 alone
// measured in the same run (the baseline), and against a raw read of the same file (so the cost
// of verify-on-read is visible).
//
//   BM_Sha256/<bytes>          Digest::Of over a buffer: the verify cost by itself.
//   BM_RawRead/<bytes>         open + pread + close of a blob file, no checks (warm page cache).
//   BM_Get/<bytes>             BlobStore::Get: read + header check + sha256 verify.
//                              x_sha256 = its MB/s over BM_Sha256's at that size (target ≥ 0.7 at 1 MiB).
//   BM_PutSync/<bytes>         Put of new content, fsync + rename + directory fsync (the default).
//   BM_PutNoSync/<bytes>       Put with options.sync = false (atomic, not power-loss durable).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "fak/store/blob_store.h"

namespace {

std::string& BenchDir() {
  static std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/fak_store_bench_XXXXXX";
    return std::string(::mkdtemp(tmpl.data()));
  }();
  return dir;
}

std::string Payload(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

fak::BlobStore& Store(bool sync) {
  static std::map<bool, std::unique_ptr<fak::BlobStore>> stores;
  auto& s = stores[sync];
  if (!s) {
    fak::BlobStoreOptions options;
    options.sync = sync;
    options.capacity_bytes = uint64_t{8} << 30;
    s = std::move(*fak::OpenDirectoryBlobStore(BenchDir() + (sync ? "/sync" : "/nosync"), options));
  }
  return *s;
}

// sha256 bytes per second at `size`, measured once (~0.2 s) and kept for the ratio counters.
double Sha256Rate(size_t size) {
  static std::map<size_t, double> rates;
  if (auto it = rates.find(size); it != rates.end()) return it->second;
  const std::string buf = Payload(size, 1);
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.2) {
    benchmark::DoNotOptimize(fak::Digest::Of(buf));
    bytes += size;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return rates[size] = static_cast<double>(bytes) / seconds;
}

void BM_Sha256(benchmark::State& state) {
  const std::string buf = Payload(static_cast<size_t>(state.range(0)), 2);
  for (auto _ : state) benchmark::DoNotOptimize(fak::Digest::Of(buf));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_RawRead(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const fak::Digest d = *Store(true).Put(Payload(size, 3));
  const std::string path = BenchDir() + "/sync/blobs/" + d.Hex().substr(0, 2) + "/" + d.Hex();
  std::string buf(size + 56, '\0');
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    benchmark::DoNotOptimize(::pread(fd, buf.data(), buf.size(), 0));
    ::close(fd);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Get(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const fak::Digest d = *Store(true).Put(Payload(size, 3));
  const double sha_rate = Sha256Rate(size);
  for (auto _ : state) {
    fak::Result<std::string> got = Store(true).Get(d);
    if (!got.has_value()) state.SkipWithError(got.error().ToString().c_str());
    benchmark::DoNotOptimize(got);
  }
  const double bytes = static_cast<double>(state.iterations()) * static_cast<double>(size);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  // A rate counter is divided by the elapsed time: (bytes / sha_rate) / seconds = Get MB/s / sha MB/s.
  state.counters["x_sha256"] = benchmark::Counter(bytes / sha_rate, benchmark::Counter::kIsRate);
}

void PutBench(benchmark::State& state, bool sync) {
  const size_t size = static_cast<size_t>(state.range(0));
  std::string payload = Payload(size, 4);
  static uint64_t counter = 0;
  for (auto _ : state) {
    ++counter;  // new content every time, so dedupe never short-cuts the write
    std::memcpy(payload.data(), &counter, sizeof(counter));
    fak::Result<fak::Digest> d = Store(sync).Put(payload);
    if (!d.has_value()) state.SkipWithError(d.error().ToString().c_str());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
void BM_PutSync(benchmark::State& state) { PutBench(state, true); }
void BM_PutNoSync(benchmark::State& state) { PutBench(state, false); }

BENCHMARK(BM_Sha256)->RangeMultiplier(4)->Range(1 << 10, 1 << 20);
BENCHMARK(BM_RawRead)->RangeMultiplier(4)->Range(1 << 10, 1 << 20);
BENCHMARK(BM_Get)->RangeMultiplier(4)->Range(1 << 10, 1 << 20);
BENCHMARK(BM_PutNoSync)->RangeMultiplier(4)->Range(1 << 10, 1 << 20);
BENCHMARK(BM_PutSync)->RangeMultiplier(4)->Range(1 << 10, 1 << 20)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(BenchDir(), ec);
  return 0;
}
