// SafetensorsFile: 8-byte header length, JSON header (src/core/json.h, exceptions contained),
// byte buffer; every entry checked against the buffer before a view is handed out.
#include "fak/io/safetensors.h"

#include <algorithm>
#include <cstring>

#include "fak/core/env.h"
#include "src/core/json.h"

namespace fak {
namespace {

using json = internal::Json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference reader's limit

struct DtypeRow {
  SafetensorsDtype dtype;
  std::string_view name;
  size_t size;
};
constexpr DtypeRow kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},    {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},        {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1}, {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},      {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},    {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},      {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},      {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
};

// Reads a non-negative integer JSON value.
bool AsUint(const json& v, uint64_t& out) {
  if (!v.is_number_unsigned()) return false;
  out = v.get<uint64_t>();
  return true;
}

// Validates one header entry and fills `t`; `buffer` is the byte buffer after the header.
Status ParseEntry(const std::string& key, const json& v, std::span<const uint8_t> buffer, SafetensorsTensor& t,
                  uint64_t& begin) {
  auto bad = [&](std::string what) { return Corruption("tensor '" + key + "': " + what); };
  if (!v.is_object()) return bad("entry is not an object");
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) return bad("missing string 'dtype'");
  const std::string& dname = dt->get_ref<const std::string&>();
  auto row = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeRow& r) { return r.name == dname; });
  if (row == std::end(kDtypes)) return Unsupported("tensor '" + key + "': dtype '" + dname + "'");
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) return bad("missing array 'shape'");
  uint64_t n = 1;
  for (const json& d : *shape) {
    uint64_t dim;
    if (!AsUint(d, dim) || dim > static_cast<uint64_t>(INT64_MAX)) return bad("shape entry is not a non-negative integer");
    if (__builtin_mul_overflow(n, dim, &n)) return bad("element count overflows");
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  auto offs = v.find("data_offsets");
  uint64_t end = 0;
  if (offs == v.end() || !offs->is_array() || offs->size() != 2 || !AsUint((*offs)[0], begin) ||
      !AsUint((*offs)[1], end) || begin > end) {
    return bad("'data_offsets' must be [BEGIN, END] with BEGIN <= END");
  }
  if (end > buffer.size()) {
    return bad("data_offsets end " + std::to_string(end) + " is past the buffer (" + std::to_string(buffer.size()) + " bytes)");
  }
  uint64_t want = 0;
  if (__builtin_mul_overflow(n, row->size, &want) || want != end - begin) {
    return bad("data_offsets span " + std::to_string(end - begin) + " bytes, shape and dtype need " + std::to_string(want));
  }
  t.name = key;
  t.dtype = row->dtype;
  t.data = buffer.data() + begin;
  t.size_bytes = want;
  return Status::Ok();
}

// Tensors sorted by offset must tile the buffer from 0 with no gap or overlap (the reference rule).
Status CheckTiling(std::vector<std::pair<uint64_t, const SafetensorsTensor*>> spans, uint64_t buffer_size) {
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t at = 0;
  for (const auto& [begin, t] : spans) {
    if (begin != at) {
      return Corruption("tensor '" + t->name + "' starts at buffer offset " + std::to_string(begin) + ", expected " +
                        std::to_string(at) + " (gap or overlap)");
    }
    at = begin + t->size_bytes;
  }
  if (at != buffer_size) {
    return Corruption("tensors end at buffer offset " + std::to_string(at) + " but the buffer has " +
                      std::to_string(buffer_size) + " bytes");
  }
  return Status::Ok();
}

Status ParseHeader(std::span<const uint8_t> bytes, std::vector<SafetensorsTensor>& tensors,
                   std::map<std::string, std::string>& metadata) {
  if (bytes.size() < 8) return Corruption("offset 0: truncated reading header length (file has " + std::to_string(bytes.size()) + " bytes)");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return Corruption("offset 0: header length " + std::to_string(n) + " exceeds the file or the 100 MB limit");
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  FAK_ASSIGN_OR_RETURN(json header, internal::ParseJsonObject(std::string_view(text, n), "offset 8: header",
                                                              StatusCode::kCorruption));
  std::span<const uint8_t> buffer = bytes.subspan(8 + n);
  std::vector<std::pair<uint64_t, size_t>> begins;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Corruption("'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return Corruption("'__metadata__." + m.key() + "' is not a string");
        metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    SafetensorsTensor t;
    uint64_t begin = 0;
    FAK_RETURN_IF_ERROR(ParseEntry(it.key(), *it, buffer, t, begin));
    begins.push_back({begin, tensors.size()});
    tensors.push_back(std::move(t));
  }
  std::vector<std::pair<uint64_t, const SafetensorsTensor*>> spans;
  for (const auto& [begin, i] : begins) spans.push_back({begin, &tensors[i]});
  return CheckTiling(std::move(spans), buffer.size());
}

}  // namespace

struct SafetensorsFile::Mapping {
  std::unique_ptr<ReadOnlyMapping> file;
};

SafetensorsFile::SafetensorsFile() = default;
SafetensorsFile::~SafetensorsFile() = default;

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const DtypeRow& r : kDtypes) {
    if (r.dtype == dtype) return r.name;
  }
  return "?";
}

size_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const DtypeRow& r : kDtypes) {
    if (r.dtype == dtype) return r.size;
  }
  return 0;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = std::move(name);
  // nlohmann may still throw (e.g. bad_alloc); nothing escapes the API.
  Status s = internal::ContainJsonExceptions(StatusCode::kCorruption, "header",
                                             [&] { return ParseHeader(bytes, file->tensors_, file->metadata_); });
  if (!s.ok()) return s.WithContext(file->name_);
  std::sort(file->tensors_.begin(), file->tensors_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<ReadOnlyMapping> mapped, Env::Default()->MapReadOnly(path));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, Parse(mapped->bytes(), path));
  file->mapping_ = std::make_unique<Mapping>(Mapping{std::move(mapped)});
  return file;
}

const SafetensorsTensor* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
}

}  // namespace fak
