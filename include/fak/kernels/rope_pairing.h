// RopePairing: which dimensions of a head RoPE rotates together. A model property (ModelConfig)
// that the RoPE kernel obeys, so it is defined once here, at the kernels layer both can see.
#ifndef FAK_KERNELS_ROPE_PAIRING_H_
#define FAK_KERNELS_ROPE_PAIRING_H_

namespace fak {

// (2i, 2i+1) as in the original GPT-J/Meta layout (GGUF NORM rope, whose converter permuted the
// Q/K rows), or (i, i + head_dim/2) as in the HF "rotate_half" layout (GGUF NEOX-style).
enum class RopePairing : int { kAdjacent = 0, kSplitHalf = 1 };

}  // namespace fak

#endif  // FAK_KERNELS_ROPE_PAIRING_H_
