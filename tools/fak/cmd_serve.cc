// `fak serve`: the OpenAI-compatible HTTP server (src/server/server.h) over one model's Engine.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>
#include <thread>
#include <unistd.h>

#include "fak/engine/engine.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/tier_pager.h"
#include "fak/kvtier/tier_spiller.h"
#include "fak/planner/planner.h"
#include "fak/screen/file_denylist.h"
#include "fak/screen/screen.h"
#include "fak/store/blob_store.h"
#if FAK_WITH_REDIS
#include "fak/kvtier/redis_kv_tier.h"
#include "fak/store/redis_store.h"
#endif
#if FAK_WITH_REDIS
#include "src/server/redis_fleet.h"
#endif
#include "src/server/server.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kServeUsage =
    "usage: fak serve MODEL [options]\n"
    "\n"
    "Serves MODEL over HTTP with OpenAI's API: POST /v1/chat/completions, POST /v1/completions,\n"
    "GET /v1/models, GET /health, Prometheus metrics at GET /metrics, and fak's own endpoints under\n"
    "/fak/v1: conversations with deletion certificates, the gate's verdict (docs/server.md).\n"
    "Prints \"fak serve: listening on http://HOST:PORT\" on stderr once it accepts connections.\n"
    "SIGTERM or SIGINT drains: new requests get 503, those in flight finish (for at most\n"
    "--drain-timeout; then they are cancelled), the KV tier is checkpointed, and it exits 0. A\n"
    "second SIGTERM or SIGINT cancels what still runs at once, checkpoints, and exits 1.\n"
    "\n"
    "options:\n"
    "  -m, --model MODEL      the model (or give it as the positional argument)\n"
    "  --host HOST            address to listen on. Default: 127.0.0.1\n"
    "  --port PORT            port; 0 = any free one. Default: 8080\n"
    "  --threads N            threads per forward pass; 0 = one per hardware thread. Default: 0\n"
    "  --kv-dtype T           KV cache element type: f16, f32 or bf16 (docs/kv-regimes.md). Default:\n"
    "                         FAK_KV_DTYPE when set, else f16\n"
    "  --kv-budget BYTES      KV bytes for running requests and the prefix tree; 0 = unbounded. Default: 0\n"
    "  --api-keys FILE        one 'KEY TENANT' per line; requests need 'Authorization: Bearer KEY'\n"
    "                         and reuse prefixes only within their tenant. Default: no keys, tenant \"default\"\n"
    "  --api-key KEY          one more key, for tenant \"default\" (also read from the environment\n"
    "                         variable FAK_API_KEY). Default: none\n"
    "  --cors-origin ORIGIN   browsers on ORIGIN (e.g. http://localhost:3000, or * for any) may call\n"
    "                         the API; OPTIONS preflights are answered. Repeatable. Default: CORS off\n"
    "  --max-body BYTES       larger request bodies (chunked ones too) are refused with 413.\n"
    "                         Default: 1048576\n"
    "  --max-running N        requests batched at once. Default: 16\n"
    "  --max-queued N         requests waiting; more are refused with 503. Default: 256\n"
    "  --max-queued-per-tenant N  requests one tenant may have waiting (503 past it). Default: 64\n"
    "  --speculate MODE       exact speculative decoding for every request: off, ngram (prompt lookup)\n"
    "                         or ngram:K (K draft tokens); same tokens and logits. Default: off\n"
    "  --draft-model FILE     speculate with a draft model (same vocabulary; not kept across a rollout)\n"
    "  --model-name NAME      the model's id in the API. Default: the file's name ('embedded' for it)\n"
    "  --template NAME|FILE   the chat template: a family (gemma, llama3, chatml, mistral, llama2,\n"
    "                         phi3, fak) or a file with a Jinja template. Default: the model's own\n"
    "\n"
    "Slow and greedy clients (a connection past a deadline is cut, however steadily it trickles):\n"
    "  --header-timeout S     a request's line and headers must arrive whole within S seconds of\n"
    "                         the connection's start or the previous response. Default: 10\n"
    "  --body-timeout S       its body within S seconds of its headers. Default: 30\n"
    "  --idle-timeout S       a connection that moves no byte for S seconds is closed. Default: 10\n"
    "  --max-connections N    connections held at once; more are not served. Default: 512\n"
    "  --max-connections-per-peer N  the same from one client address (behind a proxy, every\n"
    "                         client is one). Default: 64\n"
    "  --drain-timeout S      how long a stop lets requests in flight finish. Default: 30\n"
    "\n"
    "fak's own endpoints (/fak/v1/conversations, /fak/v1/certificates/verify) run through a planner:\n"
    "  --state DIR            its journal (DIR/journal.log), signing key (DIR/key.pem) and denylist\n"
    "                         (DIR/denylist: every evicted or quarantined text stays sealed across\n"
    "                         restarts, and is never stored again). Default: a temporary directory,\n"
    "                         removed at exit\n"
    "  --store DIR            conversation texts in directory blob stores, one per tenant (DIR/TENANT).\n"
    "                         Default: DIR/corpus of --state\n"
    "  --redis URL            conversation texts in Redis instead, one namespace per tenant:\n"
    "                         redis://[:PASSWORD@]HOST[:PORT][/DB]\n"
    "  --max-conversations N  conversations held at once; more are refused with 503. Default: 1024\n"
    "  --max-conversations-per-tenant N  conversations one tenant may hold (503 past it). Default: 256\n"
    "  --admin-tenant NAME    the tenant allowed to roll out new weights (POST /fak/v1/rollout names a\n"
    "                         MODEL as above; serving switches to it at cutover). Default: anyone\n"
    "                         without --api-keys, nobody with them\n"
    "  --rollout-dir DIR      a rollout's MODEL is a built-in name or a file under DIR (repeatable).\n"
    "                         Default: the served model file's directory (none for a built-in model)\n"
    "\n"
    "KV tier (prefix KV kept past the tree's budget and across restarts; every slab verified before use):\n"
    "  --kv-tier-dir DIR      slabs in a directory: the tree's budget evictions are written behind, the\n"
    "                         whole tree is written at shutdown, and a prompt's prefix is read back\n"
    "                         instead of prefilled when the tree lacks it (completions and\n"
    "                         conversations alike)\n"
    "  --kv-tier-redis HOST:PORT  the same in Redis (builds with Redis support)\n"
    "  --kv-tier-max-bytes BYTES  the tier's bound: least recently used entries go past it.\n"
    "                         Default: 8 GiB or half the free space of DIR's file system at start,\n"
    "                         whichever is less (the tier never fills the disk --state is on); 0 = none\n"
    "  --kv-tier-max-bytes-per-tenant BYTES  one tenant's share of the directory tier: past it,\n"
    "                         that tenant's least recently used entries go. Default: a quarter of\n"
    "                         --kv-tier-max-bytes with --api-keys, none without; 0 = none\n"
    "  --kv-tier-ttl SECONDS  (Redis tier) an entry unused this long expires. Default: 86400; 0 = never\n"
    "\n"
    "Fleet (several workers behind one router, sharing one Redis; docs/fleet.md; builds with Redis support):\n"
    "  --fleet URL            redis://[:PASSWORD@]HOST[:PORT][/DB]: seals live in the fleet's denylist\n"
    "                         there (this worker's earlier ones are copied in), an erasure is\n"
    "                         announced to every worker and its reply names those that confirmed;\n"
    "                         texts and the KV tier default to the same Redis, and each prefix is\n"
    "                         written to the tier as it is made, so another worker pages it in\n"
    "  --worker-id NAME       this worker's name in the fleet. Default: HOSTNAME-PID\n";

// SIGINT and SIGTERM, blocked in every thread (BlockStopSignals runs before any thread starts: the
// model's pool and the engine's step thread inherit the mask) and taken by StopOnSignal's thread.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}
// Takes the stop signals on a thread of its own (Server::Stop and Abort are not async-signal-safe):
// the first drains the server (Stop, on another thread, so that a second signal is still taken);
// the second ends the drain at once (Abort). Finish wakes and joins it once Serve has returned.
class StopOnSignals {
 public:
  explicit StopOnSignals(Server& server) : server_(server), thread_([this] { Run(); }) {}
  ~StopOnSignals() { Finish(); }
  // True when a second signal forced the stop.
  bool Finish() {
    if (thread_.joinable()) {
      finished_ = true;
      pthread_kill(thread_.native_handle(), SIGTERM);  // taken as "finished", not as a signal
      thread_.join();
    }
    if (stopper_.joinable()) stopper_.join();
    return forced_;
  }

 private:
  void Run() {
    const sigset_t set = StopSignals();
    for (int n = 1; n <= 2; ++n) {
      int signal = 0;
      sigwait(&set, &signal);
      if (finished_) return;
      const char* name = signal == SIGINT ? "SIGINT" : "SIGTERM";
      if (n == 1) {
        std::fprintf(stderr, "fak serve: %s, draining (a second signal cancels what still runs)\n", name);
        stopper_ = std::thread([this] { server_.Stop(); });
      } else {
        std::fprintf(stderr, "fak serve: second %s: cancelling what still runs; exiting after the KV checkpoint\n", name);
        forced_ = true;
        server_.Abort();
      }
    }
  }

  Server& server_;
  std::atomic<bool> finished_{false};
  std::atomic<bool> forced_{false};
  std::thread stopper_;  // runs Server::Stop; started and joined by thread_ and Finish
  std::thread thread_;
};

#if FAK_WITH_REDIS
// redis://[:PASSWORD@]HOST[:PORT][/DB]
Result<RedisOptions> ParseRedisUrl(std::string_view url, std::string_view flag) {
  constexpr std::string_view kScheme = "redis://";
  const std::string bad = "--" + std::string(flag) + " '" + std::string(url) + "': expected redis://[:PASSWORD@]HOST[:PORT][/DB]";
  if (url.rfind(kScheme, 0) != 0) return InvalidArgument(bad);
  std::string_view rest = url.substr(kScheme.size());
  RedisOptions o;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view auth = rest.substr(0, at);
    if (auth.empty() || auth[0] != ':') return InvalidArgument(bad + " (the password comes after ':')");
    o.password = std::string(auth.substr(1));
    rest = rest.substr(at + 1);
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      const auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), o.database);
      if (ec != std::errc() || end != db.data() + db.size() || o.database < 0) return InvalidArgument(bad + " (DB is a number)");
    }
    rest = rest.substr(0, slash);
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    const std::string_view port = rest.substr(colon + 1);
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), o.port);
    if (ec != std::errc() || end != port.data() + port.size() || o.port <= 0 || o.port > 65535)
      return InvalidArgument(bad + " (PORT is 1-65535)");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return InvalidArgument(bad + " (no HOST)");
  o.host = std::string(rest);
  return o;
}
#endif

// The engine's KV tier (--kv-tier-dir / --kv-tier-redis): the store, the spiller its tree writes
// evictions to and the pager admission reads prefixes from. Must outlive the engine.
//
// The tree's spill sink: while serving, budget evictions go to the spiller's bounded write-behind
// queue (dropped when it is full: a recompute later, never a blocked tree); for the shutdown
// checkpoint every node is kept and written after the tree lets go of its lock, none dropped.
class KVTier final : public SpillSink {
 public:
  void Offer(SpillItem item, SpillReason reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (checkpointing_) {
      checkpoint_.push_back(std::move(item));  // the slab is shared, not copied
      return;
    }
    spiller->Offer(std::move(item), reason);
  }
  // Writes every node of `tree` (all unleased: the engine has drained) to the tier; "N written,
  // M failed" for the log.
  std::string Checkpoint(RadixTree& tree) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      checkpointing_ = true;
    }
    tree.EvictToBudget(0);
    spiller->Flush();
    std::vector<SpillItem> items;
    {
      std::lock_guard<std::mutex> lock(mu_);
      items.swap(checkpoint_);
    }
    size_t failed = 0;
    std::string last_error;
    for (const SpillItem& item : items) {
      if (Status s = SpillToTier(*store, item); !s.ok()) {
        ++failed;
        last_error = s.ToString();
      }
    }
    const TierSpillerStats behind = spiller->Stats();
    return std::to_string(items.size() - failed) + " nodes checkpointed, " + std::to_string(failed) + " failed; " +
           std::to_string(behind.written) + " written behind, " + std::to_string(behind.dropped) + " dropped, " +
           std::to_string(behind.failed) + " failed" + (last_error.empty() ? "" : " (" + last_error + ")");
  }

  std::unique_ptr<KVTierStore> store;
  std::unique_ptr<TierSpiller> spiller;
  AccessPolicy access;  // the engine tree's tenancy rules (the default: tenant-only spans)
  std::unique_ptr<TierPager> pager;

 private:
  std::mutex mu_;
  bool checkpointing_ = false;          // GUARDED_BY(mu_)
  std::vector<SpillItem> checkpoint_;   // GUARDED_BY(mu_)
};

// The KV tier's defaults: bounded, so a tier shares the disk (or Redis) with --state and never
// fills it.
constexpr uint64_t kDefaultTierTtlSeconds = 24 * 3600;
constexpr uint64_t kDefaultTierMaxBytes = uint64_t{8} << 30;

// 8 GiB or half the space free on `dir`'s file system now, whichever is less.
uint64_t DefaultTierBound(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  if (ec) return kDefaultTierMaxBytes;
  return std::max<uint64_t>(1, std::min<uint64_t>(kDefaultTierMaxBytes, space.available / 2));
}

// Null when neither flag is given. `denylist`: the planner chain's, so a quarantined text's KV is
// never paged in.
// `fleet`: the fleet's Redis (--fleet), the tier's when neither flag names one.
Result<std::unique_ptr<KVTier>> OpenKVTier(const Args& args, const Denylist& denylist,
                                           const std::optional<RedisOptions>& fleet) {
  const std::optional<std::string> dir = args.Get("kv-tier-dir");
  const std::optional<std::string> redis = args.Get("kv-tier-redis");
  if (dir && redis) return InvalidArgument("--kv-tier-dir and --kv-tier-redis are alternatives; give one");
  if (!dir && !redis && !fleet) return std::unique_ptr<KVTier>();
  auto tier = std::make_unique<KVTier>();
  FAK_ASSIGN_OR_RETURN(const uint64_t ttl, args.GetUint("kv-tier-ttl", kDefaultTierTtlSeconds));
  if (dir) {
    if (args.Get("kv-tier-ttl"))
      return InvalidArgument("--kv-tier-ttl: the directory tier bounds its entries by --kv-tier-max-bytes");
    DirectoryKVTierOptions options;
    FAK_RETURN_IF_ERROR(Env::Default()->CreateDir(*dir).WithContext("--kv-tier-dir " + *dir));
    FAK_ASSIGN_OR_RETURN(options.max_bytes, args.GetUint("kv-tier-max-bytes", DefaultTierBound(*dir)));
    // With API keys there are tenants to share between: a quarter of the bound each by default.
    const uint64_t share = args.Get("api-keys") ? options.max_bytes / 4 : 0;
    FAK_ASSIGN_OR_RETURN(options.max_bytes_per_namespace, args.GetUint("kv-tier-max-bytes-per-tenant", share));
    FAK_ASSIGN_OR_RETURN(tier->store, OpenDirectoryKVTier(*dir, options, Env::Default()));
  } else {
    if (args.Get("kv-tier-max-bytes") || args.Get("kv-tier-max-bytes-per-tenant"))
      return InvalidArgument("--kv-tier-max-bytes: a Redis tier is bounded by the server's maxmemory (and --kv-tier-ttl)");
#if FAK_WITH_REDIS
    RedisOptions o = fleet.value_or(RedisOptions{});
    if (redis) {
      const size_t colon = redis->rfind(':');
      int port = 0;
      const char* end = redis->data() + redis->size();
      if (colon == std::string::npos || colon == 0 ||
          std::from_chars(redis->data() + colon + 1, end, port).ptr != end || port <= 0 || port > 65535) {
        return InvalidArgument("--kv-tier-redis '" + *redis + "': expected HOST:PORT (PORT 1-65535)");
      }
      o = RedisOptions{};
      o.host = redis->substr(0, colon);
      o.port = port;
    }
    if (ttl > uint64_t{INT32_MAX}) return InvalidArgument("--kv-tier-ttl: at most " + std::to_string(INT32_MAX) + " seconds");
    o.ttl_seconds = static_cast<int64_t>(ttl);
    FAK_ASSIGN_OR_RETURN(tier->store, OpenRedisKVTier(o));
#else
    return Unsupported("--kv-tier-redis: this build has no Redis support (FAK_WITH_REDIS=OFF)");
#endif
  }
  tier->spiller = std::make_unique<TierSpiller>(*tier->store);
  tier->pager = std::make_unique<TierPager>(*tier->store, tier->access, &denylist);
  return tier;
}

using TenantStore = std::function<Result<std::unique_ptr<BlobStore>>(std::string_view tenant)>;

// The planner's text stores, one per tenant (so one tenant's erasure never touches another's copy
// of a text): directories TENANT/ under --store DIR (default: DIR/corpus of the state directory),
// or the tenant's namespace of --redis URL. The options are checked now, by opening the default
// tenant's store once.
Result<TenantStore> OpenTextStores(const Args& args, const StateDir& state) {
  const std::optional<std::string> dir = args.Get("store");
  std::optional<std::string> redis = args.Get("redis");
  if (dir && redis) return InvalidArgument("--store and --redis are alternatives; give one");
  [[maybe_unused]] std::string_view flag = "redis";  // names the flag in a parse error
  if (!dir && !redis && args.Get("fleet")) {  // a fleet's texts are shared too
    redis = args.Get("fleet");
    flag = "fleet";
  }
  TenantStore open;
  if (redis) {
#if FAK_WITH_REDIS
    FAK_ASSIGN_OR_RETURN(RedisOptions options, ParseRedisUrl(*redis, flag));
    open = [options](std::string_view tenant) {
      RedisOptions o = options;
      o.tenant = std::string(tenant);
      return OpenRedisBlobStore(o);
    };
#else
    return Unsupported("--redis: this build has no Redis support (FAK_WITH_REDIS=OFF)");
#endif
  } else {
    const std::string root = dir ? *dir : (state.dir / "corpus").string();
    FAK_RETURN_IF_ERROR(Env::Default()->CreateDir(root).WithContext("--store " + root));
    open = [root](std::string_view tenant) { return OpenDirectoryBlobStore(root + "/" + std::string(tenant)); };
  }
  FAK_RETURN_IF_ERROR(open(kDefaultTenant).status());
  return open;
}

// This worker's part in a fleet (--fleet): the fleet's Redis, and the link that carries erasures.
struct FleetMembership {
  std::optional<RedisOptions> redis;  // nullopt: no fleet
#if FAK_WITH_REDIS
  std::unique_ptr<RedisFleet> link;
#endif
  FleetLink* link_or_null() const {
#if FAK_WITH_REDIS
    return link.get();
#else
    return nullptr;
#endif
  }
};

Result<FleetMembership> JoinFleet(const Args& args) {
  FleetMembership m;
  const std::optional<std::string> url = args.Get("fleet");
  if (!url) {
    if (args.Get("worker-id")) return InvalidArgument("--worker-id names this worker in a fleet; give --fleet too");
    return m;
  }
#if FAK_WITH_REDIS
  FAK_ASSIGN_OR_RETURN(m.redis, ParseRedisUrl(*url, "fleet"));
  RedisFleetOptions options;
  options.redis = *m.redis;
  if (std::optional<std::string> id = args.Get("worker-id")) {
    options.worker_id = *id;
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "worker");
    options.worker_id = std::string(host) + "-" + std::to_string(getpid());
  }
  Result<std::unique_ptr<RedisFleet>> link = RedisFleet::Open(std::move(options));
  if (!link) return link.error().WithContext("--fleet " + *url);
  m.link = std::move(*link);
  return m;
#else
  return Unsupported("--fleet: this build has no Redis support (FAK_WITH_REDIS=OFF)");
#endif
}

// The planner's screens: the state directory's denylist, or in a fleet the fleet's, in its Redis
// (a seal made on any worker holds on all; one made before this worker joined is copied in first,
// so joining forgets none). *n_sealed: the state directory's seals.
Result<std::shared_ptr<const ScreenChain>> ServeScreenChain(const StateDir& state, const FleetMembership& fleet,
                                                            size_t* n_sealed) {
  if (!fleet.redis) return StateScreenChain(state, n_sealed);
#if FAK_WITH_REDIS
  FAK_ASSIGN_OR_RETURN(std::shared_ptr<FileDenylist> local, FileDenylist::Open((state.dir / "denylist").string()));
  *n_sealed = local->size();
  RedisOptions o = *fleet.redis;
  o.tenant = "fleet";  // one list for every worker; a tenant's erasure is keyed by TenantSealKey already
  FAK_ASSIGN_OR_RETURN(std::shared_ptr<RedisDenylist> shared, RedisDenylist::Open(o));
  for (const auto& [digest, reason] : local->Entries())
    FAK_RETURN_IF_ERROR(shared->Add(digest, reason).WithContext("copying this worker's seals into the fleet's denylist"));
  auto chain = std::make_shared<ScreenChain>(ScreenChain::Default());
  FAK_RETURN_IF_ERROR(chain->set_denylist(std::move(shared)));
  return std::shared_ptr<const ScreenChain>(std::move(chain));
#else
  return Unsupported("--fleet: this build has no Redis support");
#endif
}

// The planner behind the conversation endpoints, seals, screening and erasure: same model,
// tokenizer and chat template as the engine, whose requests its turns are (batched with the OpenAI
// requests; one tree, one budget, one pager); its own journal and key. `chain` screens (its
// denylist is the KV tier's pager's).
Result<std::unique_ptr<Planner>> OpenPlanner(const LoadedModel& m, std::shared_ptr<const ChatTemplate> chat_template,
                                             const StateDir& state,
                                             BlobStore& store, TenantStore tenant_store, std::shared_ptr<const ScreenChain> chain,
                                             Engine& engine) {
  FAK_ASSIGN_OR_RETURN(SigningKey key, StateKey(state));
  PlannerOptions options;
  options.journal_path = (state.dir / "journal.log").string();
  options.chat_template = std::move(chat_template);
  options.chain = std::move(chain);
  options.engine = &engine;
  options.tenant_store = std::move(tenant_store);
  return Planner::Create(*m.model, *m.tokenizer, std::move(key), store, std::move(options));
}

// The directories a rollout may load model files from: --rollout-dir (repeatable), or the served
// model file's own directory; none when the server runs a built-in model and names none.
std::vector<std::filesystem::path> RolloutDirs(const Args& args, const std::string& model_spec) {
  std::vector<std::filesystem::path> dirs;
  std::error_code ec;
  for (const std::string& dir : args.GetAll("rollout-dir")) dirs.push_back(std::filesystem::weakly_canonical(dir, ec));
  if (args.GetAll("rollout-dir").empty() && !IsBuiltinModelSpec(model_spec))
    dirs.push_back(std::filesystem::weakly_canonical(model_spec, ec).parent_path());
  return dirs;
}

// Whether `path` (resolved, symbolic links included) lies inside one of `dirs`.
bool IsInside(const std::string& path, const std::vector<std::filesystem::path>& dirs) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
  if (ec) return false;
  for (const std::filesystem::path& dir : dirs) {
    const auto [d, r] = std::mismatch(dir.begin(), dir.end(), resolved.begin(), resolved.end());
    if (d == dir.end() && r != resolved.end()) return true;
  }
  return false;
}

// What a rollout loads: a built-in MODEL ('embedded:SEED' for other synthetic weights) or a file
// under `dirs`, with its own chat template. A path elsewhere is refused before the file system is
// asked, with one answer whether or not it exists (the endpoint is no oracle for the host's
// files); a shape spec (random weights, no tokenizer) is refused before gigabytes are built.
ModelLoader RolloutLoader(LoadOptions load, std::vector<std::filesystem::path> dirs) {
  return [load, dirs = std::move(dirs)](const std::string& spec) -> Result<LoadedModel> {
    if (ShapeModelConfig(spec))
      return InvalidArgument("model '" + spec + "' has random weights and no tokenizer; a rollout needs a tokenizer");
    if (!IsBuiltinModelSpec(spec) && !IsInside(spec, dirs)) {
      std::string allowed;
      for (const std::filesystem::path& dir : dirs) allowed += (allowed.empty() ? "" : ", ") + dir.string();
      return InvalidArgument("model '" + spec + "': a rollout loads only built-in models and files under " +
                             (allowed.empty() ? std::string("--rollout-dir (none given)") : allowed));
    }
    return LoadModel(spec, load);
  };
}

Result<ServerOptions> ParseServerOptions(const Args& args, const std::string& model_spec) {
  ServerOptions o;
  if (std::optional<std::string> host = args.Get("host")) o.host = *host;
  FAK_ASSIGN_OR_RETURN(uint64_t port, args.GetUint("port", 8080));
  if (port > 65535) return InvalidArgument("--port must be at most 65535");
  o.port = static_cast<uint16_t>(port);
  FAK_ASSIGN_OR_RETURN(o.max_body_bytes, args.GetUint("max-body", o.max_body_bytes));
  FAK_ASSIGN_OR_RETURN(o.kv_budget_bytes, args.GetUint("kv-budget", 0));
  FAK_ASSIGN_OR_RETURN(o.max_conversations, args.GetUint("max-conversations", o.max_conversations));
  FAK_ASSIGN_OR_RETURN(o.max_conversations_per_tenant,
                       args.GetUint("max-conversations-per-tenant", o.max_conversations_per_tenant));
  FAK_ASSIGN_OR_RETURN(o.max_connections, args.GetUint("max-connections", o.max_connections));
  FAK_ASSIGN_OR_RETURN(o.max_connections_per_peer, args.GetUint("max-connections-per-peer", o.max_connections_per_peer));
  for (auto [flag, seconds] : {std::pair{"header-timeout", &o.header_timeout_s}, std::pair{"body-timeout", &o.body_timeout_s},
                               std::pair{"idle-timeout", &o.idle_timeout_s}, std::pair{"drain-timeout", &o.drain_timeout_s}}) {
    FAK_ASSIGN_OR_RETURN(uint64_t value, args.GetUint(flag, *seconds));
    if (value == 0 || value > 86400) return InvalidArgument(std::string("--") + flag + " must be 1 to 86400 seconds");
    *seconds = static_cast<uint32_t>(value);
  }
  if (std::optional<std::string> admin = args.Get("admin-tenant")) o.admin_tenants.push_back(*admin);
  o.model_id = args.Get("model-name").value_or(std::filesystem::path(model_spec).filename().string());
  if (std::optional<std::string> path = args.Get("api-keys")) {
    FAK_ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(*path));
    FAK_ASSIGN_OR_RETURN(o.api_keys, ParseApiKeys(text));
    if (o.api_keys.empty()) return InvalidArgument(*path + " lists no API keys");
  }
  std::vector<std::pair<std::string, std::string>> single_keys;
  if (std::optional<std::string> key = args.Get("api-key")) single_keys.emplace_back("--api-key", *key);
  if (const char* key = std::getenv("FAK_API_KEY"); key != nullptr && *key != '\0') single_keys.emplace_back("FAK_API_KEY", key);
  for (const auto& [where, key] : single_keys) {
    if (key.empty() || key.find_first_of(" \t\r\n") != std::string::npos)
      return InvalidArgument(where + ": an API key is one word, not empty");
    const auto [it, added] = o.api_keys.emplace(key, std::string(kDefaultTenant));
    if (!added && it->second != kDefaultTenant)
      return InvalidArgument(where + ": the key is already listed for tenant '" + it->second + "'");
  }
  o.cors_origins = args.GetAll("cors-origin");
  for (const std::string& origin : o.cors_origins)
    if (origin.empty() || origin.find_first_of(" \t\r\n,") != std::string::npos)
      return InvalidArgument("--cors-origin '" + origin + "': one origin (scheme://host[:port]) or *");
  return o;
}

}  // namespace

int ServeCommand(std::span<char* const> argv) {
  const Args::Spec spec{{"model", "host", "port", "threads", "kv-dtype", "kv-budget", "api-keys", "api-key", "cors-origin", "max-body", "max-running",
                         "max-queued", "max-queued-per-tenant", "model-name", "template", "state", "store", "redis",
                         "max-conversations", "max-conversations-per-tenant", "admin-tenant", "kv-tier-dir", "kv-tier-redis",
                         "kv-tier-max-bytes", "kv-tier-max-bytes-per-tenant", "kv-tier-ttl", "rollout-dir", "header-timeout", "body-timeout",
                         "idle-timeout", "max-connections", "max-connections-per-peer", "drain-timeout", "fleet", "worker-id",
                         "speculate", "draft-model"},
                        {},
                        {{"-m", "model"}}};
  const std::string usage(kServeUsage);
  Result<Args> args = Args::Parse(argv, spec);
  if (!args) return UsageError("serve", args.error().message(), usage);
  if (args->help()) return ShowHelp(usage + "\n" + kModelHelp);
  Result<std::string> model_spec = ModelArgument(*args);
  if (!model_spec) return UsageError("serve", model_spec.error().message(), usage + kModelHelp);
  Result<ServerOptions> options = ParseServerOptions(*args, *model_spec);
  Result<LoadOptions> load = ServingLoadOptions(*args);
  Result<uint64_t> max_running = args->GetUint("max-running", 16);
  Result<uint64_t> max_queued = args->GetUint("max-queued", 256);
  Result<uint64_t> max_queued_per_tenant = args->GetUint("max-queued-per-tenant", 64);
  for (const Status& s : {options.error(), load.error(), max_running.error(), max_queued.error(),
                          max_queued_per_tenant.error()})
    if (!s.ok()) return UsageError("serve", s.message(), usage);

  BlockStopSignals();
  Result<LoadedModel> m = LoadModel(*model_spec, *load);
  if (!m) return Fail("serve", m.error());
  if (!m->tokenizer) return Fail("serve", Unsupported(m->label + " has no tokenizer; it serves `fak bench` and `fak inspect`"));
  Result<std::shared_ptr<const ChatTemplate>> chat_template = ChatTemplateFor(*args, *m);
  if (!chat_template) return Fail("serve", chat_template.error());

  StateDir state;
  if (Status s = OpenStateDir(args->Get("state"), "serve", &state); !s.ok()) return Fail("serve", s);
  Result<FleetMembership> fleet = JoinFleet(*args);
  if (!fleet) return Fail("serve", fleet.error());
  Result<TenantStore> tenant_store = OpenTextStores(*args, state);
  if (!tenant_store) return Fail("serve", tenant_store.error());
  // Every tenant's texts are in its own store; this one stays empty.
  const std::unique_ptr<BlobStore> no_texts = MakeMemoryBlobStore();
  // The planner's screens; made first so the KV tier's pager asks the planner's denylist (a
  // quarantined text's KV is never paged in) and the planner can page in from the tier.
  size_t n_sealed = 0;
  Result<std::shared_ptr<const ScreenChain>> chain = ServeScreenChain(state, *fleet, &n_sealed);
  if (!chain) return Fail("serve", chain.error());
  // Before the planner and the engine, so it outlives both (and every engine a rollout makes with
  // the same options).
  Result<std::unique_ptr<KVTier>> kv_tier = OpenKVTier(*args, (*chain)->denylist(), fleet->redis);
  if (!kv_tier) return Fail("serve", kv_tier.error());
  EngineOptions engine_options;
  engine_options.max_running = *max_running;
  engine_options.max_queued = *max_queued;
  engine_options.max_queued_per_tenant = *max_queued_per_tenant;
  engine_options.step_token_budget = std::max<size_t>(engine_options.step_token_budget, *max_running);
  engine_options.kv_budget_bytes = options->kv_budget_bytes;
  engine_options.chat_template = *chat_template;
  if (*kv_tier) {
    engine_options.tree_options.access = (*kv_tier)->access;
    engine_options.tree_options.spill = kv_tier->get();
    engine_options.pager = (*kv_tier)->pager.get();
    // In a fleet each prefix goes to the shared tier as it is made, not only when it is evicted:
    // the next turn may be routed to another worker.
    engine_options.tree_options.write_through = fleet->redis.has_value();
  }
  if (std::optional<std::string> mode = args->Get("speculate")) {
    Result<SpeculationOptions> speculation = ParseSpeculation(*mode);
    if (!speculation) return UsageError("serve", speculation.error().message(), usage);
    engine_options.speculation = std::move(*speculation);
  }
  if (std::optional<std::string> draft = args->Get("draft-model")) {
    if (engine_options.speculation.source != DraftSource::kNone)
      return UsageError("serve", "give --speculate or --draft-model, not both", usage);
    Result<LoadedModel> draft_model = LoadModel(*draft, *load);
    if (!draft_model) return Fail("serve", draft_model.error().WithContext("--draft-model"));
    engine_options.speculation.source = DraftSource::kModel;
    engine_options.speculation.draft_model = std::move(draft_model->model);
  }
  Result<std::unique_ptr<Engine>> engine = Engine::Create(*m->model, *m->tokenizer, engine_options);
  if (!engine) return Fail("serve", engine.error());
  Result<std::unique_ptr<Planner>> planner =
      OpenPlanner(*m, *chat_template, state, *no_texts, std::move(*tenant_store), *chain, **engine);
  if (!planner) return Fail("serve", planner.error());
  if (*kv_tier) options->kv_tiers.push_back((*kv_tier)->store.get());
  options->planner = planner->get();
  options->fleet = fleet->link_or_null();
  options->load_model = RolloutLoader(*load, RolloutDirs(*args, *model_spec));
  options->rollout_engine = engine_options;
  // The draft model drafts for this model's vocabulary only.
  if (engine_options.speculation.source == DraftSource::kModel) options->rollout_engine.speculation = {};
  Result<std::unique_ptr<Server>> server = Server::Create(**engine, *m->model, *m->tokenizer, *options);
  if (!server) return Fail("serve", server.error());
  Result<uint16_t> port = (*server)->Bind();
  if (!port) return Fail("serve", port.error());

  // A client that vanishes mid-write must fail that write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  StopOnSignals signals(**server);
  std::fprintf(stderr, "fak serve: %s, chat template %s; model id '%s'\n", m->label.c_str(),
               std::string((*chat_template)->variant()).c_str(), options->model_id.c_str());
  std::fprintf(stderr, "fak serve: state in %s%s; certificate issuer key %s; %zu sealed texts\n", state.dir.c_str(),
               state.temporary ? " (temporary)" : "", (*planner)->public_key().Hex().c_str(), n_sealed);
  if (FleetLink* link = fleet->link_or_null())
    std::fprintf(stderr, "fak serve: fleet worker '%s'; seals, texts and KV shared through Redis\n", link->worker_id().c_str());
  std::fprintf(stderr, "fak serve: listening on http://%s:%u\n", options->host.c_str(), unsigned{*port});
  std::fflush(stderr);
  const Status served = (*server)->Serve();
  // Serve returns after Stop, or when the listener could not start (then drain what there is).
  const bool drained = (*server)->Stop();
  const bool forced = signals.Finish();
  server->reset();  // waits for the threads that wait on requests
  (*engine)->Shutdown(forced ? ShutdownMode::kCancel : ShutdownMode::kDrain);
  if (!drained) std::fprintf(stderr, "fak serve: requests still running were cancelled (%s)\n",
                             forced ? "second signal" : "--drain-timeout");
  if (*kv_tier) {
    // A restart with the same tier pages these back in instead of prefilling them.
    // One tree holds both paths' contexts (no turn runs now: the server is gone).
    std::fprintf(stderr, "fak serve: KV tier: %s\n", (*kv_tier)->Checkpoint((*engine)->tree()).c_str());
  }
  if (!served.ok()) return Fail("serve", served);
  if (forced) {
    std::fprintf(stderr, "fak serve: stopped by a second signal\n");
    return kExitFailure;
  }
  std::fprintf(stderr, "fak serve: stopped\n");
  return kExitOk;
}

}  // namespace fak::cli
