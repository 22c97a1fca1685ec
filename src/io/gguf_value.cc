// GgufValue accessors and the ggml type table (block sizes from model-formats.md §1.4).
#include <cstring>
#include <limits>
#include <string>

#include "fak/io/gguf.h"
#include "src/io/le.h"

namespace fak {
namespace {

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},          {GgmlType::kF16, "F16", 1, 2},
    {GgmlType::kQ4_0, "Q4_0", 32, 18},      {GgmlType::kQ4_1, "Q4_1", 32, 20},
    {GgmlType::kQ5_0, "Q5_0", 32, 22},      {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},      {GgmlType::kQ8_1, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},     {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144},    {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},    {GgmlType::kQ8_K, "Q8_K", 256, 292},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::kI8, "I8", 1, 1},            {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},          {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},          {GgmlType::kIQ1_M, "IQ1_M", 256, 56},
    {GgmlType::kBF16, "BF16", 1, 2},        {GgmlType::kTQ1_0, "TQ1_0", 256, 54},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 66},   {GgmlType::kMXFP4, "MXFP4", 32, 17},
};

bool IsInteger(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}
bool IsSigned(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 || t == GgufType::kInt64;
}

// Sign-extends the raw bits of a signed scalar of type `t`.
int64_t SignExtend(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kInt8: return static_cast<int8_t>(bits);
    case GgufType::kInt16: return static_cast<int16_t>(bits);
    case GgufType::kInt32: return static_cast<int32_t>(bits);
    default: return static_cast<int64_t>(bits);
  }
}

Status TypeError(GgufType have, std::string_view want) {
  return InvalidArgument("value of type " + std::string(GgufTypeName(have)) + " is not " + std::string(want));
}

}  // namespace

std::string_view GgufTypeName(GgufType type) {
  static constexpr std::string_view kNames[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                                "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : std::string_view("UNKNOWN");
}

Result<GgmlTypeInfo> LookupGgmlType(uint32_t type_id) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (static_cast<uint32_t>(info.type) == type_id) return info;
  }
  return Unsupported("ggml tensor type id " + std::to_string(type_id) + " is unknown or unsupported");
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // the parser checked this product does not overflow
  return n;
}

Result<uint64_t> GgufValue::ToUint64() const {
  if (!IsInteger(type_)) return TypeError(type_, "an integer");
  if (IsSigned(type_)) {
    int64_t v = SignExtend(type_, bits_);
    if (v < 0) return InvalidArgument("negative value " + std::to_string(v) + " where unsigned expected");
    return static_cast<uint64_t>(v);
  }
  return bits_;
}

Result<int64_t> GgufValue::ToInt64() const {
  if (!IsInteger(type_)) return TypeError(type_, "an integer");
  if (IsSigned(type_)) return SignExtend(type_, bits_);
  if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgument("value " + std::to_string(bits_) + " does not fit int64");
  }
  return static_cast<int64_t>(bits_);
}

Result<double> GgufValue::ToDouble() const {
  if (type_ == GgufType::kFloat32) return static_cast<double>(internal::BitsToF32(static_cast<uint32_t>(bits_)));
  if (type_ == GgufType::kFloat64) return internal::BitsToF64(bits_);
  if (IsSigned(type_)) return static_cast<double>(SignExtend(type_, bits_));
  if (IsInteger(type_)) return static_cast<double>(bits_);
  return TypeError(type_, "a number");
}

Result<bool> GgufValue::ToBool() const {
  if (type_ != GgufType::kBool) return TypeError(type_, "BOOL");
  return bits_ != 0;
}

Result<std::string_view> GgufValue::ToString() const {
  if (type_ != GgufType::kString) return TypeError(type_, "STRING");
  return str_;
}

Result<GgufValue> GgufValue::At(size_t i) const {
  if (type_ != GgufType::kArray) return TypeError(type_, "ARRAY");
  if (i >= n_elems_) {
    return InvalidArgument("array index " + std::to_string(i) + " out of range [0, " + std::to_string(n_elems_) + ")");
  }
  if (array_type_ == GgufType::kArray) return arrays_[i];
  GgufValue v;
  v.type_ = array_type_;
  if (array_type_ == GgufType::kString) {
    v.str_ = strings_[i];
  } else {
    size_t width = internal::GgufScalarSize(array_type_);
    v.bits_ = internal::LoadLe(raw_ + i * width, width);
  }
  return v;
}

Result<std::vector<int64_t>> GgufValue::ToInt64Array() const {
  if (type_ != GgufType::kArray) return TypeError(type_, "ARRAY");
  std::vector<int64_t> out(n_elems_);
  for (size_t i = 0; i < n_elems_; ++i) {
    FAK_ASSIGN_OR_RETURN(GgufValue e, At(i));
    auto v = e.ToInt64();
    if (!v) return v.error().WithContext("element " + std::to_string(i));
    out[i] = *v;
  }
  return out;
}

Result<std::vector<float>> GgufValue::ToFloatArray() const {
  if (type_ != GgufType::kArray) return TypeError(type_, "ARRAY");
  std::vector<float> out(n_elems_);
  if (array_type_ == GgufType::kFloat32) {  // the common case: one copy
    if (n_elems_ > 0) std::memcpy(out.data(), raw_, n_elems_ * 4);
    return out;
  }
  for (size_t i = 0; i < n_elems_; ++i) {
    FAK_ASSIGN_OR_RETURN(GgufValue e, At(i));
    auto v = e.ToDouble();
    if (!v) return v.error().WithContext("element " + std::to_string(i));
    out[i] = static_cast<float>(*v);
  }
  return out;
}

Result<std::vector<std::string_view>> GgufValue::ToStringArray() const {
  if (type_ != GgufType::kArray) return TypeError(type_, "ARRAY");
  if (array_type_ != GgufType::kString) return TypeError(array_type_, "STRING (array element)");
  return strings_;
}

}  // namespace fak
