// Model weights from a GGUF file (model-formats.md §2): tensor names per architecture, shape checks
// (ne[0] is the row length), and the storage each type gets — matrices of every type (F32, F16,
// BF16, quantized) stay in the mapped file; F16/BF16 norm and bias vectors are widened to f32 here. Fused tensors (attn_qkv; Phi-3's ffn_up
// holding gate then up) become row ranges of one tensor: every row is whole, so each part is a view.
#include <string>

#include "kernels/dispatch.h"
#include "src/model/gguf_loader.h"
#include "src/core/str_cat.h"

namespace fak::internal {
namespace {

class TensorReader {
 public:
  TensorReader(const GgufFile& f, ModelWeights* w) : f_(f), w_(w) {}

  // A [rows][cols] matrix (GGUF ne = [cols, rows'] with rows' >= rows when `at_least`).
  Result<WeightTensor> Matrix(const std::string& name, size_t rows, size_t cols, bool at_least = false) {
    FAK_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name));
    const bool ok = t->ne.size() >= 2 && static_cast<size_t>(t->ne[0]) == cols &&
                    (at_least ? static_cast<size_t>(t->ne[1]) >= rows : static_cast<size_t>(t->ne[1]) == rows) &&
                    TrailingOnes(*t, 2);
    if (!ok) return BadShape(*t, StrCat("[", std::to_string(cols), ", ", std::to_string(rows), "]"));
    return View(*t, rows, cols, /*matrix=*/true);
  }

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  // n matrices of [rows][cols] stacked in one 3-D tensor (GGUF ne = [cols, rows, n]), as one
  // [n · rows][cols] matrix.
  Result<WeightTensor> Stack(const std::string& name, size_t n, size_t rows, size_t cols) {
    FAK_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name));
    const bool ok = t->ne.size() >= 3 && static_cast<size_t>(t->ne[0]) == cols && static_cast<size_t>(t->ne[1]) == rows &&
                    static_cast<size_t>(t->ne[2]) == n && TrailingOnes(*t, 3);
    if (!ok) {
      return BadShape(*t, StrCat("[", std::to_string(cols), ", ", std::to_string(rows), ", ", std::to_string(n), "]"));
    }
    return View(*t, n * rows, cols, /*matrix=*/true);
  }

  // A norm weight or bias vector of n values (F32, or F16/BF16 widened).
  Result<WeightTensor> Vector(const std::string& name, size_t n) {
    FAK_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name));
    if (t->ne.empty() || static_cast<size_t>(t->ne[0]) != n || !TrailingOnes(*t, 1))
      return BadShape(*t, StrCat("[", std::to_string(n), "]"));
    return View(*t, 1, n, /*matrix=*/false);
  }

  // n bias vectors of `cols` values in one tensor (GGUF ne = [cols, n]; gpt-oss's per-expert
  // biases), as rows of one [n][cols] f32 tensor.
  Result<WeightTensor> Vectors(const std::string& name, size_t n, size_t cols) {
    FAK_ASSIGN_OR_RETURN(const GgufTensorInfo* t, Find(name));
    if (t->ne.size() < 2 || static_cast<size_t>(t->ne[0]) != cols || static_cast<size_t>(t->ne[1]) != n ||
        !TrailingOnes(*t, 2)) {
      return BadShape(*t, StrCat("[", std::to_string(cols), ", ", std::to_string(n), "]"));
    }
    return View(*t, n, cols, /*matrix=*/false);
  }

 private:
  Result<const GgufTensorInfo*> Find(const std::string& name) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return Corruption(f_.name() + ": missing tensor " + name);
    return t;
  }
  static bool TrailingOnes(const GgufTensorInfo& t, size_t from) {
    for (size_t i = from; i < t.ne.size(); ++i)
      if (t.ne[i] != 1) return false;
    return true;
  }
  Status BadShape(const GgufTensorInfo& t, const std::string& want) {
    return Corruption(f_.name() + ": tensor " + std::string(t.name) + " has shape " + ShapeString(t.ne) + ", expected " + want);
  }

  Result<WeightTensor> View(const GgufTensorInfo& t, size_t rows, size_t cols, bool matrix) {
    WeightTensor w{DType::kF32, rows, cols, t.data};
    if (t.type == GgmlType::kF32) {
      if (reinterpret_cast<uintptr_t>(t.data) % alignof(float) != 0)
        return Corruption(f_.name() + ": tensor " + std::string(t.name) + " is not 4-byte aligned");
      return w;
    }
    if (t.type == GgmlType::kF16 || t.type == GgmlType::kBF16) {
      if (!matrix) return Widen(t, rows, cols);  // a vector: the kernels read norms and biases as f32
      if (reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) != 0)
        return Corruption(f_.name() + ": tensor " + std::string(t.name) + " is not 2-byte aligned");
      w.dtype = t.type == GgmlType::kF16 ? DType::kF16 : DType::kBF16;
      return w;
    }
    for (const kernels::QuantFormat& q : kernels::kQuantFormats) {
      if (q.ggml_type != static_cast<uint32_t>(t.type)) continue;
      if (!matrix) break;
      w.dtype = DTypeOf(q.type);
      return w;
    }
    auto info = LookupGgmlType(static_cast<uint32_t>(t.type));
    return Unsupported(f_.name() + ": tensor " + std::string(t.name) + " has type " +
                       (info.has_value() ? std::string(info->name) : std::to_string(static_cast<uint32_t>(t.type))) +
                       (matrix ? " (no kernels for it)" : " (norm weights must be F32, F16 or BF16)"));
  }

  // An F16/BF16 vector → owned f32 (the values are exact in f32).
  WeightTensor Widen(const GgufTensorInfo& t, size_t rows, size_t cols) {
    AlignedBuffer buf(rows * cols);
    const kernels::KernelTable& k = kernels::Active();
    const auto* src = reinterpret_cast<const uint16_t*>(t.data);  // GGUF data is 32-byte aligned
    if (t.type == GgmlType::kF16) {
      k.f16_to_f32(src, buf.data(), rows * cols);
    } else {
      k.bf16_to_f32(src, buf.data(), rows * cols);
    }
    WeightTensor w{DType::kF32, rows, cols, buf.data()};
    w_->storage.push_back(std::move(buf));
    return w;
  }

  const GgufFile& f_;
  ModelWeights* w_;
};

// Rows [row0, row0 + rows) of `t`: a view, since each stored row (f32 or quant blocks) stands alone.
WeightTensor Rows(const WeightTensor& t, size_t row0, size_t rows) {
  WeightTensor part = t;
  part.rows = rows;
  part.data = static_cast<const uint8_t*>(t.data) + row0 * t.row_bytes();
  return part;
}

Result<LayerWeights> ReadLayer(TensorReader& r, const ModelConfig& c, size_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  const size_t h = c.hidden_size, q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  LayerWeights lw;
  FAK_ASSIGN_OR_RETURN(lw.attn_norm, r.Vector(p + "attn_norm.weight", h));
  if (r.Has(p + "attn_qkv.weight")) {  // fused: q rows, then k, then v (llama.cpp's create_tensor_qkv)
    FAK_ASSIGN_OR_RETURN(WeightTensor qkv, r.Matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, h));
    lw.wq = Rows(qkv, 0, q_dim);
    lw.wk = Rows(qkv, q_dim, kv_dim);
    lw.wv = Rows(qkv, q_dim + kv_dim, kv_dim);
  } else {
    FAK_ASSIGN_OR_RETURN(lw.wq, r.Matrix(p + "attn_q.weight", q_dim, h));
    FAK_ASSIGN_OR_RETURN(lw.wk, r.Matrix(p + "attn_k.weight", kv_dim, h));
    FAK_ASSIGN_OR_RETURN(lw.wv, r.Matrix(p + "attn_v.weight", kv_dim, h));
  }
  FAK_ASSIGN_OR_RETURN(lw.wo, r.Matrix(p + "attn_output.weight", h, q_dim));
  const bool gpt_oss = c.architecture == Architecture::kGptOss;
  // gpt-oss names its pre-FFN norm post_attention_norm (llama.cpp's attn_post_norm).
  FAK_ASSIGN_OR_RETURN(lw.ffn_norm, r.Vector(p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), h));
  if (c.n_experts > 0) {  // router ffn_gate_inp; experts in 3-D ffn_{gate,up,down}_exps, one slice each
    const size_t n = c.n_experts, fe = c.expert_ffn_size;
    FAK_ASSIGN_OR_RETURN(lw.router, r.Matrix(p + "ffn_gate_inp.weight", n, h));
    FAK_ASSIGN_OR_RETURN(WeightTensor gate, r.Stack(p + "ffn_gate_exps.weight", n, fe, h));
    FAK_ASSIGN_OR_RETURN(WeightTensor up, r.Stack(p + "ffn_up_exps.weight", n, fe, h));
    FAK_ASSIGN_OR_RETURN(WeightTensor down, r.Stack(p + "ffn_down_exps.weight", n, h, fe));
    lw.experts.resize(n);
    for (size_t e = 0; e < n; ++e) {
      lw.experts[e].gate = Rows(gate, e * fe, fe);
      lw.experts[e].up = Rows(up, e * fe, fe);
      lw.experts[e].down = Rows(down, e * h, h);
    }
    if (gpt_oss) {  // biases of the router and of every expert's three projections
      FAK_ASSIGN_OR_RETURN(lw.router_bias, r.Vector(p + "ffn_gate_inp.bias", n));
      FAK_ASSIGN_OR_RETURN(WeightTensor gate_b, r.Vectors(p + "ffn_gate_exps.bias", n, fe));
      FAK_ASSIGN_OR_RETURN(WeightTensor up_b, r.Vectors(p + "ffn_up_exps.bias", n, fe));
      FAK_ASSIGN_OR_RETURN(WeightTensor down_b, r.Vectors(p + "ffn_down_exps.bias", n, h));
      for (size_t e = 0; e < n; ++e) {
        lw.experts[e].gate_bias = Rows(gate_b, e, 1);
        lw.experts[e].up_bias = Rows(up_b, e, 1);
        lw.experts[e].down_bias = Rows(down_b, e, 1);
      }
    }
  } else if (c.architecture == Architecture::kPhi3) {  // ffn_up holds gate rows, then up rows (llama.cpp's SWIGLU split)
    FAK_ASSIGN_OR_RETURN(WeightTensor gate_up, r.Matrix(p + "ffn_up.weight", 2 * c.ffn_size, h));
    lw.w_gate = Rows(gate_up, 0, c.ffn_size);
    lw.w_up = Rows(gate_up, c.ffn_size, c.ffn_size);
  } else {
    FAK_ASSIGN_OR_RETURN(lw.w_gate, r.Matrix(p + "ffn_gate.weight", c.ffn_size, h));
    FAK_ASSIGN_OR_RETURN(lw.w_up, r.Matrix(p + "ffn_up.weight", c.ffn_size, h));
  }
  if (c.n_experts == 0) {
    FAK_ASSIGN_OR_RETURN(lw.w_down, r.Matrix(p + "ffn_down.weight", h, c.ffn_size));
  }
  if (c.qkv_bias || gpt_oss) {
    FAK_ASSIGN_OR_RETURN(lw.bq, r.Vector(p + "attn_q.bias", q_dim));
    FAK_ASSIGN_OR_RETURN(lw.bk, r.Vector(p + "attn_k.bias", kv_dim));
    FAK_ASSIGN_OR_RETURN(lw.bv, r.Vector(p + "attn_v.bias", kv_dim));
  }
  if (gpt_oss) {
    FAK_ASSIGN_OR_RETURN(lw.bo, r.Vector(p + "attn_output.bias", h));
    FAK_ASSIGN_OR_RETURN(lw.attn_sinks, r.Vector(p + "attn_sinks.weight", c.n_heads));
  }
  if (c.HasQkNorm()) {
    FAK_ASSIGN_OR_RETURN(lw.q_norm, r.Vector(p + "attn_q_norm.weight", c.head_dim));
    FAK_ASSIGN_OR_RETURN(lw.k_norm, r.Vector(p + "attn_k_norm.weight", c.head_dim));
  }
  if (c.IsGemma()) {
    FAK_ASSIGN_OR_RETURN(lw.post_attn_norm, r.Vector(p + "post_attention_norm.weight", h));
    FAK_ASSIGN_OR_RETURN(lw.post_ffn_norm, r.Vector(p + "post_ffw_norm.weight", h));
  }
  return lw;
}

// Tensors fak would silently ignore (biases other than Qwen2's q/k/v ones and gpt-oss's) are refused.
Status CheckNoBiases(const GgufFile& f, const ModelConfig& c) {
  const bool gpt_oss = c.architecture == Architecture::kGptOss;
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::string_view name = t.name;
    if (name.size() <= 5 || name.substr(name.size() - 5) != ".bias") continue;
    const bool qkv = name.ends_with(".attn_q.bias") || name.ends_with(".attn_k.bias") || name.ends_with(".attn_v.bias");
    const bool oss = name.ends_with(".attn_output.bias") || name.ends_with(".ffn_gate_inp.bias") ||
                     name.ends_with("_exps.bias");
    if (!((c.qkv_bias || gpt_oss) && qkv) && !(gpt_oss && oss)) {
      return Unsupported(f.name() + ": tensor " + std::string(name) + " (biases are not supported)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelWeights> WeightsFromGguf(const GgufFile& f, const ModelConfig& c) {
  FAK_RETURN_IF_ERROR(CheckNoBiases(f, c));
  ModelWeights w;
  w.norm_one_plus = false;  // Gemma GGUF norms already include the +1 (model-formats.md §2.3)
  TensorReader r(f, &w);
  // The table may have more rows than the tokenizer (padding ids); only the first vocab_size count.
  FAK_ASSIGN_OR_RETURN(w.token_embedding, r.Matrix("token_embd.weight", c.vocab_size, c.hidden_size, /*at_least=*/true));
  FAK_ASSIGN_OR_RETURN(w.output_norm, r.Vector("output_norm.weight", c.hidden_size));
  if (c.tied_embeddings) {
    w.output = w.token_embedding;
  } else {
    FAK_ASSIGN_OR_RETURN(w.output, r.Matrix("output.weight", c.vocab_size, c.hidden_size, /*at_least=*/true));
  }
  for (size_t l = 0; l < c.n_layers; ++l) {
    FAK_ASSIGN_OR_RETURN(LayerWeights lw, ReadLayer(r, c, l));
    w.layers.push_back(lw);
  }
  if (f.FindTensor("blk." + std::to_string(c.n_layers) + ".attn_q.weight") != nullptr)
    return Corruption(f.name() + ": tensor blk." + std::to_string(c.n_layers) + ".attn_q.weight beyond block_count");
  return w;
}

}  // namespace fak::internal
