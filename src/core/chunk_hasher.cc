// ChunkHasher: jobs submitted to libipsec-mb's manager for this CPU, flushed at the end of a batch;
// OpenSSL for what the manager cannot take (or when there is none).
#include "src/core/chunk_hasher.h"

#include <cstdint>
#include <vector>

#if FAK_WITH_IPSEC_MB
#define NO_COMPAT_IMB_API_053  // the library's old names clash with OpenSSL's (SHA1, SHA256, …)
#include <intel-ipsec-mb.h>
#endif

namespace fak::internal {
namespace {

#if FAK_WITH_IPSEC_MB
// A manager of the widest architecture this CPU runs, or null (none fits, or no memory).
IMB_MGR* NewManager() {
  IMB_MGR* m = alloc_mb_mgr(0);
  if (m == nullptr) return nullptr;
  const uint64_t f = m->features;
  if ((f & IMB_CPUFLAGS_AVX512) == IMB_CPUFLAGS_AVX512) {
    init_mb_mgr_avx512(m);
  } else if ((f & IMB_CPUFLAGS_AVX2) == IMB_CPUFLAGS_AVX2) {
    init_mb_mgr_avx2(m);
  } else if ((f & IMB_CPUFLAGS_SSE) == IMB_CPUFLAGS_SSE) {
    init_mb_mgr_sse(m);
  } else {
    free_mb_mgr(m);
    return nullptr;
  }
  if (imb_get_errno(m) != 0) {
    free_mb_mgr(m);
    return nullptr;
  }
  return m;
}
#endif

}  // namespace

ChunkHasher::~ChunkHasher() {
#if FAK_WITH_IPSEC_MB
  if (manager_ != nullptr) free_mb_mgr(static_cast<IMB_MGR*>(manager_));
#endif
}

bool ChunkHasher::MultiBuffer() {
#if FAK_WITH_IPSEC_MB
  IMB_MGR* m = NewManager();
  if (m == nullptr) return false;
  free_mb_mgr(m);
  return true;
#else
  return false;
#endif
}

void ChunkHasher::Hash(std::span<const std::span<const std::byte>> chunks, std::span<Digest> out) {
  std::vector<bool> done(chunks.size(), false);
#if FAK_WITH_IPSEC_MB
  constexpr size_t kWorthAManager = 4;  // fewer chunks than this are hashed one by one, manager or not
  if (!tried_ && chunks.size() >= kWorthAManager) {
    tried_ = true;
    manager_ = NewManager();
  }
  if (manager_ != nullptr && chunks.size() >= kWorthAManager) {
    IMB_MGR* m = static_cast<IMB_MGR*>(manager_);
    // A job carries its chunk's index; completed jobs come back in any order.
    const auto collect = [&](IMB_JOB* j) {
      for (; j != nullptr; j = IMB_GET_COMPLETED_JOB(m)) {
        if (j->status == IMB_STATUS_COMPLETED) done[reinterpret_cast<uintptr_t>(j->user_data)] = true;
      }
    };
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (chunks[i].size() > kMaxMultiBufferBytes) continue;
      IMB_JOB* j = IMB_GET_NEXT_JOB(m);
      j->cipher_mode = IMB_CIPHER_NULL;
      j->cipher_direction = IMB_DIR_ENCRYPT;
      j->chain_order = IMB_ORDER_HASH_CIPHER;
      j->hash_alg = IMB_AUTH_SHA_256;
      j->src = reinterpret_cast<const uint8_t*>(chunks[i].data());
      j->hash_start_src_offset_in_bytes = 0;
      j->msg_len_to_hash_in_bytes = chunks[i].size();
      j->auth_tag_output = out[i].bytes.data();
      j->auth_tag_output_len_in_bytes = Digest::kSize;
      j->dst = nullptr;
      j->cipher_start_src_offset_in_bytes = 0;
      j->msg_len_to_cipher_in_bytes = 0;
      j->user_data = reinterpret_cast<void*>(static_cast<uintptr_t>(i));
      collect(IMB_SUBMIT_JOB(m));
    }
    for (IMB_JOB* j; (j = IMB_FLUSH_JOB(m)) != nullptr;) collect(j);
  }
#endif
  // The rest (long chunks, a job the library refused, no manager): OpenSSL.
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (!done[i]) out[i] = Digest::Of(chunks[i].data(), chunks[i].size());
  }
}

}  // namespace fak::internal
