// GGUF: read-only access to a GGUF v2/v3 model file — metadata, tensor infos, zero-copy tensor data.
//
// The file is memory-mapped once; metadata strings, scalar arrays and tensor bytes are views into
// that mapping, valid while the GgufFile lives. Every read is bounds-checked: a truncated or
// hostile file yields a Corruption/Unsupported Status naming the byte offset and the field, never
// a crash or an out-of-bounds read. Format notes and limits: docs/gguf.md.
#ifndef FAK_IO_GGUF_H_
#define FAK_IO_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// Metadata value types, as stored (u32) in the file.
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
FAK_EXPORT std::string_view GgufTypeName(GgufType type);

// ggml tensor element types (ids from ggml.h). Only ids with a known block layout are listed.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15, kIQ4_NL = 20, kIQ4_XS = 23,
  kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

// Block layout of a ggml type: `block_elems` elements are stored in `block_bytes` bytes.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // "Q4_K"
  int64_t block_elems;
  int64_t block_bytes;
};
// Unsupported naming the id for an unknown or retired type id.
FAK_EXPORT Result<GgmlTypeInfo> LookupGgmlType(uint32_t type_id);

// One metadata value. Scalars are held by value; strings and scalar arrays are views into the
// mapping (zero-copy); arrays of strings hold one view per element; nested arrays hold values.
// Cheap to copy except for nested arrays. Immutable.
class FAK_EXPORT GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalars. Integer getters accept every integer type and fail (InvalidArgument) when the value
  // does not fit; ToDouble accepts floats and integers; ToBool accepts BOOL (nonzero = true).
  Result<uint64_t> ToUint64() const;
  Result<int64_t> ToInt64() const;
  Result<double> ToDouble() const;
  Result<bool> ToBool() const;
  Result<std::string_view> ToString() const;

  // Arrays: element type and count; At(i) returns element i (InvalidArgument when out of range).
  GgufType array_type() const { return array_type_; }
  size_t array_size() const { return n_elems_; }
  Result<GgufValue> At(size_t i) const;
  // Whole-array conversions with the same widening rules as the scalar getters.
  Result<std::vector<int64_t>> ToInt64Array() const;
  Result<std::vector<float>> ToFloatArray() const;
  Result<std::vector<std::string_view>> ToStringArray() const;

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::kUint8;
  uint64_t bits_ = 0;            // scalar: raw little-endian bits, zero-extended
  std::string_view str_;         // kString
  GgufType array_type_ = GgufType::kUint8;
  size_t n_elems_ = 0;
  const uint8_t* raw_ = nullptr;             // packed scalar elements (n_elems_ of array_type_)
  std::vector<std::string_view> strings_;    // string elements
  std::vector<GgufValue> arrays_;            // nested-array elements
};

struct GgufKeyValue {
  std::string_view key;  // view into the mapping
  GgufValue value;
};

// One tensor-info record. `ne` has n_dims entries, ne[0] fastest-varying (a row of ne[0] values).
struct FAK_EXPORT GgufTensorInfo {
  std::string_view name;
  std::vector<int64_t> ne;
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;      // bytes from the start of the data section (a multiple of alignment)
  uint64_t size_bytes = 0;  // (n_elements / block_elems) * block_bytes
  const uint8_t* data = nullptr;  // the tensor's bytes inside the mapping, size_bytes long

  int64_t n_elements() const;
  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(size_bytes)}; }
};

// A parsed GGUF file. Immutable after Open; safe to share between threads. Owns the mapping.
class FAK_EXPORT GgufFile {
 public:
  // Maps and parses `path`. IOError when the file cannot be mapped; Corruption (with offset and
  // field) for malformed content; Unsupported for big-endian files, versions other than 2/3 and
  // unknown tensor types.
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses bytes the caller keeps alive for the GgufFile's lifetime; `name` labels errors.
  static Result<std::unique_ptr<GgufFile>> Parse(std::span<const uint8_t> bytes, std::string name);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  size_t file_size() const { return bytes_.size(); }

  const std::vector<GgufKeyValue>& metadata() const { return kvs_; }
  const GgufValue* Find(std::string_view key) const;  // nullptr when absent
  // Typed getters: NotFound when absent, InvalidArgument naming the key on a type mismatch.
  Result<uint64_t> GetUint64(std::string_view key) const;
  Result<int64_t> GetInt64(std::string_view key) const;
  Result<double> GetDouble(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetInt64Array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;  // nullptr when absent

 private:
  friend class GgufParser;
  GgufFile();
  template <class T, class F>
  Result<T> Get(std::string_view key, F convert) const;

  struct Mapping;
  std::unique_ptr<Mapping> mapping_;  // null when parsing caller-owned bytes
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace fak

#endif  // FAK_IO_GGUF_H_
