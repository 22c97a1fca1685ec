// Loading a model from a Hugging Face checkpoint: config.json plus one or more safetensors shards
// (hf_checkpoint.cc), the ModelConfig it describes and its weights under HF tensor names
// (hf_loader.cc). docs/models.md ("Hugging Face checkpoints") lists the mapping.
#ifndef FAK_SRC_MODEL_HF_LOADER_H_
#define FAK_SRC_MODEL_HF_LOADER_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fak/model/model.h"
#include "fak/io/safetensors.h"
#include "src/model/weights.h"

namespace fak::internal {

// An opened checkpoint. Immutable; the model keeps it alive because F32 weights point into the
// shards' mappings.
struct HfCheckpoint {
  std::string dir;          // the directory holding config.json (and tokenizer.json)
  std::string config_path;  // dir + "/config.json"
  HfConfig config;
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  std::map<std::string, const SafetensorsTensor*, std::less<>> tensors;  // every tensor of every shard

  const SafetensorsTensor* Find(std::string_view name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : it->second;
  }
};

// Whether `path` names a directory (a Hugging Face checkpoint is one) or a .safetensors file.
bool LooksLikeHfCheckpoint(const std::string& path);

// The directory a checkpoint path stands for: `path` itself when it is a directory, else the
// directory of the file.
std::string HfCheckpointDir(const std::string& path);

// Opens `path`: a directory with config.json and either model.safetensors or
// model.safetensors.index.json (whose weight_map names the shards), or a .safetensors file with
// config.json beside it. IOError/NotFound for missing files, Corruption for a malformed index or a
// tensor in two shards, plus whatever config.json and the shards' headers report.
Result<std::unique_ptr<HfCheckpoint>> OpenHfCheckpoint(const std::string& path);

// The ModelConfig config.json describes (validated). Unsupported names the architecture, activation
// or feature (RoPE scaling, logit softcapping) fak does not implement.
Result<ModelConfig> ConfigFromHf(const HfCheckpoint& ckpt, const ModelOptions& options);

// The weights of `config` under their HF names: F32 tensors point into the shards' mappings (the
// caller keeps `ckpt` alive), F16/BF16 are widened into owned storage. Corruption names a missing
// tensor or a wrong shape; Unsupported another dtype or a bias tensor.
Result<ModelWeights> WeightsFromHf(const HfCheckpoint& ckpt, const ModelConfig& config);

}  // namespace fak::internal

#endif  // FAK_SRC_MODEL_HF_LOADER_H_
