// RopeBinding: how a model rotates keys — its pairing and one cos/sin table per layer (Gemma 3
// layers use two different bases). Shared, immutable, owned jointly by a model and its caches.
#ifndef FAK_SRC_KV_ROPE_BINDING_H_
#define FAK_SRC_KV_ROPE_BINDING_H_

#include <memory>
#include <vector>

#include "kernels/rope.h"

namespace fak::internal {

struct RopeBinding {
  RopePairing pairing = RopePairing::kSplitHalf;
  std::vector<std::shared_ptr<const kernels::RopeTable>> layer_tables;  // [n_layers]
};

}  // namespace fak::internal

#endif  // FAK_SRC_KV_ROPE_BINDING_H_
