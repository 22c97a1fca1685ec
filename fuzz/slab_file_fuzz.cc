// Fuzzes the KV tier's slab file reader (DecodeSlabFile), the bytes a page-in reads from a
// directory or Redis tier. The first byte picks a mode: bit 0 set rewrites the section and header
// checksums to match the input (plain SHA-256, and the slab's own checksum for the kv section:
// anyone with write access to a tier can make them match, so the parser past them must hold too); bit 1 set skips hashing the K/Kraw/V
// section, as the pager does. Invariants: decoding never throws or crashes; a decoded slab's
// tensors hold exactly its shape's bytes; it re-encodes and decodes back to the same slab; and
// skipping the KV hash never turns a refusal by anything but that checksum into an acceptance.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fak/kvtier/slab_file.h"
#include "fuzz/fuzz_util.h"

namespace {

// Header layout (docs/kv-tier.md §2): magic 8, version 4, sections 4, 4 lengths, 4 section
// digests, the header's digest.
constexpr size_t kLengths = 16, kDigests = kLengths + 4 * 8;

void FixHeader(std::string& b) {
  const fak::Digest h = fak::Digest::Of(std::string_view(b).substr(0, fak::kSlabFileHeaderBytes - fak::Digest::kSize));
  std::memcpy(b.data() + fak::kSlabFileHeaderBytes - fak::Digest::kSize, h.bytes.data(), fak::Digest::kSize);
}

void FixChecksums(std::string& b) {
  if (b.size() < fak::kSlabFileHeaderBytes) return;
  size_t at = fak::kSlabFileHeaderBytes;
  for (int i = 0; i < 3; ++i) {  // manifest, sources, slab: plain SHA-256
    uint64_t len = 0;
    std::memcpy(&len, b.data() + kLengths + 8 * i, 8);
    if (len > b.size() - at) break;  // the rest does not exist: leave its digest as it is
    const fak::Digest d = fak::Digest::Of(std::string_view(b).substr(at, len));
    std::memcpy(b.data() + kDigests + fak::Digest::kSize * i, d.bytes.data(), fak::Digest::kSize);
    at += len;
  }
  FixHeader(b);
  // kv: the slab's chunked checksum (version 2), which a writer computes from the decoded slab.
  fak::Result<fak::SlabFile> unchecked = fak::DecodeSlabFile(b, nullptr, /*check_kv_section=*/false);
  if (!unchecked.has_value()) return;
  std::memcpy(b.data() + kDigests + fak::Digest::kSize * 3, unchecked->slab_checksum.bytes.data(), fak::Digest::kSize);
  FixHeader(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode & 1) FixChecksums(bytes);
  const bool check_kv = (mode & 2) == 0;
  fak::SlabFileProblem problem = fak::SlabFileProblem::kNone;
  fak::Result<fak::SlabFile> f = fak::DecodeSlabFile(bytes, &problem, check_kv);
  if (!f.has_value()) {
    FAK_FUZZ_CHECK(problem != fak::SlabFileProblem::kNone, f.error().ToString());
    if (check_kv) {
      fak::SlabFileProblem unchecked = fak::SlabFileProblem::kNone;
      fak::Result<fak::SlabFile> g = fak::DecodeSlabFile(bytes, &unchecked, false);
      FAK_FUZZ_CHECK(!g.has_value() || problem == fak::SlabFileProblem::kChecksum, f.error().ToString());
    }
    return 0;
  }
  FAK_FUZZ_CHECK(problem == fak::SlabFileProblem::kNone, "a decoded file reports a problem");
  const fak::KVSlab& s = f->slab;
  const uint64_t tensor = uint64_t{s.shape.n_layers} * s.shape.n_kv_heads * s.shape.head_dim * s.size() * s.shape.elem_bytes();
  FAK_FUZZ_CHECK(s.size() > 0 && s.k.size() == tensor && s.kraw.size() == tensor && s.v.size() == tensor,
                 "decoded tensors do not hold the slab's shape");
  FAK_FUZZ_CHECK(3 * tensor <= bytes.size(), "decoded tensors larger than the file");
  fak::Result<std::string> again = fak::EncodeSlabFile(f->manifest, f->sources, s);
  FAK_FUZZ_CHECK(again.has_value(), again.error().ToString());
  fak::Result<fak::SlabFile> back = fak::DecodeSlabFile(*again);
  FAK_FUZZ_CHECK(back.has_value(), back.error().ToString());
  FAK_FUZZ_CHECK(back->manifest == f->manifest && back->sources == f->sources && back->slab.tokens == s.tokens &&
                     back->slab.start_position == s.start_position && back->slab.shape == s.shape && back->slab.k == s.k &&
                     back->slab.kraw == s.kraw && back->slab.v == s.v,
                 "a decoded slab does not survive a re-encode");
  return 0;
}
