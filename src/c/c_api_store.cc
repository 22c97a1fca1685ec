// The C API's text store: content-addressed source text with per-tokenizer token caches.
#include "src/c/c_api_internal.h"

struct fak_text_store {
  std::unique_ptr<fak::BlobStore> store;    // declared first: outlives the corpus over it
  std::unique_ptr<fak::TextCorpus> corpus;
};

using fak::Status;
using fak::capi::Guard;

extern "C" {

fak_status fak_text_store_open(const char* dir, uint64_t capacity_bytes, fak_text_store** out) {
  return Guard("fak_text_store_open", [&]() -> Status {
    FAK_C_REQUIRE(out);
    fak::BlobStoreOptions options;
    options.capacity_bytes = capacity_bytes == 0 ? UINT64_MAX : capacity_bytes;
    auto handle = std::make_unique<fak_text_store>();
    if (dir == nullptr) {
      handle->store = fak::MakeMemoryBlobStore(options);
    } else {
      FAK_ASSIGN_OR_RETURN(handle->store, fak::OpenDirectoryBlobStore(dir, options));
    }
    handle->corpus = std::make_unique<fak::TextCorpus>(*handle->store);
    *out = handle.release();
    return Status();
  });
}

void fak_text_store_free(fak_text_store* store) { delete store; }

fak_status fak_text_store_put(fak_text_store* store, const char* text, size_t text_len, char digest[FAK_DIGEST_HEX_SIZE]) {
  return Guard("fak_text_store_put", [&]() -> Status {
    FAK_C_REQUIRE(store);
    FAK_C_REQUIRE(digest);
    if (text == nullptr && text_len > 0) return fak::capi::NullArgument("text");
    FAK_ASSIGN_OR_RETURN(fak::Digest d, store->corpus->PutSource(std::string_view(text == nullptr ? "" : text, text_len)));
    fak::capi::WriteHex(d.Hex(), digest);
    return Status();
  });
}

fak_status fak_text_store_get(fak_text_store* store, const char* digest, char* text, size_t capacity, size_t* n_bytes) {
  return Guard("fak_text_store_get", [&]() -> Status {
    FAK_C_REQUIRE(store);
    FAK_ASSIGN_OR_RETURN(fak::Digest d, fak::capi::ParseDigest(digest, "digest"));
    FAK_ASSIGN_OR_RETURN(std::string bytes, store->corpus->GetSource(d));
    return fak::capi::CopyText(bytes, text, capacity, n_bytes, "the text");
  });
}

fak_status fak_text_store_remove(fak_text_store* store, const char* digest) {
  return Guard("fak_text_store_remove", [&]() -> Status {
    FAK_C_REQUIRE(store);
    FAK_ASSIGN_OR_RETURN(fak::Digest d, fak::capi::ParseDigest(digest, "digest"));
    return store->corpus->RemoveSource(d);
  });
}

fak_status fak_text_store_tokens(fak_text_store* store, const char* digest, const fak_model* model, int32_t* tokens,
                                 size_t capacity, size_t* n_tokens) {
  return Guard("fak_text_store_tokens", [&]() -> Status {
    FAK_C_REQUIRE(store);
    FAK_C_REQUIRE(model);
    FAK_ASSIGN_OR_RETURN(fak::Digest d, fak::capi::ParseDigest(digest, "digest"));
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, store->corpus->Tokens(d, *model->loaded->tokenizer));
    return fak::capi::CopyOut<int32_t>(ids, tokens, capacity, n_tokens, "token ids");
  });
}

}  // extern "C"
