// `fak inspect`: what a model is — its configuration and cache cost, a GGUF file's metadata,
// tensors and tokenizer, or a safetensors file's tensors.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "fak/io/gguf.h"
#include "fak/kernels/kernel_tier.h"
#include "fak/io/safetensors.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kInspectUsage =
    "usage: fak inspect MODEL [--no-tensors] [--digest] [--json]\n"
    "\n"
    "For a named model: its configuration, weight bytes, tokenizer and KV cache cost per token.\n"
    "For a GGUF file: version, every metadata key (long arrays summarised), every tensor (type,\n"
    "shape, bytes) and the tokenizer it describes. For a .safetensors file: its __metadata__ and\n"
    "every tensor (dtype, shape, bytes).\n"
    "\n"
    "options:\n"
    "  --no-tensors           skip the tensor table (model files)\n"
    "  --digest               also compute the weights digest, the cache binding's ModelID (one pass\n"
    "                         over the weights)\n"
    "  --json                 print one JSON object with the same facts (metadata values as the text\n"
    "                         shows them: long arrays summarised)\n";

using Json = nlohmann::ordered_json;

void PrintJson(const Json& j) { WriteJsonLine(j.dump(-1, ' ', false, Json::error_handler_t::replace)); }

void Row(const char* key, const std::string& value) { std::printf("  %-22s %s\n", key, value.c_str()); }

// K, Kraw and V in the model's KV dtype (the serving default, FAK_KV_DTYPE when set), plus the position and token id of each slot.
size_t KVBytesPerToken(const Model& model) {
  const ModelConfig& c = model.config();
  return c.n_layers * c.n_kv_heads * c.head_dim * 3 * KVDtypeBytes(model.kv_dtype()) + 2 * sizeof(int32_t);
}

int InspectNamedJson(const LoadedModel& m, bool digest) {
  const ModelConfig& c = m.model->config();
  Json j = {{"kind", "model"},
            {"name", m.label},
            {"architecture", ArchitectureName(c.architecture)},
            {"shape", c.Describe()},
            {"context_length", c.context_length},
            {"rope_base", c.rope_base},
            {"rope_pairing", c.rope_pairing == RopePairing::kAdjacent ? "adjacent" : "split_halves"},
            {"tied_embeddings", c.tied_embeddings},
            {"weights_bytes", m.model->weights_bytes()}};
  if (digest) j["weights_sha256"] = m.model->WeightsDigest().Hex();
  j["kv_bytes_per_token"] = KVBytesPerToken(*m.model);
  j["kv_dtype"] = std::string(KVDtypeName(m.model->kv_dtype()));
  if (m.tokenizer) {
    j["tokenizer"] = {{"kind", std::string(m.tokenizer->kind())}, {"vocab_size", m.tokenizer->vocab_size()},
                      {"bos_id", m.tokenizer->bos_id()}, {"eos_id", m.tokenizer->eos_id()}, {"id", m.tokenizer->id().Hex()}};
  } else {
    j["tokenizer"] = nullptr;
  }
  j["kernel_tier"] = std::string(ActiveKernelTier());
  PrintJson(j);
  return kExitOk;
}

int InspectNamed(const LoadedModel& m, bool digest) {
  const ModelConfig& c = m.model->config();
  std::printf("model %s\n", m.label.c_str());
  Row("architecture", ArchitectureName(c.architecture));
  Row("shape", c.Describe());
  Row("context length", std::to_string(c.context_length));
  char base[32];
  std::snprintf(base, sizeof(base), "%g", c.rope_base);
  Row("rope", "base " + std::string(base) + (c.rope_pairing == RopePairing::kAdjacent ? ", adjacent pairs" : ", split halves"));
  Row("tied embeddings", c.tied_embeddings ? "yes" : "no");
  Row("weights", std::to_string(m.model->weights_bytes()) + " bytes");
  if (digest) Row("weights sha256", m.model->WeightsDigest().Hex());
  Row("kv cache", std::to_string(KVBytesPerToken(*m.model)) + " bytes/token (K + Kraw + V, " +
                      std::string(KVDtypeName(m.model->kv_dtype())) + ")");
  if (m.tokenizer) {
    Row("tokenizer", std::string(m.tokenizer->kind()) + ", " + std::to_string(m.tokenizer->vocab_size()) + " ids, bos " +
                         std::to_string(m.tokenizer->bos_id()) + ", eos " + std::to_string(m.tokenizer->eos_id()));
    Row("tokenizer id", m.tokenizer->id().Hex());
  } else {
    Row("tokenizer", "none (shape-only model)");
  }
  Row("kernel tier", std::string(ActiveKernelTier()));
  return kExitOk;
}

// One metadata value on one line: scalars as text, strings quoted and cut, arrays summarised.
std::string ValueText(const GgufValue& v) {
  constexpr size_t kMaxChars = 80;
  if (v.is_array()) {
    std::string text = "[";  // built with += : GCC 12 -Wrestrict misfires on "literal" + std::string
    text += GgufTypeName(v.array_type());
    text += " x ";
    text += std::to_string(v.array_size());
    text += "]";
    if (v.array_type() != GgufType::kArray && v.array_type() != GgufType::kString && v.array_size() <= 8) {
      text += " ";
      for (size_t i = 0; i < v.array_size(); ++i) {
        Result<GgufValue> e = v.At(i);
        text += (i ? ", " : "") + (e ? ValueText(*e) : std::string("?"));
      }
    }
    return text;
  }
  if (v.type() == GgufType::kString) {
    Result<std::string_view> s = v.ToString();
    if (!s) return "?";
    std::string text(s->substr(0, kMaxChars));
    for (char& ch : text)
      if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
    return "\"" + text + (s->size() > kMaxChars ? "…\" (" + std::to_string(s->size()) + " bytes)" : "\"");
  }
  if (v.type() == GgufType::kBool) {
    Result<bool> b = v.ToBool();
    return b ? (*b ? "true" : "false") : "?";
  }
  if (v.type() == GgufType::kFloat32 || v.type() == GgufType::kFloat64) {
    Result<double> d = v.ToDouble();
    if (!d) return "?";
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", *d);
    return text;
  }
  Result<int64_t> i = v.ToInt64();
  if (i) return std::to_string(*i);
  Result<uint64_t> u = v.ToUint64();
  return u ? std::to_string(*u) : "?";
}

std::string ShapeText(const std::vector<int64_t>& ne) {
  std::string text = "[";
  for (size_t i = 0; i < ne.size(); ++i) text += (i ? ", " : "") + std::to_string(ne[i]);
  return text + "]";
}

int InspectGgufJson(const std::string& path, bool tensors) {
  Result<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file) return Fail("inspect", file.error());
  const GgufFile& f = **file;
  Json j = {{"kind", "gguf"}, {"path", path}, {"version", f.version()}, {"file_size", f.file_size()},
            {"alignment", f.alignment()}, {"data_offset", f.data_offset()}};
  Result<std::unique_ptr<Tokenizer>> tok = LoadTokenizerFromGguf(f);
  j["tokenizer"] = tok ? Json{{"kind", std::string((*tok)->kind())}, {"vocab_size", (*tok)->vocab_size()}, {"id", (*tok)->id().Hex()}}
                       : Json{{"error", tok.error().ToString()}};
  Json metadata = Json::object();
  for (const GgufKeyValue& kv : f.metadata()) metadata[std::string(kv.key)] = ValueText(kv.value);
  j["metadata"] = std::move(metadata);
  if (tensors) {
    Json list = Json::array();
    for (const GgufTensorInfo& t : f.tensors()) {
      Result<GgmlTypeInfo> type = LookupGgmlType(static_cast<uint32_t>(t.type));
      list.push_back({{"name", std::string(t.name)}, {"type", type ? std::string(type->name) : "?"}, {"shape", t.ne},
                      {"bytes", t.size_bytes}});
    }
    j["tensors"] = std::move(list);
  }
  PrintJson(j);
  return kExitOk;
}

int InspectGguf(const std::string& path, bool tensors) {
  Result<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file) return Fail("inspect", file.error());
  const GgufFile& f = **file;
  std::printf("gguf %s\n", path.c_str());
  Row("version", std::to_string(f.version()));
  Row("file size", std::to_string(f.file_size()) + " bytes");
  Row("alignment", std::to_string(f.alignment()));
  Row("tensors", std::to_string(f.tensors().size()) + ", data at offset " + std::to_string(f.data_offset()));
  Result<std::unique_ptr<Tokenizer>> tok = LoadTokenizerFromGguf(f);
  Row("tokenizer", tok ? std::string((*tok)->kind()) + ", " + std::to_string((*tok)->vocab_size()) + " ids, id " + (*tok)->id().Hex()
                       : "not loadable: " + tok.error().ToString());
  std::printf("\nmetadata (%zu keys)\n", f.metadata().size());
  for (const GgufKeyValue& kv : f.metadata())
    std::printf("  %-40.*s %s\n", int(kv.key.size()), kv.key.data(), ValueText(kv.value).c_str());
  if (!tensors) return kExitOk;
  std::printf("\ntensors\n");
  uint64_t total_bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    Result<GgmlTypeInfo> type = LookupGgmlType(static_cast<uint32_t>(t.type));
    std::printf("  %-40.*s %-6s %-22s %12llu bytes\n", int(t.name.size()), t.name.data(),
                type ? std::string(type->name).c_str() : "?", ShapeText(t.ne).c_str(),
                static_cast<unsigned long long>(t.size_bytes));
    total_bytes += t.size_bytes;
  }
  std::printf("  %zu tensors, %llu bytes\n", f.tensors().size(), static_cast<unsigned long long>(total_bytes));
  return kExitOk;
}

int InspectSafetensorsJson(const std::string& path, bool tensors) {
  Result<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  if (!file) return Fail("inspect", file.error());
  const SafetensorsFile& f = **file;
  Json j = {{"kind", "safetensors"}, {"path", path}};
  Json metadata = Json::object();
  for (const auto& [key, value] : f.metadata()) metadata[key] = value;
  j["metadata"] = std::move(metadata);
  if (tensors) {
    Json list = Json::array();
    for (const SafetensorsTensor& t : f.tensors())
      list.push_back({{"name", t.name}, {"dtype", std::string(SafetensorsDtypeName(t.dtype))}, {"shape", t.shape},
                      {"bytes", t.size_bytes}});
    j["tensors"] = std::move(list);
  }
  PrintJson(j);
  return kExitOk;
}

int InspectSafetensors(const std::string& path, bool tensors) {
  Result<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  if (!file) return Fail("inspect", file.error());
  const SafetensorsFile& f = **file;
  uint64_t total_bytes = 0;
  for (const SafetensorsTensor& t : f.tensors()) total_bytes += t.size_bytes;
  std::printf("safetensors %s\n", path.c_str());
  Row("tensors", std::to_string(f.tensors().size()) + ", " + std::to_string(total_bytes) + " bytes");
  std::printf("\nmetadata (%zu keys)\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) std::printf("  %-40s %s\n", key.c_str(), value.substr(0, 80).c_str());
  if (!tensors) return kExitOk;
  std::printf("\ntensors\n");
  for (const SafetensorsTensor& t : f.tensors())
    std::printf("  %-40s %-6s %-22s %12llu bytes\n", t.name.c_str(), std::string(SafetensorsDtypeName(t.dtype)).c_str(),
                ShapeText(t.shape).c_str(), static_cast<unsigned long long>(t.size_bytes));
  return kExitOk;
}

}  // namespace

int InspectCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{}, {"no-tensors", "digest", "json"}});
  if (!args) return UsageError("inspect", args.error().message(), kInspectUsage);
  if (args->help()) return ShowHelp(std::string(kInspectUsage) + "\n" + kModelHelp);
  if (args->positional().size() != 1) return UsageError("inspect", "expected one MODEL", std::string(kInspectUsage) + kModelHelp);
  const std::string& spec = args->positional()[0];
  const bool json = args->Has("json");
  if (IsBuiltinModelSpec(spec)) {
    Result<LoadOptions> load = ServingLoadOptions(*args);  // the KV dtype `fak serve` would give it
    if (!load) return Fail("inspect", load.error());
    Result<LoadedModel> m = LoadModel(spec, *load);
    if (!m) return Fail("inspect", m.error());
    return json ? InspectNamedJson(*m, args->Has("digest")) : InspectNamed(*m, args->Has("digest"));
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(spec, ec)) return Fail("inspect", NotFound("no model named '" + spec + "' and no such file"));
  const bool tensors = !args->Has("no-tensors");
  if (std::filesystem::path(spec).extension() == ".safetensors")
    return json ? InspectSafetensorsJson(spec, tensors) : InspectSafetensors(spec, tensors);
  return json ? InspectGgufJson(spec, tensors) : InspectGguf(spec, tensors);
}

}  // namespace fak::cli
