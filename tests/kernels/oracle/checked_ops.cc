// Checked kernel entry points: validate every size with overflow-safe arithmetic, then call the table.
#include "tests/kernels/oracle/checked_ops.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace fak::kernels {
namespace {

// a*b, or an InvalidArgument naming `what` when it does not fit in size_t.
Result<size_t> Mul(size_t a, size_t b, const char* what) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    return InvalidArgument(std::string(what) + " overflows: " + std::to_string(a) + " * " + std::to_string(b));
  }
  return r;
}

Status ExpectSize(const char* name, size_t have, const char* formula, size_t want) {
  if (have == want) return Status::Ok();
  return InvalidArgument(std::string(name) + " has " + std::to_string(have) + " floats, expected " + formula + " = " +
                         std::to_string(want));
}

Status ExpectAtLeast(const char* name, size_t have, const char* formula, size_t want) {
  if (have >= want) return Status::Ok();
  return InvalidArgument(std::string(name) + " has " + std::to_string(have) + " floats, expected at least " + formula +
                         " = " + std::to_string(want));
}

std::string N(size_t v) { return std::to_string(v); }

Status ValidateAttentionDims(const AttentionShape& s) {
  if (s.n_heads == 0 || s.n_kv_heads == 0 || s.head_dim == 0) {
    return InvalidArgument("attention needs n_heads, n_kv_heads and head_dim > 0, got " + N(s.n_heads) + ", " +
                           N(s.n_kv_heads) + ", " + N(s.head_dim));
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return InvalidArgument("n_heads = " + N(s.n_heads) + " is not a multiple of n_kv_heads = " + N(s.n_kv_heads));
  }
  if (s.key_begin >= s.key_end) {
    return InvalidArgument("key range [" + N(s.key_begin) + ", " + N(s.key_end) + ") is empty or reversed");
  }
  if (s.head_begin > s.head_end || s.head_end > s.n_heads) {
    return InvalidArgument("head range [" + N(s.head_begin) + ", " + N(s.head_end) + ") is not within [0, n_heads = " +
                           N(s.n_heads) + "]");
  }
  return Status::Ok();
}

Status ValidateQuantShape(QuantType type, size_t k) {
  const int ti = static_cast<int>(type);
  if (ti < 0 || ti >= kNumQuantTypes) return InvalidArgument("unknown quant type " + N(static_cast<size_t>(ti)));
  const QuantFormat& f = FormatOf(type);
  if (k % f.block_elems != 0) {
    return InvalidArgument(std::string(f.name) + " rows need k to be a multiple of " + N(f.block_elems) + ", got k = " +
                           N(k));
  }
  return Status::Ok();
}

Status ExpectBytes(const char* name, size_t have, const char* formula, size_t want, bool at_least) {
  if (at_least ? have >= want : have == want) return Status::Ok();
  return InvalidArgument(std::string(name) + " has " + N(have) + " bytes, expected " + (at_least ? "at least " : "") +
                         formula + " = " + N(want));
}

Status ExpectAligned(const char* name, const void* p, size_t alignment) {
  if (reinterpret_cast<uintptr_t>(p) % alignment == 0) return Status::Ok();
  return InvalidArgument(std::string(name) + " must be " + N(alignment) + "-byte aligned");
}

}  // namespace

Status MatMulQuantChecked(const KernelTable& t, QuantType wtype, std::span<const float> x,
                          std::span<const uint8_t> w, std::span<float> y, size_t m, size_t k, size_t n,
                          std::span<uint8_t> xq_scratch) {
  FAK_RETURN_IF_ERROR(ValidateQuantShape(wtype, k));
  const size_t row_bytes = QuantRowBytes(wtype, k), act_row_bytes = QuantActRowBytes(wtype, k);
  FAK_ASSIGN_OR_RETURN(size_t mk, Mul(m, k, "m*k"));
  FAK_ASSIGN_OR_RETURN(size_t mn, Mul(m, n, "m*n"));
  FAK_ASSIGN_OR_RETURN(size_t w_bytes, Mul(n, row_bytes, "n*row_bytes"));
  FAK_ASSIGN_OR_RETURN(size_t xq_bytes, Mul(m, act_row_bytes, "m*act_row_bytes"));
  FAK_RETURN_IF_ERROR(ExpectSize("x", x.size(), "m*k", mk));
  FAK_RETURN_IF_ERROR(ExpectBytes("w", w.size(), "n*QuantRowBytes(k)", w_bytes, false));
  FAK_RETURN_IF_ERROR(ExpectSize("y", y.size(), "m*n", mn));
  FAK_RETURN_IF_ERROR(ExpectBytes("xq_scratch", xq_scratch.size(), "m*QuantActRowBytes(k)", xq_bytes, true));
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {  // empty sums; the spans may be empty with null data, which the kernels must not see
    std::fill(y.begin(), y.end(), 0.0f);
    return Status::Ok();
  }
  FAK_RETURN_IF_ERROR(ExpectAligned("w", w.data(), FormatOf(wtype).block_bytes % 2 == 0 ? 2 : 1));  // MXFP4: bytes
  FAK_RETURN_IF_ERROR(ExpectAligned("xq_scratch", xq_scratch.data(), 4));
  t.quantize_act(wtype, x.data(), k, m, k, xq_scratch.data());
  t.matmul_q(wtype, xq_scratch.data(), w.data(), row_bytes, y.data(), n, m, k, 0, n);
  return Status::Ok();
}

Status DequantizeRowChecked(const KernelTable& t, QuantType type, std::span<const uint8_t> src, std::span<float> y) {
  FAK_RETURN_IF_ERROR(ValidateQuantShape(type, y.size()));
  FAK_RETURN_IF_ERROR(ExpectBytes("src", src.size(), "QuantRowBytes(k)", QuantRowBytes(type, y.size()), false));
  if (y.empty()) return Status::Ok();
  FAK_RETURN_IF_ERROR(ExpectAligned("src", src.data(), 2));
  t.dequantize[static_cast<int>(type)](src.data(), y.data(), y.size());
  return Status::Ok();
}

Status MatMulChecked(const KernelTable& t, std::span<const float> x, std::span<const float> w, std::span<float> y,
                     size_t m, size_t k, size_t n) {
  FAK_ASSIGN_OR_RETURN(size_t mk, Mul(m, k, "m*k"));
  FAK_ASSIGN_OR_RETURN(size_t nk, Mul(n, k, "n*k"));
  FAK_ASSIGN_OR_RETURN(size_t mn, Mul(m, n, "m*n"));
  FAK_RETURN_IF_ERROR(ExpectSize("x", x.size(), "m*k", mk));
  FAK_RETURN_IF_ERROR(ExpectSize("w", w.size(), "n*k", nk));
  FAK_RETURN_IF_ERROR(ExpectSize("y", y.size(), "m*n", mn));
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) {  // empty sums; x and w may be empty spans with null data, which the kernel must not see
    std::fill(y.begin(), y.end(), 0.0f);
    return Status::Ok();
  }
  t.matmul(x.data(), k, w.data(), k, y.data(), n, m, k, 0, n);
  return Status::Ok();
}

Status AttentionChecked(const KernelTable& t, std::span<const float> q, std::span<const float> k,
                        std::span<const float> v, std::span<float> out, std::span<float> scratch,
                        const AttentionShape& s) {
  FAK_RETURN_IF_ERROR(ValidateAttentionDims(s));
  if (s.rows == 0) return InvalidArgument("rows = 0: attention needs at least one query row");
  size_t last_end;  // the last row's key end
  if (__builtin_add_overflow(s.key_end, s.rows - 1, &last_end)) return InvalidArgument("key_end + rows overflows");
  FAK_ASSIGN_OR_RETURN(size_t row_floats, Mul(s.n_heads, s.head_dim, "n_heads*head_dim"));
  FAK_ASSIGN_OR_RETURN(size_t q_floats, Mul(s.rows, row_floats, "rows*n_heads*head_dim"));
  FAK_ASSIGN_OR_RETURN(size_t head_floats, Mul(last_end, s.head_dim, "(key_end+rows-1)*head_dim"));
  if (s.kv_head_stride < head_floats) {
    return InvalidArgument("kv_head_stride = " + N(s.kv_head_stride) + " is less than (key_end+rows-1)*head_dim = " +
                           N(head_floats) + " (KV heads would overlap)");
  }
  FAK_ASSIGN_OR_RETURN(size_t kv_before_last, Mul(s.n_kv_heads - 1, s.kv_head_stride, "(n_kv_heads-1)*kv_head_stride"));
  size_t kv_floats;
  if (__builtin_add_overflow(kv_before_last, head_floats, &kv_floats)) return InvalidArgument("k/v extent overflows");
  FAK_RETURN_IF_ERROR(ExpectSize("q", q.size(), "rows*n_heads*head_dim", q_floats));
  FAK_RETURN_IF_ERROR(ExpectSize("out", out.size(), "rows*n_heads*head_dim", q_floats));
  const char* kv_formula = "(n_kv_heads-1)*kv_head_stride + (key_end+rows-1)*head_dim";
  FAK_RETURN_IF_ERROR(ExpectAtLeast("k", k.size(), kv_formula, kv_floats));
  FAK_RETURN_IF_ERROR(ExpectAtLeast("v", v.size(), kv_formula, kv_floats));
  size_t per_head = last_end;  // AttentionScratchFloats, overflow-checked (last_end fits: k holds that many rows)
  if (s.rows > 1) {
    FAK_ASSIGN_OR_RETURN(per_head, Mul(s.rows, last_end + s.head_dim, "rows*(key_end+rows-1+head_dim)"));
  }
  FAK_ASSIGN_OR_RETURN(size_t scratch_floats, Mul(kAttentionHeadsAtOnce, per_head, "scratch floats"));
  FAK_RETURN_IF_ERROR(ExpectAtLeast("scratch", scratch.size(), "AttentionScratchFloats(rows, key_end+rows-1, head_dim)",
                                    scratch_floats));
  const KeyRun run{k.data(), v.data(), s.kv_head_stride, last_end};
  AttentionArgs args{q.data(), &run, 1, out.data(), scratch.data(), s.n_heads, s.n_kv_heads, s.head_dim,
                     s.key_begin, s.key_end, s.scale, s.head_begin, s.head_end, s.rows, s.window};
  t.attention(args);
  return Status::Ok();
}

}  // namespace fak::kernels
