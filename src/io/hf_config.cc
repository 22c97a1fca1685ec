// ParseHfConfig: the fields of a Hugging Face config.json fak's model code needs (src/core/json.h,
// exceptions contained here). A multimodal Gemma 3 config's `text_config` overrides the top level.
#include <iterator>

#include "fak/io/safetensors.h"
#include "fak/core/env.h"
#include "src/core/json.h"

namespace fak {
namespace {

using json = internal::Json;

// Reads field `key` of `j` into `out` when present and not null; InvalidArgument on a wrong type.
class Reader {
 public:
  Reader(const json& j, std::string_view name) : j_(j), name_(name) {}

  template <class T>
  Status Opt(const char* key, std::optional<T>& out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    bool ok = std::is_floating_point_v<T> ? it->is_number() : it->is_number_integer();
    if (!ok) return Bad(key, std::is_floating_point_v<T> ? "a number" : "an integer");
    out = it->get<T>();
    return Status::Ok();
  }
  Status Req(const char* key, int64_t& out) const {
    std::optional<int64_t> v;
    FAK_RETURN_IF_ERROR(Opt(key, v));
    if (!v) return InvalidArgument(std::string(name_) + ": required key '" + key + "' is absent");
    out = *v;
    return Status::Ok();
  }
  Status Str(const char* key, std::string& out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) return Bad(key, "a string");
    out = it->get<std::string>();
    return Status::Ok();
  }
  Status Bool(const char* key, bool& out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (!it->is_boolean()) return Bad(key, "a boolean");
    out = it->get<bool>();
    return Status::Ok();
  }
  // An integer or a list of integers.
  Status Ids(const char* key, std::vector<int64_t>& out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (it->is_number_integer()) {
      out = {it->get<int64_t>()};
      return Status::Ok();
    }
    if (!it->is_array()) return Bad(key, "an integer or a list of integers");
    for (const json& e : *it) {
      if (!e.is_number_integer()) return Bad(key, "a list of integers");
      out.push_back(e.get<int64_t>());
    }
    return Status::Ok();
  }
  Status Strs(const char* key, std::vector<std::string>& out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return Status::Ok();
    if (!it->is_array()) return Bad(key, "a list of strings");
    for (const json& e : *it) {
      if (!e.is_string()) return Bad(key, "a list of strings");
      out.push_back(e.get<std::string>());
    }
    return Status::Ok();
  }

 private:
  Status Bad(const char* key, const char* want) const {
    return InvalidArgument(std::string(name_) + ": key '" + key + "' is not " + want);
  }
  const json& j_;
  std::string_view name_;
};

// The scaling keys of a rope_scaling (or v5 rope_parameters) object; `where` names it in errors.
Status ReadRopeScaling(const json& s, const std::string& where, HfConfig& c) {
  Reader r(s, where);
  FAK_RETURN_IF_ERROR(r.Str("type", c.rope_scaling_type));
  FAK_RETURN_IF_ERROR(r.Str("rope_type", c.rope_scaling_type));
  FAK_RETURN_IF_ERROR(r.Opt("factor", c.rope_scaling_factor));
  FAK_RETURN_IF_ERROR(r.Opt("low_freq_factor", c.rope_scaling_low_freq_factor));
  FAK_RETURN_IF_ERROR(r.Opt("high_freq_factor", c.rope_scaling_high_freq_factor));
  FAK_RETURN_IF_ERROR(r.Opt("original_max_position_embeddings", c.rope_scaling_original_max_position_embeddings));
  FAK_RETURN_IF_ERROR(r.Opt("beta_fast", c.rope_scaling_beta_fast));
  FAK_RETURN_IF_ERROR(r.Opt("beta_slow", c.rope_scaling_beta_slow));
  FAK_RETURN_IF_ERROR(r.Opt("attention_factor", c.rope_scaling_attention_factor));
  FAK_RETURN_IF_ERROR(r.Bool("truncate", c.rope_scaling_truncate));
  c.rope_scaling_has_mscale = s.contains("mscale") || s.contains("mscale_all_dim");
  return Status::Ok();
}

Status Fill(const json& top, std::string_view name, HfConfig& c) {
  const json& j = top.contains("text_config") && top["text_config"].is_object() ? top["text_config"] : top;
  Reader r(j, name), t(top, name);
  FAK_RETURN_IF_ERROR(t.Str("model_type", c.model_type));
  FAK_RETURN_IF_ERROR(r.Str("model_type", c.model_type));
  FAK_RETURN_IF_ERROR(t.Strs("architectures", c.architectures));
  FAK_RETURN_IF_ERROR(r.Req("vocab_size", c.vocab_size));
  FAK_RETURN_IF_ERROR(r.Req("hidden_size", c.hidden_size));
  FAK_RETURN_IF_ERROR(r.Req("intermediate_size", c.intermediate_size));
  FAK_RETURN_IF_ERROR(r.Req("num_hidden_layers", c.num_hidden_layers));
  FAK_RETURN_IF_ERROR(r.Req("num_attention_heads", c.num_attention_heads));
  FAK_RETURN_IF_ERROR(r.Opt("num_key_value_heads", c.num_key_value_heads));
  FAK_RETURN_IF_ERROR(r.Opt("head_dim", c.head_dim));
  FAK_RETURN_IF_ERROR(r.Opt("max_position_embeddings", c.max_position_embeddings));
  FAK_RETURN_IF_ERROR(r.Opt("rms_norm_eps", c.rms_norm_eps));
  FAK_RETURN_IF_ERROR(r.Opt("rope_theta", c.rope_theta));
  FAK_RETURN_IF_ERROR(t.Bool("tie_word_embeddings", c.tie_word_embeddings));
  FAK_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", c.tie_word_embeddings));
  FAK_RETURN_IF_ERROR(r.Ids("bos_token_id", c.bos_token_ids));
  FAK_RETURN_IF_ERROR(r.Ids("eos_token_id", c.eos_token_ids));
  FAK_RETURN_IF_ERROR(t.Str("torch_dtype", c.torch_dtype));
  FAK_RETURN_IF_ERROR(r.Str("hidden_act", c.hidden_act));
  FAK_RETURN_IF_ERROR(r.Str("hidden_activation", c.hidden_act));
  FAK_RETURN_IF_ERROR(r.Opt("query_pre_attn_scalar", c.query_pre_attn_scalar));
  FAK_RETURN_IF_ERROR(r.Opt("sliding_window", c.sliding_window));
  FAK_RETURN_IF_ERROR(r.Opt("sliding_window_pattern", c.sliding_window_pattern));
  FAK_RETURN_IF_ERROR(r.Opt("rope_local_base_freq", c.rope_local_base_freq));
  FAK_RETURN_IF_ERROR(r.Opt("final_logit_softcapping", c.final_logit_softcapping));
  FAK_RETURN_IF_ERROR(r.Strs("layer_types", c.layer_types));
  FAK_RETURN_IF_ERROR(r.Bool("use_sliding_window", c.use_sliding_window));
  auto rs = j.find("rope_scaling");
  if (rs != j.end() && rs->is_object()) {
    FAK_RETURN_IF_ERROR(ReadRopeScaling(*rs, std::string(name) + ": rope_scaling", c));  // errors name the object
  }
  // Transformers v5 writes `rope_parameters` instead: the theta and the scaling in one object, or
  // (Gemma 3) one object per layer type. Read after the older keys, so it wins when both are there.
  auto rp = j.find("rope_parameters");
  if (rp != j.end() && !rp->is_null()) {
    const std::string where = std::string(name) + ": rope_parameters";
    if (!rp->is_object()) return InvalidArgument(where + " is not an object");
    const bool per_layer_type = rp->contains("full_attention") || rp->contains("sliding_attention");
    const json* global = per_layer_type ? (rp->contains("full_attention") ? &(*rp)["full_attention"] : nullptr) : &*rp;
    if (global != nullptr) {
      const std::string at = where + (per_layer_type ? ".full_attention" : "");
      if (!global->is_object()) return InvalidArgument(at + " is not an object");
      FAK_RETURN_IF_ERROR(Reader(*global, at).Opt("rope_theta", c.rope_theta));
      FAK_RETURN_IF_ERROR(ReadRopeScaling(*global, at, c));
    }
    if (per_layer_type && rp->contains("sliding_attention")) {
      const std::string at = where + ".sliding_attention";
      const json& local = (*rp)["sliding_attention"];
      if (!local.is_object()) return InvalidArgument(at + " is not an object");
      FAK_RETURN_IF_ERROR(Reader(local, at).Opt("rope_theta", c.rope_local_base_freq));
      FAK_RETURN_IF_ERROR(Reader(local, at).Str("rope_type", c.rope_local_scaling_type));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<HfConfig> ParseHfConfig(std::string_view json_text, std::string_view name) {
  HfConfig c;
  FAK_ASSIGN_OR_RETURN(json top, internal::ParseJsonObject(json_text, name, StatusCode::kCorruption));
  // get<> on a value out of range, bad_alloc: contained here.
  FAK_RETURN_IF_ERROR(internal::ContainJsonExceptions(StatusCode::kInvalidArgument, name, [&] { return Fill(top, name, c); }));
  return c;
}

Result<HfConfig> LoadHfConfig(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::string text, internal::ReadJsonFile(Env::Default(), path));
  return ParseHfConfig(text, path);
}

}  // namespace fak
