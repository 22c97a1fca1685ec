// GgufParser: turns the bytes of a GGUF file into a GgufFile, checking every read against the
// end of the buffer (docs/gguf.md). Each error names the byte offset and the field being read.
#include <string>
#include <unordered_set>

#include "fak/io/gguf.h"
#include "src/io/le.h"

namespace fak {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr int kMaxArrayDepth = 8;   // nested arrays deeper than this are rejected (stack bound)
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS

// A bounds-checked read position over the file bytes.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const uint8_t* here() const { return bytes_.data() + pos_; }

  Status Error(uint64_t at, std::string_view what) const {
    return Corruption("offset " + std::to_string(at) + ": " + std::string(what));
  }
  Status Need(uint64_t n, std::string_view field) const {
    if (n <= remaining()) return Status::Ok();
    return Error(pos_, "truncated reading " + std::string(field) + " (need " + std::to_string(n) +
                           " bytes, " + std::to_string(remaining()) + " left)");
  }
  Result<uint64_t> Uint(size_t width, std::string_view field) {
    FAK_RETURN_IF_ERROR(Need(width, field));
    uint64_t v = internal::LoadLe(here(), width);
    pos_ += width;
    return v;
  }
  Result<std::string_view> String(std::string_view field) {
    uint64_t at = pos_;
    if (remaining() < 8) return Need(8, std::string(field) + " length");
    uint64_t len = internal::LoadLe(here(), 8);
    pos_ += 8;
    if (len > kMaxStringBytes) return Error(at, std::string(field) + " length " + std::to_string(len) + " exceeds 1 GiB");
    FAK_RETURN_IF_ERROR(Need(len, field));
    std::string_view s(reinterpret_cast<const char*>(here()), len);
    pos_ += len;
    return s;
  }
  Status Skip(uint64_t n, std::string_view field) {
    FAK_RETURN_IF_ERROR(Need(n, field));
    pos_ += n;
    return Status::Ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), c_(file.bytes_) {}

  Status Run() {
    FAK_RETURN_IF_ERROR(Header());
    for (uint64_t i = 0; i < n_kv_; ++i) FAK_RETURN_IF_ERROR(KeyValue(i));
    FAK_RETURN_IF_ERROR(Alignment());
    for (uint64_t i = 0; i < n_tensors_; ++i) FAK_RETURN_IF_ERROR(TensorInfo(i));
    uint64_t a = f_.alignment_;
    f_.data_offset_ = (c_.pos() + a - 1) / a * a;  // pos <= file size < 2^63: no overflow
    for (GgufTensorInfo& t : f_.tensors_) FAK_RETURN_IF_ERROR(PlaceTensor(t));
    return Status::Ok();
  }

 private:
  Status Header() {
    FAK_ASSIGN_OR_RETURN(uint64_t magic, c_.Uint(4, "magic"));
    if (magic != kMagic) return c_.Error(0, "bad magic (not a GGUF file)");
    FAK_ASSIGN_OR_RETURN(uint64_t version, c_.Uint(4, "version"));
    if ((version & 0xFFFF) == 0) return Unsupported("offset 4: big-endian GGUF files are not supported");
    if (version != 2 && version != 3) {
      return Unsupported("offset 4: GGUF version " + std::to_string(version) + " (supported: 2, 3)");
    }
    f_.version_ = static_cast<uint32_t>(version);
    FAK_ASSIGN_OR_RETURN(n_tensors_, c_.Uint(8, "n_tensors"));
    FAK_ASSIGN_OR_RETURN(n_kv_, c_.Uint(8, "n_kv"));
    // Each record takes at least this many bytes, which bounds the counts by the file size.
    if (n_kv_ > c_.remaining() / 13) return c_.Error(16, "n_kv " + std::to_string(n_kv_) + " exceeds what the file can hold");
    if (n_tensors_ > c_.remaining() / 24) {
      return c_.Error(8, "n_tensors " + std::to_string(n_tensors_) + " exceeds what the file can hold");
    }
    f_.kvs_.reserve(n_kv_);
    f_.tensors_.reserve(n_tensors_);
    return Status::Ok();
  }

  Status KeyValue(uint64_t index) {
    uint64_t at = c_.pos();
    std::string label = "metadata key #" + std::to_string(index);
    FAK_ASSIGN_OR_RETURN(std::string_view key, c_.String(label));
    if (key.empty()) return c_.Error(at, label + " is empty");
    if (!keys_.insert(key).second) return c_.Error(at, "duplicate metadata key '" + std::string(key) + "'");
    label = "metadata '" + std::string(key) + "'";
    FAK_ASSIGN_OR_RETURN(uint64_t type, c_.Uint(4, label + " type"));
    GgufKeyValue kv{key, {}};
    FAK_RETURN_IF_ERROR(Value(static_cast<uint32_t>(type), label, 0, kv.value));
    f_.kvs_.push_back(std::move(kv));
    return Status::Ok();
  }

  Status Value(uint32_t type, const std::string& label, int depth, GgufValue& out) {
    uint64_t at = c_.pos();
    if (type > static_cast<uint32_t>(GgufType::kFloat64)) {  // only a key's own type field gets here
      return c_.Error(at - 4, label + ": unknown value type " + std::to_string(type));
    }
    out.type_ = static_cast<GgufType>(type);
    if (out.type_ == GgufType::kString) {
      FAK_ASSIGN_OR_RETURN(out.str_, c_.String(label));
      return Status::Ok();
    }
    if (out.type_ == GgufType::kArray) return Array(label, depth, out);
    FAK_ASSIGN_OR_RETURN(out.bits_, c_.Uint(internal::GgufScalarSize(out.type_), label));
    return Status::Ok();
  }

  Status Array(const std::string& label, int depth, GgufValue& out) {
    uint64_t at = c_.pos();
    if (depth >= kMaxArrayDepth) return c_.Error(at, label + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    FAK_ASSIGN_OR_RETURN(uint64_t elem_type, c_.Uint(4, label + " element type"));
    FAK_ASSIGN_OR_RETURN(uint64_t n, c_.Uint(8, label + " element count"));
    if (elem_type > static_cast<uint32_t>(GgufType::kFloat64)) {
      return c_.Error(at, label + ": unknown array element type " + std::to_string(elem_type));
    }
    out.array_type_ = static_cast<GgufType>(elem_type);
    size_t width = internal::GgufScalarSize(out.array_type_);
    // Smallest encoding of one element: a scalar's width, a string's length, a nested array header.
    uint64_t min_bytes = width != 0 ? width : (out.array_type_ == GgufType::kString ? 8 : 12);
    if (n > c_.remaining() / min_bytes) {
      return c_.Error(at + 4, label + ": element count " + std::to_string(n) + " exceeds the bytes left (" +
                                  std::to_string(c_.remaining()) + ")");
    }
    out.n_elems_ = n;
    if (width != 0) {
      out.raw_ = c_.here();
      return c_.Skip(n * width, label + " elements");
    }
    if (out.array_type_ == GgufType::kString) {
      out.strings_.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        auto s = c_.String("string element");  // the label is built only on error (hot loop)
        if (!s) return s.error().WithContext(label + "[" + std::to_string(i) + "]");
        out.strings_.push_back(*s);
      }
      return Status::Ok();
    }
    // Grown as elements parse (no reserve), so memory stays proportional to bytes actually read.
    for (uint64_t i = 0; i < n; ++i) {
      GgufValue element;
      FAK_RETURN_IF_ERROR(Value(static_cast<uint32_t>(GgufType::kArray), label + "[" + std::to_string(i) + "]",
                                depth + 1, element));
      out.arrays_.push_back(std::move(element));
    }
    return Status::Ok();
  }

  Status Alignment() {
    const GgufValue* v = f_.Find("general.alignment");
    if (v == nullptr) return Status::Ok();
    if (v->type() != GgufType::kUint32) {
      return Corruption("metadata 'general.alignment' has type " + std::string(GgufTypeName(v->type())) +
                        " (must be UINT32)");
    }
    uint64_t a = *v->ToUint64();
    if (!IsPowerOfTwo(a)) return Corruption("metadata 'general.alignment' = " + std::to_string(a) + " is not a power of two");
    f_.alignment_ = a;
    return Status::Ok();
  }

  Status TensorInfo(uint64_t index) {
    uint64_t at = c_.pos();
    std::string label = "tensor #" + std::to_string(index);
    GgufTensorInfo t;
    FAK_ASSIGN_OR_RETURN(t.name, c_.String(label + " name"));
    if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second) {
      return c_.Error(at, "duplicate tensor name '" + std::string(t.name) + "'");
    }
    label = "tensor '" + std::string(t.name) + "'";
    FAK_ASSIGN_OR_RETURN(uint64_t n_dims, c_.Uint(4, label + " n_dims"));
    if (n_dims > kMaxDims) return c_.Error(c_.pos() - 4, label + ": n_dims " + std::to_string(n_dims) + " > 4");
    int64_t n_blocks_times_block = 1;
    for (uint64_t d = 0; d < n_dims; ++d) {
      FAK_ASSIGN_OR_RETURN(uint64_t ne, c_.Uint(8, label + " ne[" + std::to_string(d) + "]"));
      if (ne > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(n_blocks_times_block, static_cast<int64_t>(ne), &n_blocks_times_block)) {
        return c_.Error(c_.pos() - 8, label + ": element count overflows at ne[" + std::to_string(d) + "]");
      }
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    uint64_t type_at = c_.pos();
    FAK_ASSIGN_OR_RETURN(uint64_t type, c_.Uint(4, label + " type"));
    auto info = LookupGgmlType(static_cast<uint32_t>(type));
    if (!info) return info.error().WithContext("offset " + std::to_string(type_at) + ": " + label);
    t.type = info->type;
    FAK_ASSIGN_OR_RETURN(t.offset, c_.Uint(8, label + " offset"));
    int64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
    if (ne0 % info->block_elems != 0) {
      return c_.Error(at, label + ": ne[0] = " + std::to_string(ne0) + " is not a multiple of the " +
                              std::string(info->name) + " block size " + std::to_string(info->block_elems));
    }
    int64_t size = 0;
    if (__builtin_mul_overflow(n_blocks_times_block / info->block_elems, info->block_bytes, &size)) {
      return c_.Error(at, label + ": byte size overflows");
    }
    t.size_bytes = static_cast<uint64_t>(size);
    f_.tensors_.push_back(std::move(t));
    return Status::Ok();
  }

  // Checks alignment and bounds of one tensor's data and points it into the buffer.
  Status PlaceTensor(GgufTensorInfo& t) {
    std::string label = "tensor '" + std::string(t.name) + "'";
    if (t.offset % f_.alignment_ != 0) {
      return Corruption(label + ": data offset " + std::to_string(t.offset) + " is not a multiple of alignment " +
                        std::to_string(f_.alignment_));
    }
    uint64_t size = f_.bytes_.size();
    if (f_.data_offset_ > size || t.offset > size - f_.data_offset_ ||
        t.size_bytes > size - f_.data_offset_ - t.offset) {
      return Corruption(label + ": data [" + std::to_string(f_.data_offset_) + " + " + std::to_string(t.offset) + ", +" +
                        std::to_string(t.size_bytes) + ") runs past the end of the file (" + std::to_string(size) +
                        " bytes)");
    }
    t.data = f_.bytes_.data() + f_.data_offset_ + t.offset;
    return Status::Ok();
  }

  GgufFile& f_;
  Cursor c_;
  uint64_t n_tensors_ = 0, n_kv_ = 0;
  std::unordered_set<std::string_view> keys_;
};

Result<std::unique_ptr<GgufFile>> GgufFile::Parse(std::span<const uint8_t> bytes, std::string name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->bytes_ = bytes;
  file->name_ = std::move(name);
  GgufParser parser(*file);
  Status s = parser.Run();
  if (!s.ok()) return s.WithContext(file->name_);
  return file;
}

}  // namespace fak
