// fak_kv_tier_bench: time to first token for a conversation whose prefix KV is cached — in memory
// (the radix tree), in the directory tier, in Redis — against recomputing it from its tokens, on
// the SmolLM2-135M shape (synthetic weights) and, with --gemma PATH, a real GGUF model (issue 24).
//
// Each row: a prefix of N tokens was computed once and stored; the request is the prefix plus a
// 16-token new turn. TTFT = what a worker does from the request to the first next-token logits:
//   memory     tree lookup (hit N) + prefill the 16 new tokens
//   directory  tree lookup (miss) + page-in (read, verify checksums, gate) + radix insert + prefill 16
//   redis      the same over loopback Redis (values chunked to 4 MiB)
//   recompute  prefill all N + 16 tokens
// Every path's logits are compared with the recompute's (max|Δ| printed; must be 0). The directory
// tier is read through the OS page cache (warm: written just before); the row says so.
// --repeat N (default 3): the memory, directory and Redis rows and the transport-only Get timings
// are the median of N runs (each a fresh tree); recompute runs once (it is the slow one). Each
// tier row's median run is split on stderr into page-in (read + verify), radix insert and prefill.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fak/fak.h"
#if FAK_BENCH_WITH_REDIS
#include "fak/kvtier/redis_kv_tier.h"
#endif

namespace {

using namespace fak;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  std::fprintf(stderr, "fak_kv_tier_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

template <class T>
T Must(Result<T> r, const std::string& what) {
  if (!r.has_value()) Die(what, r.error());
  return std::move(*r);
}

#if FAK_BENCH_WITH_REDIS
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

// A redis-server without persistence (the tier is a cache; durability is the text's job).
pid_t StartRedis(const std::string& dir, int port) {
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir", dir,
                                   "--appendonly", "no", "--save", "", "--logfile", dir + "/redis.log"};
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
#endif

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Split {
  double page_in_s = 0, insert_s = 0, prefill_s = 0;
};

struct Row {
  std::string model, path;
  size_t prefix = 0;
  double ttft_s = 0;
  float max_delta = 0;
  size_t paged_mb = 0;
};

// One worker's view: a tree over `model`, optionally a pager over a tier.
double TimeRequest(const Model& model, const Tokenizer& tok, RadixTree& tree, KVPager* pager,
                   const std::vector<int32_t>& request, std::vector<float>* logits, Split* split = nullptr) {
  const auto t0 = Clock::now();
  Split parts;
  const ResidentClaim claim = tree.ClaimFor("default");
  LookupResult lookup = tree.Lookup(claim, request);
  if (pager != nullptr && lookup.matched_tokens + 16 < request.size()) {
    const size_t before = lookup.cache.size();
    PageInResult r = pager->PageIn(claim, request, request.size() - 16, lookup.cache);
    if (lookup.cache.size() == before) Die("page-in", FailedPrecondition(std::string(PageInFailureName(r.failure)) + ": " + r.detail));
    parts.page_in_s = Seconds(t0);
    const auto ti = Clock::now();
    if (Status s = tree.Insert("default", std::span<const int32_t>(request).first(lookup.cache.size()), lookup.cache); !s.ok()) Die("insert", s);
    parts.insert_s = Seconds(ti);
  }
  const auto tp = Clock::now();
  std::span<const int32_t> suffix = std::span<const int32_t>(request).subspan(lookup.cache.size());
  *logits = Must(model.Prefill(&lookup.cache, suffix, LogitsMode::kLast), "prefill");
  parts.prefill_s = Seconds(tp);
  if (split != nullptr) *split = parts;
  return Seconds(t0);
}

void BenchModel(const std::string& name, const Model& model, const std::vector<size_t>& sizes, size_t recompute_max,
                size_t repeat, const std::string& work, KVTierStore* redis, std::vector<Row>* rows) {
  auto tok = MakeByteTokenizer();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(3, static_cast<int32_t>(std::min<size_t>(model.config().vocab_size, 30000)) - 1);
  for (size_t n : sizes) {
    std::vector<int32_t> request(n + 16);
    for (int32_t& t : request) t = id(rng);
    const std::vector<int32_t> prefix(request.begin(), request.begin() + static_cast<std::ptrdiff_t>(n));
    // The stored prefix: computed once, inserted in a tree (memory) and spilled to the tiers.
    KVCache computed = model.NewCache();
    const auto tp = Clock::now();
    (void)Must(model.Prefill(&computed, prefix, LogitsMode::kNone), "prefill prefix");
    const double prefix_s = Seconds(tp);
    std::filesystem::remove_all(work + "/dir");
    std::unique_ptr<KVTierStore> dir = Must(OpenDirectoryKVTier(work + "/dir"), "open directory tier");
    RadixTree memory_tree(model, *tok);
    if (Status s = memory_tree.Insert("default", prefix, computed); !s.ok()) Die("insert", s);
    const NodeId node = Must(memory_tree.FindNode(prefix), "find node");
    SpillItem item{*memory_tree.ManifestOf(node), nullptr, {}};
    item.slab = std::make_shared<const KVSlab>(Must(computed.CopySpan(0, n), "copy"));
    const auto tw = Clock::now();
    if (Status s = SpillToTier(*dir, item); !s.ok()) Die("spill to directory", s);
    const double write_s = Seconds(tw);
    if (redis != nullptr) {
      if (Status s = SpillToTier(*redis, item); !s.ok()) Die("spill to redis", s);
    }
    // Transport alone (Get of the stored bytes), to split page-in time into moving and verifying.
    const TierKey key = TierKeyFor(item.manifest.binding, "default", item.manifest.binding.span_digest, n);
    size_t got_bytes = 0;
    std::vector<double> dir_gets, redis_gets;
    for (size_t i = 0; i < repeat; ++i) {
      const auto tg = Clock::now();
      got_bytes = Must(dir->Get(key), "directory get").size();
      dir_gets.push_back(Seconds(tg));
      if (redis != nullptr) {
        const auto tr = Clock::now();
        (void)Must(redis->Get(key), "redis get");
        redis_gets.push_back(Seconds(tr));
      }
    }
    const double mb = static_cast<double>(got_bytes) / 1e6;
    const double dir_get_s = Median(dir_gets), redis_get_s = redis_gets.empty() ? NAN : Median(redis_gets);
    std::fprintf(stderr,
                 "[%s %zu] prefix prefill %.2f s; %.1f MB slab file: directory write (fsync) %.3f s; Get (median of %zu): "
                 "directory %.3f s (%.0f MB/s), redis %.3f s (%.0f MB/s)\n",
                 name.c_str(), n, prefix_s, mb, write_s, repeat, dir_get_s, mb / dir_get_s, redis_get_s, mb / redis_get_s);

    std::vector<float> want;
    double recompute_s = NAN;
    if (n <= recompute_max) {
      RadixTree empty(model, *tok);
      recompute_s = TimeRequest(model, *tok, empty, nullptr, request, &want);
    } else {  // the reference logits still come from a full recompute of the stored prefix + turn
      KVCache c = computed.Clone();
      want = Must(model.Prefill(&c, std::span<const int32_t>(request).subspan(n), LogitsMode::kLast), "reference");
    }
    std::vector<float> got;
    // Each path `repeat` times (a fresh tree each, so every tier run pages in), the median row kept.
    const auto measure = [&](const std::string& path, KVTierStore* tier) {
      std::vector<std::pair<double, Split>> runs;
      float delta = 0;
      size_t paged_mb = 0;
      for (size_t i = 0; i < repeat; ++i) {
        Split split;
        double s = 0;
        if (tier == nullptr) {
          s = TimeRequest(model, *tok, memory_tree, nullptr, request, &got, &split);
        } else {
          RadixTree fresh(model, *tok);
          TierPager pager(*tier, fresh.access_policy(), nullptr);
          s = TimeRequest(model, *tok, fresh, &pager, request, &got, &split);
          paged_mb = pager.Stats().paged_bytes >> 20;
        }
        delta = std::max(delta, MaxAbsDiff(got, want));
        runs.push_back({s, split});
      }
      std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      const auto& [median, split] = runs[runs.size() / 2];
      if (tier != nullptr)
        std::fprintf(stderr, "[%s %zu] %s: TTFT %.3f s = page-in %.3f s + radix insert %.3f s + prefill %.3f s\n", name.c_str(), n,
                     path.c_str(), median, split.page_in_s, split.insert_s, split.prefill_s);
      rows->push_back({name, path, n, median, delta, paged_mb});
    };
    measure("memory", nullptr);
    measure("directory (page cache warm)", dir.get());
    if (redis != nullptr) {
      measure("redis (loopback)", redis);
      (void)redis->Remove(key);
    }
    if (!std::isnan(recompute_s)) rows->push_back({name, "recompute", n, recompute_s, 0.0f, 0});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1024, 4096};
  size_t recompute_max = SIZE_MAX, threads = 2, repeat = 3;
  std::string gemma;
  bool synthetic = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-synthetic") {
      synthetic = false;
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (std::string s = argv[++i]; !s.empty();) {
        const size_t c = s.find(',');
        sizes.push_back(std::stoul(s.substr(0, c)));
        s = c == std::string::npos ? "" : s.substr(c + 1);
      }
    } else if (a == "--recompute-max" && i + 1 < argc) {
      recompute_max = std::stoul(argv[++i]);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max<size_t>(1, std::stoul(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::stoul(argv[++i]);
    } else if (a == "--gemma" && i + 1 < argc) {
      gemma = argv[++i];
    } else {
      std::fprintf(stderr, "usage: fak_kv_tier_bench [--sizes 1024,4096,16384] [--recompute-max N] [--repeat N] [--threads N] [--gemma model.gguf] [--no-synthetic]\n");
      return 2;
    }
  }
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  char tmpl[] = "/tmp/fak_kv_tier_bench_XXXXXX";
  const std::string work = ::mkdtemp(tmpl);

  std::unique_ptr<KVTierStore> redis;
  pid_t redis_pid = -1;
#if FAK_BENCH_WITH_REDIS
  const int port = FreePort();
  redis_pid = StartRedis(work, port);
  RedisOptions ro;
  ro.port = port;
  ro.prefix = "fakbench";
  ro.command_timeout_ms = 60000;
  for (int attempt = 0; attempt < 50 && redis == nullptr; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (auto r = OpenRedisKVTier(ro); r.has_value()) redis = std::move(*r);
  }
  if (redis == nullptr) std::fprintf(stderr, "fak_kv_tier_bench: no redis-server; Redis rows skipped\n");
#endif

  ModelOptions mo;
  mo.n_threads = threads;
  std::vector<Row> rows;
  if (synthetic) {
    ModelConfig c = ModelConfig::SmolLM2_135M_Shape();
    c.context_length = std::max<size_t>(c.context_length, largest + 64);
    std::unique_ptr<Model> smol = Must(Model::Synthetic(c, 42, mo), "SmolLM2 shape");
    BenchModel("SmolLM2-135M shape", *smol, sizes, recompute_max, repeat, work, redis.get(), &rows);
  }
  if (!gemma.empty()) {
    mo.max_context = largest + 64;
    std::unique_ptr<Model> g = Must(Model::Load(gemma, mo), "load " + gemma);
    BenchModel("Gemma 3 270M Q4_K_M", *g, sizes, recompute_max, repeat, work, redis.get(), &rows);
  }
  if (redis_pid > 0) {
    redis.reset();
    ::kill(redis_pid, SIGTERM);
    ::waitpid(redis_pid, nullptr, 0);
  }
  std::filesystem::remove_all(work);

  std::printf("| model | prefix tokens | path | TTFT | × vs recompute | slab MB read | max abs delta vs recompute |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    double recompute = NAN;
    for (const Row& x : rows)
      if (x.model == r.model && x.prefix == r.prefix && x.path == "recompute") recompute = x.ttft_s;
    std::printf("| %s | %zu | %s | %.1f ms | %s | %zu | %g |\n", r.model.c_str(), r.prefix, r.path.c_str(), r.ttft_s * 1e3,
                std::isnan(recompute) ? "n/a" : (std::to_string(static_cast<int>(recompute / r.ttft_s * 10) / 10.0).substr(0, 5) + "×").c_str(),
                r.paged_mb, r.max_delta);
  }
  for (const Row& r : rows)
    if (r.max_delta != 0) return 1;
  return 0;
}
