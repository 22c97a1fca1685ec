// TierKeyFor: the key under which every tier keeps an entry; KVTierStore::Open's default.
#include "fak/kvtier/kv_tier_store.h"

#include <algorithm>
#include <string>

namespace fak {
namespace {

void Str(Digester& d, std::string_view s) {
  d.UpdatePod(static_cast<uint64_t>(s.size()));
  d.Update(s);
}

}  // namespace

Status ValidateTierKey(const TierKey& key) {
  const bool hex = key.id.size() == 64 && std::all_of(key.id.begin(), key.id.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex) return InvalidArgument("tier key: id must be 64 lowercase hex digits, got " + std::to_string(key.id.size()) + " characters");
  return Status::Ok();
}

TierKey TierKeyFor(const BindingTuple& b, std::string_view ns, const Digest& span_digest, uint64_t end) {
  Digester d;
  d.Update("fak.kvtier.key.v1");
  for (const Digest* x : {&b.model_id, &b.tokenizer_id, &b.adapter_id}) d.Update(x->bytes.data(), Digest::kSize);
  for (const std::string* s : {&b.precision.weight_dtype, &b.precision.kv_dtype, &b.precision.kernel_tier,
                               &b.position.scheme, &b.position.pairing, &b.position.scaling, &b.producer.library,
                               &b.producer.version, &b.producer.kernel_build})
    Str(d, *s);
  d.UpdatePod(b.position.base);
  Str(d, ns);
  d.Update(span_digest.bytes.data(), Digest::kSize);
  d.UpdatePod(end);
  return TierKey{d.Finish().Hex(), end};
}

Result<std::unique_ptr<RandomAccessFile>> KVTierStore::Open(const TierKey& key, uint64_t max_bytes) {
  FAK_ASSIGN_OR_RETURN(std::string bytes, Get(key, max_bytes));
  return RandomAccessBytes(std::move(bytes));
}

}  // namespace fak
