// GgufFile: the memory mapping behind a parsed GGUF file and its typed metadata getters.
#include <string>

#include "fak/io/gguf.h"
#include "fak/core/env.h"

namespace fak {

struct GgufFile::Mapping {
  std::unique_ptr<ReadOnlyMapping> file;
};

GgufFile::GgufFile() = default;
GgufFile::~GgufFile() = default;

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<ReadOnlyMapping> mapped, Env::Default()->MapReadOnly(path));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, Parse(mapped->bytes(), path));
  file->mapping_ = std::make_unique<Mapping>(Mapping{std::move(mapped)});
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const GgufKeyValue& kv : kvs_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

template <class T, class F>
Result<T> GgufFile::Get(std::string_view key, F convert) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return NotFound(name_ + ": metadata '" + std::string(key) + "' is absent");
  auto r = convert(*v);
  if (!r) return r.error().WithContext(name_ + ": metadata '" + std::string(key) + "'");
  return std::move(*r);
}

Result<uint64_t> GgufFile::GetUint64(std::string_view key) const {
  return Get<uint64_t>(key, [](const GgufValue& v) { return v.ToUint64(); });
}
Result<int64_t> GgufFile::GetInt64(std::string_view key) const {
  return Get<int64_t>(key, [](const GgufValue& v) { return v.ToInt64(); });
}
Result<double> GgufFile::GetDouble(std::string_view key) const {
  return Get<double>(key, [](const GgufValue& v) { return v.ToDouble(); });
}
Result<bool> GgufFile::GetBool(std::string_view key) const {
  return Get<bool>(key, [](const GgufValue& v) { return v.ToBool(); });
}
Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  return Get<std::string_view>(key, [](const GgufValue& v) { return v.ToString(); });
}
Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  return Get<std::vector<std::string_view>>(key, [](const GgufValue& v) { return v.ToStringArray(); });
}
Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  return Get<std::vector<float>>(key, [](const GgufValue& v) { return v.ToFloatArray(); });
}
Result<std::vector<int64_t>> GgufFile::GetInt64Array(std::string_view key) const {
  return Get<std::vector<int64_t>>(key, [](const GgufValue& v) { return v.ToInt64Array(); });
}

}  // namespace fak
