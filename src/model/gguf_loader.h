// Loading a model from a GGUF file: config from metadata (gguf_config.cc) and weights as views into
// the mapped file (gguf_loader.cc).
#ifndef FAK_SRC_MODEL_GGUF_LOADER_H_
#define FAK_SRC_MODEL_GGUF_LOADER_H_

#include "fak/io/gguf.h"
#include "fak/model/model.h"
#include "src/model/weights.h"

namespace fak::internal {

// The ModelConfig a GGUF file describes (validated). Corruption names a missing required key;
// Unsupported an architecture or feature fak does not implement.
Result<ModelConfig> ConfigFromGguf(const GgufFile& file, const ModelOptions& options);

// The weights of `config` in `file`: F32 and quantized tensors point into the mapping (the caller
// keeps `file` alive), F16/BF16 are widened into owned storage. Corruption names a missing tensor
// or a wrong shape; Unsupported a tensor type without kernels.
Result<ModelWeights> WeightsFromGguf(const GgufFile& file, const ModelConfig& config);

}  // namespace fak::internal

#endif  // FAK_SRC_MODEL_GGUF_LOADER_H_
