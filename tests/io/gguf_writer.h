// GgufWriter (tests only): builds GGUF v3 bytes in memory — metadata of every type, nested arrays
// and tensors of any ggml type — so reader tests can craft exact and hostile files.
#ifndef FAK_TESTS_IO_GGUF_WRITER_H_
#define FAK_TESTS_IO_GGUF_WRITER_H_

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "fak/io/gguf.h"

namespace fak::testing {

class GgufWriter {
 public:
  // Raw little-endian appenders, usable to hand-assemble values.
  static void Put(std::vector<uint8_t>& b, const void* p, size_t n) {
    // resize + memcpy rather than insert: GCC 12 -Wstringop-overflow misfires on insert into an
    // empty vector.
    const size_t at = b.size();
    b.resize(at + n);
    if (n > 0) std::memcpy(b.data() + at, p, n);
  }
  template <class T>
  static void PutPod(std::vector<uint8_t>& b, T v) { Put(b, &v, sizeof(v)); }
  static void PutStr(std::vector<uint8_t>& b, std::string_view s) {
    PutPod<uint64_t>(b, s.size());
    Put(b, s.data(), s.size());
  }

  // A key with an already-encoded value of `type`.
  void KvRaw(std::string_view key, GgufType type, const std::vector<uint8_t>& value) {
    PutStr(kv_, key);
    PutPod<uint32_t>(kv_, static_cast<uint32_t>(type));
    kv_.insert(kv_.end(), value.begin(), value.end());
    ++n_kv_;
  }
  template <class T>
  void Kv(std::string_view key, GgufType type, T v) {
    std::vector<uint8_t> b;
    PutPod(b, v);
    KvRaw(key, type, b);
  }
  void KvString(std::string_view key, std::string_view s) {
    std::vector<uint8_t> b;
    PutStr(b, s);
    KvRaw(key, GgufType::kString, b);
  }
  void KvStrings(std::string_view key, const std::vector<std::string>& items) {
    std::vector<uint8_t> b;
    PutPod<uint32_t>(b, static_cast<uint32_t>(GgufType::kString));
    PutPod<uint64_t>(b, items.size());
    for (const std::string& s : items) PutStr(b, s);
    KvRaw(key, GgufType::kArray, b);
  }
  template <class T>
  void KvArray(std::string_view key, GgufType elem, const std::vector<T>& items) {
    std::vector<uint8_t> b;
    PutPod<uint32_t>(b, static_cast<uint32_t>(elem));
    PutPod<uint64_t>(b, items.size());
    for (T v : items) PutPod(b, v);
    KvRaw(key, GgufType::kArray, b);
  }

  // A tensor with dims `ne` (ne[0] fastest); `data` must be its exact byte size.
  void Tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> data) {
    tensors_.push_back({std::string(name), std::move(ne), type, std::move(data)});
  }

  std::vector<uint8_t> Build(uint64_t alignment = 32) const {
    std::vector<uint8_t> b;
    PutPod<uint32_t>(b, 0x46554747);
    PutPod<uint32_t>(b, 3);
    PutPod<uint64_t>(b, tensors_.size());
    PutPod<uint64_t>(b, n_kv_);
    b.insert(b.end(), kv_.begin(), kv_.end());
    uint64_t offset = 0;
    for (const TensorRec& t : tensors_) {
      PutStr(b, t.name);
      PutPod<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) PutPod(b, d);
      PutPod<uint32_t>(b, t.type);
      PutPod<uint64_t>(b, offset);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (const TensorRec& t : tensors_) {
      b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
      b.insert(b.end(), t.data.begin(), t.data.end());
    }
    return b;
  }

  static void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

 private:
  struct TensorRec {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<TensorRec> tensors_;
};

// Bytes of a tensor of `n_elements` of ggml `type` filled with a recognisable pattern.
inline std::vector<uint8_t> PatternBytes(uint32_t type, uint64_t n_elements) {
  GgmlTypeInfo info = *LookupGgmlType(type);
  std::vector<uint8_t> data(n_elements / info.block_elems * info.block_bytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + type);
  return data;
}

// A file exercising every metadata type (nested arrays included), general.alignment = 64 and one
// tensor of each type the model code uses. The expectations are in gguf_test.cc.
inline std::vector<uint8_t> MakeRichGguf() {
  GgufWriter w;
  w.KvString("general.architecture", "llama");
  w.Kv<uint32_t>("general.alignment", GgufType::kUint32, 64);
  w.Kv<uint8_t>("t.u8", GgufType::kUint8, 200);
  w.Kv<int8_t>("t.i8", GgufType::kInt8, -100);
  w.Kv<uint16_t>("t.u16", GgufType::kUint16, 60000);
  w.Kv<int16_t>("t.i16", GgufType::kInt16, -30000);
  w.Kv<uint32_t>("t.u32", GgufType::kUint32, 4000000000u);
  w.Kv<int32_t>("t.i32", GgufType::kInt32, -2000000000);
  w.Kv<float>("t.f32", GgufType::kFloat32, 1.5f);
  w.Kv<uint8_t>("t.bool", GgufType::kBool, 1);
  w.Kv<uint64_t>("t.u64", GgufType::kUint64, 18000000000000000000ull);
  w.Kv<int64_t>("t.i64", GgufType::kInt64, -9000000000000000000ll);
  w.Kv<double>("t.f64", GgufType::kFloat64, -2.25);
  w.KvStrings("t.strs", {"a", "", "hello world"});
  w.KvArray<int32_t>("t.i32s", GgufType::kInt32, {1, -2, 3});
  w.KvArray<float>("t.f32s", GgufType::kFloat32, {0.5f, -1.0f});
  w.KvArray<uint8_t>("t.bools", GgufType::kBool, {0, 1});
  std::vector<uint8_t> nested;  // [[7, 8], [], [["x"]]] : array of arrays (u32, u32, array of string)
  GgufWriter::PutPod<uint32_t>(nested, static_cast<uint32_t>(GgufType::kArray));
  GgufWriter::PutPod<uint64_t>(nested, 3);
  GgufWriter::PutPod<uint32_t>(nested, static_cast<uint32_t>(GgufType::kUint32));
  GgufWriter::PutPod<uint64_t>(nested, 2);
  GgufWriter::PutPod<uint32_t>(nested, 7);
  GgufWriter::PutPod<uint32_t>(nested, 8);
  GgufWriter::PutPod<uint32_t>(nested, static_cast<uint32_t>(GgufType::kUint32));
  GgufWriter::PutPod<uint64_t>(nested, 0);
  GgufWriter::PutPod<uint32_t>(nested, static_cast<uint32_t>(GgufType::kArray));
  GgufWriter::PutPod<uint64_t>(nested, 1);
  GgufWriter::PutPod<uint32_t>(nested, static_cast<uint32_t>(GgufType::kString));
  GgufWriter::PutPod<uint64_t>(nested, 1);
  GgufWriter::PutStr(nested, "x");
  w.KvRaw("t.nested", GgufType::kArray, nested);
  struct Spec {
    const char* name;
    GgmlType type;
    std::vector<uint64_t> ne;
  };
  const Spec specs[] = {
      {"f32", GgmlType::kF32, {8, 2}},     {"f16", GgmlType::kF16, {4}},       {"bf16", GgmlType::kBF16, {4, 1, 1}},
      {"q8_0", GgmlType::kQ8_0, {64, 2}},  {"q4_0", GgmlType::kQ4_0, {32}},    {"q5_0", GgmlType::kQ5_0, {32, 3}},
      {"q4_k", GgmlType::kQ4_K, {256}},    {"q5_k", GgmlType::kQ5_K, {256, 2}}, {"q6_k", GgmlType::kQ6_K, {512}},
  };
  for (const Spec& t : specs) {
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    w.Tensor(t.name, t.ne, static_cast<uint32_t>(t.type), PatternBytes(static_cast<uint32_t>(t.type), n));
  }
  return w.Build(64);
}

}  // namespace fak::testing

#endif  // FAK_TESTS_IO_GGUF_WRITER_H_
