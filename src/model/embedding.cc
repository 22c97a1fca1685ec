// MeanPooledEmbedding: one forward pass without the output head over a scratch cache, averaged.
#include "fak/model/embedding.h"

#include <cmath>
#include <string>

#include "src/core/exception_boundary.h"
#include "src/model/model_impl.h"

namespace fak {

Result<std::vector<float>> MeanPooledEmbedding(const Model& model, std::span<const int32_t> tokens) {
  const ModelConfig& c = model.config();
  if (tokens.empty()) return InvalidArgument("MeanPooledEmbedding: no tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= c.vocab_size)
      return InvalidArgument("MeanPooledEmbedding: token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  }
  if (tokens.size() > c.context_length)
    return ResourceExhausted("MeanPooledEmbedding: " + std::to_string(tokens.size()) + " tokens exceed the context length " +
                             std::to_string(c.context_length));
  return internal::ExceptionBoundary("MeanPooledEmbedding", [&]() -> Result<std::vector<float>> {
    KVCache cache = model.NewCache();  // scratch: only this pass reads it
    FAK_RETURN_IF_ERROR(cache.Reserve(tokens.size()));
    std::vector<double> sum;
    internal::ForwardHiddenSum(internal::ModelAccess::Get(model), &cache, tokens, &sum);
    std::vector<float> mean(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) {
      mean[i] = static_cast<float>(sum[i] / static_cast<double>(tokens.size()));
      if (!std::isfinite(mean[i]))
        return Corruption("MeanPooledEmbedding: the model produced a non-finite hidden state at dimension " + std::to_string(i));
    }
    return mean;
  });
}

}  // namespace fak
