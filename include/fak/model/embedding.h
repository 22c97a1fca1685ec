// Embeddings: a text's vector from a model's own final hidden states, mean-pooled over its tokens
// (what `fak serve` answers on /v1/embeddings). Not batched with generation: each call runs its own
// forward pass over a scratch cache (the model's thread pool serialises it with other passes).
#ifndef FAK_MODEL_EMBEDDING_H_
#define FAK_MODEL_EMBEDDING_H_

#include <cstdint>
#include <span>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/model/model.h"

namespace fak {

// The mean over `tokens` of the model's final hidden states after its output norm (the vectors its
// output head reads), [hidden_size], summed in token order in double and rounded once. A pure
// function of (model, tokens) within a regime. InvalidArgument for no tokens or an id outside the
// vocabulary; ResourceExhausted past the context length; Corruption when the weights make a
// non-finite value.
FAK_EXPORT Result<std::vector<float>> MeanPooledEmbedding(const Model& model, std::span<const int32_t> tokens);

}  // namespace fak

#endif  // FAK_MODEL_EMBEDDING_H_
