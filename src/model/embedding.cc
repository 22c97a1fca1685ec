// Pooling of final hidden states into an embedding, and one text's embedding computed alone.
#include "fak/model/embedding.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace fak {

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kMean:
      return "mean";
    case Pooling::kLast:
      return "last";
    case Pooling::kCls:
      return "cls";
  }
  return "mean";
}

Result<Pooling> ParsePooling(std::string_view name) {
  for (Pooling p : {Pooling::kMean, Pooling::kLast, Pooling::kCls}) {
    if (name == PoolingName(p)) return p;
  }
  return InvalidArgument("pooling '" + std::string(name) + "' is not one of mean, last, cls");
}

HiddenPooler::HiddenPooler(EmbedParams params, size_t hidden_size)
    : params_(params), hidden_size_(hidden_size), pooled_(hidden_size, 0.0) {}

void HiddenPooler::Add(std::span<const float> rows) {
  const size_t n = rows.size() / hidden_size_;
  if (n == 0) return;
  switch (params_.pooling) {
    case Pooling::kMean:
      for (size_t r = 0; r < n; ++r)
        for (size_t i = 0; i < hidden_size_; ++i) pooled_[i] += rows[r * hidden_size_ + i];
      break;
    case Pooling::kLast:
      std::copy(rows.end() - static_cast<std::ptrdiff_t>(hidden_size_), rows.end(), pooled_.begin());
      break;
    case Pooling::kCls:
      if (rows_ == 0) std::copy(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(hidden_size_), pooled_.begin());
      break;
  }
  rows_ += n;
}

Result<std::vector<float>> HiddenPooler::Finish() const {
  if (rows_ == 0) return InvalidArgument("HiddenPooler: no hidden states to pool");
  std::vector<double> v = pooled_;
  if (params_.pooling == Pooling::kMean)
    for (double& x : v) x /= static_cast<double>(rows_);
  if (params_.normalize) {
    double square = 0.0;
    for (double x : v) square += x * x;
    // A zero vector has no direction: it stays zero.
    if (square > 0.0) {
      const double norm = std::sqrt(square);
      for (double& x : v) x /= norm;
    }
  }
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = static_cast<float>(v[i]);
    if (!std::isfinite(out[i]))
      return Corruption("embedding: the model produced a non-finite hidden state at dimension " + std::to_string(i));
  }
  return out;
}

Result<std::vector<float>> Embed(const Model& model, std::span<const int32_t> tokens, EmbedParams params) {
  KVCache cache = model.NewCache();  // scratch: only this pass reads it
  FAK_ASSIGN_OR_RETURN(std::vector<float> rows, model.Prefill(&cache, tokens, LogitsMode::kHidden));
  HiddenPooler pooler(params, model.config().hidden_size);
  pooler.Add(rows);
  return pooler.Finish();
}

}  // namespace fak
