// Embeddings: a text's vector from a model's own final hidden states (after the output norm),
// pooled as the model or the caller says (Pooling) and scaled to unit length as OpenAI's are. The
// serving path is the engine's (EngineRequest::embed: scheduled and batched with other work); Embed
// here is the same computation alone, which the engine's result equals bit for bit.
#ifndef FAK_MODEL_EMBEDDING_H_
#define FAK_MODEL_EMBEDDING_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/model/model.h"

namespace fak {

// "mean", "last", "cls": the names the server and Python take.
FAK_EXPORT const char* PoolingName(Pooling pooling);
// InvalidArgument naming the choices for any other name.
FAK_EXPORT Result<Pooling> ParsePooling(std::string_view name);

struct EmbedParams {
  Pooling pooling = Pooling::kMean;
  // Scale to unit Euclidean length, as OpenAI's embeddings are (cosine similarity is then a dot
  // product). Default: true.
  bool normalize = true;
};

// Pools a sequence's final hidden states (LogitsMode::kHidden rows) as they arrive, chunk by chunk,
// in token order: the engine reads a long prompt over several steps. Mean sums in double in token
// order; the result is rounded to float once, after the scaling. So how the rows were chunked
// changes no bit.
class FAK_EXPORT HiddenPooler {
 public:
  HiddenPooler(EmbedParams params, size_t hidden_size);
  // The sequence's next rows, [n][hidden_size].
  void Add(std::span<const float> rows);
  // The embedding of what was added. InvalidArgument before any row; Corruption when a value is not
  // finite (weights that hold NaN or overflow).
  Result<std::vector<float>> Finish() const;

 private:
  EmbedParams params_;
  size_t hidden_size_;
  size_t rows_ = 0;
  std::vector<double> pooled_;  // the sum (mean), the first row (cls) or the latest (last)
};

// `tokens` embedded alone: Model::Prefill(LogitsMode::kHidden) over a scratch cache, pooled. A pure
// function of (model, tokens, params) within a regime. Prefill's errors: InvalidArgument for no
// tokens or an id outside the vocabulary, ResourceExhausted past the context length, Corruption
// for a non-finite value.
FAK_EXPORT Result<std::vector<float>> Embed(const Model& model, std::span<const int32_t> tokens, EmbedParams params = {});

}  // namespace fak

#endif  // FAK_MODEL_EMBEDDING_H_
