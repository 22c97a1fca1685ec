// fak_logits_dump: the fak side of the llama.cpp oracle (bench/llama_cpp_oracle/, docs/llama-cpp-oracle.md).
//
//   fak_logits_dump logits MODEL IDS_FILE OUT_FILE [--threads N] [--max-context N]
//       Prefills the token ids of IDS_FILE (whitespace-separated) as one batch with all-position
//       logits and writes them to OUT_FILE as raw little-endian f32, [n_tokens][vocab].
//   fak_logits_dump tokenize GGUF TEXTS_FILE
//       Encodes each text of TEXTS_FILE (texts separated by "\n__ggml_vocab_test__\n", the
//       llama.cpp vocab-test format) with the file's tokenizer, no BOS; prints one line of ids each.
//   fak_logits_dump bench MODEL [--pp 128,512] [--tg 64] [--depth 0,4096] [--reps 3] [--warmup 1] [--threads N]
//       Prompt processing (one batch of N ids into an empty cache, last-token logits) and
//       generation (N single-token decodes after an untimed prefill of D ids, for each D of --depth)
//       tokens/s, median of --reps runs after --warmup uncounted ones; prints "ppN <tok/s>" /
//       "tgN <tok/s>" / "tgN@dD <tok/s>" lines (llama-bench's pp/tg and its -d).
//   fak_logits_dump probe [--threads N] [--reps 3]
//       The read-bandwidth probe (bench/probes.h: a 1 GiB array summed by N threads), median GB/s;
//       prints "read_gbs <GB/s>", the roofline the oracle quotes decode against in the same run.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench/probes.h"
#include "fak/kernels/kernel_tier.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kUsage =
    "usage: fak_logits_dump logits MODEL IDS_FILE OUT_FILE [--threads N] [--max-context N]\n"
    "       fak_logits_dump tokenize GGUF TEXTS_FILE\n"
    "       fak_logits_dump bench MODEL [--pp 128,512] [--tg 64] [--depth 0] [--reps 3] [--warmup 1] [--threads N]\n"
    "       fak_logits_dump probe [--threads N] [--reps 3]\n";

struct Flags {
  std::vector<std::string> positional;
  size_t threads = 0, max_context = 0, tg = 64;
  int reps = 3, warmup = 1;
  std::vector<size_t> pp = {128, 512};
  std::vector<size_t> depth = {0};
};

Result<size_t> ParseCount(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0') return InvalidArgument(std::string(flag) + ": not a number: '" + text + "'");
  return static_cast<size_t>(v);
}

Result<std::vector<size_t>> ParseList(std::string_view flag, const std::string& text) {
  std::vector<size_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    FAK_ASSIGN_OR_RETURN(size_t v, ParseCount(flag, item));
    out.push_back(v);
  }
  return out;
}

Result<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      f.positional.push_back(arg);
      continue;
    }
    if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--threads") {
      FAK_ASSIGN_OR_RETURN(f.threads, ParseCount(arg, value));
    } else if (arg == "--max-context") {
      FAK_ASSIGN_OR_RETURN(f.max_context, ParseCount(arg, value));
    } else if (arg == "--tg") {
      FAK_ASSIGN_OR_RETURN(f.tg, ParseCount(arg, value));
    } else if (arg == "--reps") {
      FAK_ASSIGN_OR_RETURN(size_t reps, ParseCount(arg, value));
      f.reps = static_cast<int>(std::max<size_t>(1, reps));
    } else if (arg == "--warmup") {
      FAK_ASSIGN_OR_RETURN(size_t warmup, ParseCount(arg, value));
      f.warmup = static_cast<int>(warmup);
    } else if (arg == "--pp") {
      FAK_ASSIGN_OR_RETURN(f.pp, ParseList(arg, value));
    } else if (arg == "--depth") {
      FAK_ASSIGN_OR_RETURN(f.depth, ParseList(arg, value));
    } else {
      return InvalidArgument("unknown flag " + arg);
    }
  }
  return f;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IOError("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Result<std::vector<int32_t>> ReadIds(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::istringstream in(text);
  std::vector<int32_t> ids;
  for (long long id; in >> id;) ids.push_back(static_cast<int32_t>(id));
  if (!in.eof()) return InvalidArgument(path + ": not a list of integer token ids (at id " + std::to_string(ids.size()) + ")");
  if (ids.empty()) return InvalidArgument(path + ": no token ids");
  return ids;
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const Flags& f) {
  ModelOptions opt;
  opt.n_threads = f.threads;
  opt.max_context = f.max_context;
  auto model = Model::Load(path, opt);
  if (!model) return model.error().WithContext("loading " + path);
  return std::move(*model);
}

Status DumpLogits(const Flags& f) {
  if (f.positional.size() != 3) return InvalidArgument("logits: expected MODEL IDS_FILE OUT_FILE");
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(f.positional[0], f));
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ReadIds(f.positional[1]));
  KVCache cache = model->NewCache();
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model->Prefill(&cache, ids, LogitsMode::kAll));
  std::ofstream out(f.positional[2], std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!out) return IOError("cannot write " + f.positional[2]);
  std::printf("%zu %zu %s\n", ids.size(), model->config().vocab_size, std::string(ActiveKernelTier()).c_str());
  return Status::Ok();
}

Status Tokenize(const Flags& f) {
  if (f.positional.size() != 2) return InvalidArgument("tokenize: expected GGUF TEXTS_FILE");
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizerFromGguf(f.positional[0]));
  FAK_ASSIGN_OR_RETURN(std::string all, ReadFile(f.positional[1]));
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0, next; (next = all.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok->Encode(std::string_view(all).substr(pos, next - pos)));
    std::string line;
    for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
    std::printf("%s\n", line.c_str());
  }
  return Status::Ok();
}

std::vector<int32_t> BenchIds(size_t n, size_t vocab) {
  std::vector<int32_t> ids(n);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int32_t& id : ids) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = static_cast<int32_t>(x % vocab);
  }
  return ids;
}

// Seconds of one run: prefill `ids` (decode = false) or decode them one by one (decode = true)
// after an untimed prefill of `context`.
Result<double> TimeOnce(const Model& model, const std::vector<int32_t>& context, const std::vector<int32_t>& ids,
                        bool decode) {
  KVCache cache = model.NewCache();
  if (!context.empty()) FAK_RETURN_IF_ERROR(model.Prefill(&cache, context, LogitsMode::kLast).error());
  const Clock::time_point start = Clock::now();
  if (decode) {
    for (int32_t id : ids) FAK_RETURN_IF_ERROR(model.Decode(&cache, id).error());
  } else {
    FAK_RETURN_IF_ERROR(model.Prefill(&cache, ids, LogitsMode::kLast).error());
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Status Bench(const Flags& f) {
  if (f.positional.size() != 1) return InvalidArgument("bench: expected MODEL");
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(f.positional[0], f));
  struct Case {
    bool decode;
    size_t n, depth;
  };
  std::vector<Case> cases;
  for (size_t n : f.pp) cases.push_back({false, n, 0});
  if (f.tg > 0)
    for (size_t d : f.depth) cases.push_back({true, f.tg, d});
  const size_t vocab = model->config().vocab_size;
  for (const Case& c : cases) {
    // The depth's ids are a longer run of the same sequence, so the decoded ids follow them.
    std::vector<int32_t> context = BenchIds(c.depth + c.n, vocab);
    const std::vector<int32_t> ids(context.begin() + static_cast<std::ptrdiff_t>(c.depth), context.end());
    context.resize(c.depth);
    std::vector<double> rates;
    for (int r = 0; r < f.warmup + f.reps; ++r) {  // the first --warmup runs are not counted
      FAK_ASSIGN_OR_RETURN(double s, TimeOnce(*model, context, ids, c.decode));
      if (r >= f.warmup) rates.push_back(static_cast<double>(c.n) / s);
    }
    const std::string name = (c.decode ? "tg" : "pp") + std::to_string(c.n);
    std::printf("%s %.3f\n", (c.depth > 0 ? name + "@d" + std::to_string(c.depth) : name).c_str(), Median(rates));
    std::fflush(stdout);
  }
  return Status::Ok();
}

Status Probe(const Flags& f) {
  if (!f.positional.empty()) return InvalidArgument("probe: takes no MODEL");
  std::unique_ptr<internal::ThreadPool> pool;  // --threads 0 (the default): one per hardware thread, as a model
  if (f.threads != 1) pool = std::make_unique<internal::ThreadPool>(f.threads);
  std::printf("read_gbs %.3f\n", ProbeReadBandwidth(pool.get(), f.reps));
  return Status::Ok();
}

Status Run(int argc, char** argv) {
  if (argc < 2) return InvalidArgument("missing mode");
  const std::string mode = argv[1];
  FAK_ASSIGN_OR_RETURN(Flags f, ParseFlags(argc, argv));
  if (mode == "logits") return DumpLogits(f);
  if (mode == "tokenize") return Tokenize(f);
  if (mode == "bench") return Bench(f);
  if (mode == "probe") return Probe(f);
  return InvalidArgument("unknown mode '" + mode + "'");
}

}  // namespace
}  // namespace fak::bench

int main(int argc, char** argv) {
  const fak::Status s = fak::bench::Run(argc, argv);
  if (s.ok()) return 0;
  std::fprintf(stderr, "fak_logits_dump: %s\n%s", s.ToString().c_str(), std::string(fak::bench::kUsage).c_str());
  return s.code() == fak::StatusCode::kInvalidArgument ? 2 : 1;
}
