// The C API's radix tree: prefix reuse across sessions, through the manifest gate.
#include "src/c/c_api_internal.h"


using fak::Status;
using fak::capi::Guard;

extern "C" {

fak_status fak_radix_new(const fak_model* model, size_t budget_bytes, fak_radix** out) {
  return Guard("fak_radix_new", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(out);
    auto holder = std::make_shared<fak::capi::RadixHolder>();
    holder->model = model->loaded;
    fak::RadixTreeOptions options;
    options.budget_bytes = budget_bytes;
    holder->tree = std::make_unique<fak::RadixTree>(*holder->model->model, *holder->model->tokenizer, options);
    *out = new fak_radix{std::move(holder)};
    return Status();
  });
}

void fak_radix_free(fak_radix* radix) { delete radix; }

fak_status fak_radix_lookup(fak_radix* radix, const char* tenant, const int32_t* tokens, size_t n_tokens,
                            fak_session** out, size_t* matched) {
  return Guard("fak_radix_lookup", [&]() -> Status {
    FAK_C_REQUIRE(radix);
    FAK_C_REQUIRE(out);
    FAK_C_REQUIRE(matched);
    if (n_tokens == 0) return fak::InvalidArgument("n_tokens is 0: a lookup needs at least one token");
    FAK_C_REQUIRE(tokens);
    FAK_ASSIGN_OR_RETURN(std::string name, fak::capi::ReadTenant(tenant));
    fak::RadixTree& tree = *radix->holder->tree;
    fak::LookupResult found = tree.Lookup(tree.ClaimFor(name), std::span<const int32_t>(tokens, n_tokens));
    const size_t n_matched = found.matched_tokens;
    *out = new fak_session{radix->holder->model, radix->holder, std::move(found.cache), std::move(found.lease), {}};
    *matched = n_matched;
    return Status();
  });
}

fak_status fak_radix_insert(fak_radix* radix, const char* tenant, const fak_session* session) {
  return Guard("fak_radix_insert", [&]() -> Status {
    FAK_C_REQUIRE(radix);
    FAK_C_REQUIRE(session);
    FAK_ASSIGN_OR_RETURN(std::string name, fak::capi::ReadTenant(tenant));
    if (session->model != radix->holder->model)
      return fak::InvalidArgument("the session belongs to another model than the tree");
    if (session->cache.empty()) return fak::InvalidArgument("the session holds no tokens");
    return radix->holder->tree->Insert(name, session->cache.tokens(), session->cache);
  });
}

fak_status fak_radix_stats_get(const fak_radix* radix, fak_radix_stats* stats) {
  return Guard("fak_radix_stats_get", [&]() -> Status {
    FAK_C_REQUIRE(radix);
    FAK_C_REQUIRE(stats);
    const fak::RadixTreeStats s = radix->holder->tree->Stats();
    fak_radix_stats full{};
    full.struct_size = sizeof(full);
    full.unique_tokens = s.unique_tokens;
    full.resident_bytes = s.resident_bytes;
    full.node_count = s.node_count;
    full.lookups = s.lookups;
    full.hits = s.hits;
    full.misses = s.misses;
    full.hit_tokens = s.hit_tokens;
    full.evicted_tokens = s.evicted_tokens;
    return fak::capi::WriteVersioned(full, stats, "stats");
  });
}

}  // extern "C"
