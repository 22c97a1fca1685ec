// Opening a Hugging Face checkpoint: where config.json and the shards are, the sharded index
// (model-formats.md §6.1 "Sharding"), and one name → tensor table over all shards.

#include <iterator>
#include <set>
#include <string>

#include "src/core/json.h"
#include "fak/core/env.h"
#include "src/model/hf_loader.h"

namespace fak::internal {
namespace {

bool IsDirectory(const std::string& path) {
  Result<FileInfo> info = Env::Default()->GetTargetInfo(path);
  return info.has_value() && info->is_dir;
}

bool IsFile(const std::string& path) {
  Result<FileInfo> info = Env::Default()->GetTargetInfo(path);
  return info.has_value() && info->is_regular;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Result<std::string> ReadText(const std::string& path) { return Env::Default()->ReadInputFile(path, SIZE_MAX); }

// The shard file names of model.safetensors.index.json's weight_map, and which shard each tensor
// is said to be in. A shard name must be a plain file name in the checkpoint directory: the index
// is input, and a name like "../x" would read outside it.
Status ParseIndex(const std::string& path, std::set<std::string>& files, std::map<std::string, std::string>& where) {
  FAK_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  FAK_ASSIGN_OR_RETURN(Json j, ParseJsonObject(text, path, StatusCode::kCorruption));
  // Defensive: every value's type is checked; bad_alloc is all that could still throw.
  FAK_RETURN_IF_ERROR(ContainJsonExceptions(StatusCode::kCorruption, path, [&]() -> Status {
    auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) return Corruption(path + ": missing object 'weight_map'");
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it->is_string()) return Corruption(path + ": weight_map['" + it.key() + "'] is not a string");
      const std::string& file = it->get_ref<const std::string&>();
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        return Corruption(path + ": weight_map['" + it.key() + "'] = '" + file +
                          "' is not a file name in the directory");
      }
      files.insert(file);
      where[it.key()] = file;
    }
    return Status::Ok();
  }));
  if (files.empty()) return Corruption(path + ": weight_map is empty");
  return Status::Ok();
}

// Adds every tensor of the last shard to the table; a name already present is Corruption.
Status IndexShard(HfCheckpoint& c) {
  const SafetensorsFile& shard = *c.shards.back();
  for (const SafetensorsTensor& t : shard.tensors()) {
    if (!c.tensors.emplace(t.name, &t).second) {
      return Corruption(shard.name() + ": tensor " + t.name + " is also in another shard");
    }
  }
  return Status::Ok();
}

Status OpenShards(HfCheckpoint& c, const std::string& single_file) {
  std::set<std::string> files;
  std::map<std::string, std::string> where;
  const std::string index = c.dir + "/model.safetensors.index.json";
  if (!single_file.empty()) {
    files.insert(single_file);
  } else if (IsFile(c.dir + "/model.safetensors")) {
    files.insert("model.safetensors");
  } else if (IsFile(index)) {
    FAK_RETURN_IF_ERROR(ParseIndex(index, files, where));
  } else {
    return NotFound(c.dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const std::string& f : files) {
    const std::string path = single_file.empty() ? c.dir + "/" + f : f;
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard, SafetensorsFile::Open(path));
    c.shards.push_back(std::move(shard));
    FAK_RETURN_IF_ERROR(IndexShard(c));
  }
  for (const auto& [name, file] : where) {  // the index must tell the truth about every tensor
    const SafetensorsTensor* t = c.Find(name);
    if (t == nullptr) return Corruption(index + ": tensor " + name + " is listed (in " + file + ") but in no shard");
  }
  return Status::Ok();
}

}  // namespace

bool LooksLikeHfCheckpoint(const std::string& path) { return IsDirectory(path) || EndsWith(path, ".safetensors"); }

std::string HfCheckpointDir(const std::string& path) {
  if (IsDirectory(path)) return path;
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Result<std::unique_ptr<HfCheckpoint>> OpenHfCheckpoint(const std::string& path) {
  auto c = std::make_unique<HfCheckpoint>();
  const bool dir = IsDirectory(path);
  if (!dir && !IsFile(path)) return NotFound(path + ": no such file or directory");
  c->dir = HfCheckpointDir(path);
  c->config_path = c->dir + "/config.json";
  if (!IsFile(c->config_path))
    return NotFound(c->config_path + ": missing (a Hugging Face checkpoint needs config.json)");
  FAK_ASSIGN_OR_RETURN(c->config, LoadHfConfig(c->config_path));
  FAK_RETURN_IF_ERROR(OpenShards(*c, dir ? std::string() : path));
  return c;
}

}  // namespace fak::internal
