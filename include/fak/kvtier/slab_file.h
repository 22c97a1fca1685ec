// Slab file: one radix node's KV (slab), manifest and source runs as bytes for a lower KV tier.
//
// A self-checking container (format in docs/kv-tier.md §2): a fixed header with magic, format
// version, section lengths and the SHA-256 of each section and of the header itself, then the
// sections — the manifest's canonical JSON, the source runs, the slab's shape, start position and
// token ids with the KV element type, and the K, Kraw, V elements. Decoding checks every length
// and checksum before it trusts a byte, and says which check failed (SlabFileProblem), so a page-in
// can fall back to recompute with a typed reason. Decoding verifies the container only; whether
// the slab may be served is the gate's question (tier_pager.h).
#ifndef FAK_KVTIER_SLAB_FILE_H_
#define FAK_KVTIER_SLAB_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/kv_manifest.h"
#include "fak/kv/kv_cache.h"
#include "fak/session/source_span.h"

namespace fak {

inline constexpr uint32_t kSlabFileVersion = 2;  // 1: the kv section hashed as one stream
inline constexpr size_t kSlabFileHeaderBytes = 8 + 4 + 4 + 4 * 8 + 4 * 32 + 32;  // see docs/kv-tier.md §2

struct SlabFile {
  KVManifest manifest;
  std::vector<SourceSpan> sources;
  KVSlab slab;
  // KVSlabChecksum(slab) (fak/gate/binding_tuple.h), hashed from the file's K/Kraw/V bytes chunk by
  // chunk as they were read into `slab`.
  Digest slab_checksum;
};

enum class SlabFileProblem { kNone, kTruncated, kChecksum, kMalformed, kUnsupported };

// The largest slab file a slab of `shape`'s layers, heads and head size (in any KV element type)
// holding at most `max_tokens` tokens encodes to: header, a manifest of at most the manifest JSON
// limit (64 KiB), one source run per token, the token ids and K/Kraw/V. Saturates at UINT64_MAX. A
// reader that knows what it will accept (the pager: the serving shape, tokens up to the entry's
// end) refuses a larger entry before reading or allocating it.
FAK_EXPORT uint64_t MaxSlabFileBytes(const KVShape& shape, uint64_t max_tokens);

// The file's bytes. InvalidArgument when the slab's tensors do not match its shape and token count.
FAK_EXPORT Result<std::string> EncodeSlabFile(const KVManifest& manifest, std::span<const SourceSpan> sources, const KVSlab& slab);
// Parses and verifies `bytes`; on failure *problem (when given) says which kind: kTruncated (shorter
// than the header says), kChecksum (a section or the header does not hash to its recorded digest),
// kUnsupported (another magic or version), kMalformed (a section that does not parse, or a shape
// and token count whose tensors could not exist). Never throws; allocates only for what `bytes` holds.
// The kv section's recorded digest is KVSlabChecksum of the slab it holds (version 2), computed while
// the section is read: in tasks of 64 chunks of 32 KiB, each task's chunks read into place and
// hashed by the thread that read them, on a few threads.
// `check_kv_section` false skips comparing it with the recorded one — only for a caller that checks
// slab_checksum against the manifest's integrity checksum next (the pager: the gate, not the
// container, then says whether the KV may be served).
FAK_EXPORT Result<SlabFile> DecodeSlabFile(std::string_view bytes, SlabFileProblem* problem = nullptr, bool check_kv_section = true);
// The same, reading `file` in ranges: K, Kraw and V go straight from the file into the slab (no
// copy of the whole file is held), each piece hashed on a second thread while the next is read. A
// file that ends early (it shrank since it was opened) is kTruncated; another read error is
// returned as it is, with *problem kNone.
FAK_EXPORT Result<SlabFile> DecodeSlabFile(const RandomAccessFile& file, SlabFileProblem* problem = nullptr,
                                           bool check_kv_section = true);

}  // namespace fak

#endif  // FAK_KVTIER_SLAB_FILE_H_
