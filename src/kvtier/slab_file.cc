// Slab file encoding and verified decoding (docs/kv-tier.md §2).
#include "fak/kvtier/slab_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "fak/gate/binding_tuple.h"
#include "src/gate/kv_slab_checksum.h"
#include "src/gate/manifest_json.h"

namespace fak {
namespace {

static_assert(std::endian::native == std::endian::little, "slab files are little-endian; this host is not");

constexpr char kMagic[8] = {'F', 'A', 'K', 'K', 'V', 'S', 'L', 'B'};
constexpr int kSections = 4;  // manifest, sources, slab meta, kv floats
// The KV element type field: 1 f32, 2 f16, 3 bf16 (kv_dtype.h; docs/kv-tier.md §2).
constexpr uint32_t kDtypeF32 = 1, kDtypeF16 = 2, kDtypeBf16 = 3;
uint32_t DtypeCode(KVDtype d) { return d == KVDtype::kF16 ? kDtypeF16 : d == KVDtype::kBF16 ? kDtypeBf16 : kDtypeF32; }
constexpr uint64_t kMaxTokens = uint64_t{1} << 24;  // a sanity bound on a slab's token count

// a * b, or UINT64_MAX when it overflows (a size that cannot exist is refused, never wrapped).
uint64_t MulSat(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }
uint64_t AddSat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

template <class T>
void Put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads PODs from a byte range, remembering whether it ran out.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <class T>
  T Get() {
    T v{};
    if (b_.size() - pos_ < sizeof(T)) {
      short_ = true;
      pos_ = b_.size();
      return v;
    }
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (b_.size() - pos_ < n) {
      short_ = true;
      pos_ = b_.size();
      return {};
    }
    std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool short_read() const { return short_; }
  size_t remaining() const { return b_.size() - pos_; }

 private:
  std::string_view b_;
  size_t pos_ = 0;
  bool short_ = false;
};

Result<SlabFile> Fail(SlabFileProblem kind, SlabFileProblem* problem, Status s) {
  if (problem != nullptr) *problem = kind;
  return s;
}

}  // namespace

uint64_t MaxSlabFileBytes(const KVShape& shape, uint64_t max_tokens) {
  constexpr uint64_t kLargestElemBytes = 4;  // f32
  const uint64_t row = MulSat(MulSat(MulSat(shape.n_layers, shape.n_kv_heads), shape.head_dim), kLargestElemBytes);
  const uint64_t per_token = AddSat(MulSat(3, row), sizeof(int32_t) + 16 + Digest::kSize);  // K/Kraw/V, id, one run
  uint64_t total = kSlabFileHeaderBytes + internal::kMaxManifestJsonBytes + 8 + 6 * 8 + 4;
  return AddSat(total, MulSat(per_token, max_tokens));
}

Result<std::string> EncodeSlabFile(const KVManifest& manifest, std::span<const SourceSpan> sources, const KVSlab& slab) {
  const KVShape& s = slab.shape;
  const size_t bytes = s.n_layers * s.n_kv_heads * slab.tokens.size() * s.head_dim * s.elem_bytes();
  if (slab.tokens.empty() || slab.k.size() != bytes || slab.kraw.size() != bytes || slab.v.size() != bytes) {
    return InvalidArgument("EncodeSlabFile: the slab's K/Kraw/V do not hold " + std::to_string(slab.tokens.size()) +
                           " tokens of its shape");
  }
  FAK_ASSIGN_OR_RETURN(std::string json, manifest.ToJson());
  std::string sec[kSections - 1];  // the kv section is appended straight from the slab
  sec[0] = std::move(json);
  Put(sec[1], static_cast<uint64_t>(sources.size()));
  for (const SourceSpan& r : sources) {
    Put(sec[1], static_cast<uint64_t>(r.from));
    Put(sec[1], static_cast<uint64_t>(r.n_tokens));
    sec[1].append(reinterpret_cast<const char*>(r.source.bytes.data()), Digest::kSize);
  }
  for (uint64_t v : {s.n_layers, s.n_kv_heads, s.head_dim, s.max_tokens, slab.start_position, slab.tokens.size()}) Put(sec[2], v);
  Put(sec[2], DtypeCode(s.dtype));
  sec[2].append(reinterpret_cast<const char*>(slab.tokens.data()), slab.tokens.size() * sizeof(int32_t));
  std::string out;
  out.reserve(kSlabFileHeaderBytes + sec[0].size() + sec[1].size() + sec[2].size() + 3 * bytes);
  out.append(kMagic, sizeof(kMagic));
  Put(out, kSlabFileVersion);
  Put(out, static_cast<uint32_t>(kSections));
  for (const std::string& x : sec) Put(out, static_cast<uint64_t>(x.size()));
  Put(out, static_cast<uint64_t>(3 * bytes));
  for (const std::string& x : sec) {
    const Digest d = Digest::Of(x);
    out.append(reinterpret_cast<const char*>(d.bytes.data()), Digest::kSize);
  }
  const Digest kv = KVSlabChecksum(slab);  // the kv section's digest is the gate's checksum (see the header)
  out.append(reinterpret_cast<const char*>(kv.bytes.data()), Digest::kSize);
  const Digest header = Digest::Of(out);
  out.append(reinterpret_cast<const char*>(header.bytes.data()), Digest::kSize);
  for (const std::string& x : sec) out += x;
  for (const auto* t : {&slab.k, &slab.kraw, &slab.v}) out.append(reinterpret_cast<const char*>(t->data()), t->size());
  return out;
}

Result<SlabFile> DecodeSlabFile(const RandomAccessFile& file, SlabFileProblem* problem, bool check_kv_section) {
  if (problem != nullptr) *problem = SlabFileProblem::kNone;
  const uint64_t size = file.size();
  // A read that fails because the file ended is a truncation (it shrank since it was opened).
  const auto read = [&](uint64_t offset, std::span<std::byte> out) -> Status {
    Status s = file.ReadAt(offset, out);
    if (!s.ok() && problem != nullptr && s.code() == StatusCode::kCorruption) *problem = SlabFileProblem::kTruncated;
    return s;
  };
  std::string head(std::min<uint64_t>(size, kSlabFileHeaderBytes), '\0');
  FAK_RETURN_IF_ERROR(read(0, std::as_writable_bytes(std::span(head))));
  if (head.size() >= sizeof(kMagic) && std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0) {
    return Fail(SlabFileProblem::kUnsupported, problem, Unsupported("slab file: bad magic (not a fak slab file)"));
  }
  if (size < kSlabFileHeaderBytes) {
    return Fail(SlabFileProblem::kTruncated, problem,
                Corruption("slab file: truncated: " + std::to_string(size) + " bytes, shorter than its header"));
  }
  Reader h(head);
  h.Bytes(sizeof(kMagic));
  const uint32_t version = h.Get<uint32_t>(), n_sections = h.Get<uint32_t>();
  if (version != kSlabFileVersion || n_sections != kSections) {
    return Fail(SlabFileProblem::kUnsupported, problem,
                Unsupported("slab file: version " + std::to_string(version) + " with " + std::to_string(n_sections) +
                            " sections; this build reads version " + std::to_string(kSlabFileVersion)));
  }
  uint64_t len[kSections];
  Digest want[kSections];
  for (uint64_t& l : len) l = h.Get<uint64_t>();
  for (Digest& d : want) std::memcpy(d.bytes.data(), h.Bytes(Digest::kSize).data(), Digest::kSize);
  Digest header_digest;
  std::memcpy(header_digest.bytes.data(), h.Bytes(Digest::kSize).data(), Digest::kSize);
  if (Digest::Of(std::string_view(head).substr(0, kSlabFileHeaderBytes - Digest::kSize)) != header_digest) {
    return Fail(SlabFileProblem::kChecksum, problem, VerificationFailed("slab file: header checksum mismatch"));
  }
  uint64_t total = kSlabFileHeaderBytes;
  for (uint64_t l : len) total = l > size ? UINT64_MAX : AddSat(total, l);
  if (total > size) {
    return Fail(SlabFileProblem::kTruncated, problem,
                Corruption("slab file: truncated: " + std::to_string(size) + " bytes, header says more"));
  }
  if (total < size) {
    return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: trailing bytes after the last section"));
  }
  if (len[0] > internal::kMaxManifestJsonBytes) {  // KVManifest::FromJson refuses it too; say which section
    return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: manifest: larger than the manifest limit"));
  }
  // The small sections (manifest, sources, slab meta) are read whole and checked before they are
  // parsed; every length was bounded by the file's size above, so nothing is sized by a bare claim.
  std::string sec[kSections - 1];
  static constexpr const char* kNames[kSections] = {"manifest", "sources", "slab", "kv"};
  uint64_t at = kSlabFileHeaderBytes;
  for (int i = 0; i < kSections - 1; ++i) {
    sec[i].resize(len[i]);
    FAK_RETURN_IF_ERROR(read(at, std::as_writable_bytes(std::span(sec[i]))));
    at += len[i];
    if (Digest::Of(sec[i]) != want[i]) {
      return Fail(SlabFileProblem::kChecksum, problem,
                  VerificationFailed(std::string("slab file: section '") + kNames[i] + "' checksum mismatch"));
    }
  }
  SlabFile f;
  Result<KVManifest> m = KVManifest::FromJson(sec[0]);
  if (!m.has_value()) return Fail(SlabFileProblem::kMalformed, problem, m.error().WithContext("slab file: manifest"));
  f.manifest = std::move(*m);

  Reader src(sec[1]);
  const uint64_t n_runs = src.Get<uint64_t>();
  if (src.short_read() || n_runs > src.remaining() / (16 + Digest::kSize) || src.remaining() != n_runs * (16 + Digest::kSize)) {
    return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: sources: bad run count"));
  }
  for (uint64_t i = 0; i < n_runs; ++i) {
    SourceSpan r;
    r.from = src.Get<uint64_t>();
    r.n_tokens = src.Get<uint64_t>();
    std::memcpy(r.source.bytes.data(), src.Bytes(Digest::kSize).data(), Digest::kSize);
    f.sources.push_back(r);
  }

  Reader meta(sec[2]);
  uint64_t v[6];
  for (uint64_t& x : v) x = meta.Get<uint64_t>();
  const uint32_t dtype = meta.Get<uint32_t>();
  if (meta.short_read()) return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: slab: short header"));
  if (dtype != kDtypeF32 && dtype != kDtypeF16 && dtype != kDtypeBf16) {
    return Fail(SlabFileProblem::kUnsupported, problem, Unsupported("slab file: KV element type " + std::to_string(dtype)));
  }
  const uint64_t n_tokens = v[5];
  if (n_tokens == 0 || n_tokens > kMaxTokens || v[0] == 0 || v[1] == 0 || v[2] == 0 || v[0] > 4096 || v[1] > 4096 ||
      v[2] > 65536 || meta.remaining() != n_tokens * sizeof(int32_t)) {
    return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: slab: implausible shape or token count"));
  }
  f.slab.shape = KVShape{v[0], v[1], v[2], v[3],
                         dtype == kDtypeF16 ? KVDtype::kF16 : dtype == kDtypeBf16 ? KVDtype::kBF16 : KVDtype::kF32};
  f.slab.start_position = v[4];
  // Checked before anything is sized by it: the product of the header's counts can exceed 2^64,
  // and a wrapped product could match a small section and size the tensors from garbage.
  const uint64_t tensor_bytes = MulSat(MulSat(MulSat(MulSat(v[0], v[1]), v[2]), n_tokens), f.slab.shape.elem_bytes());
  if (tensor_bytes > len[3] || len[3] != 3 * tensor_bytes) {
    return Fail(SlabFileProblem::kMalformed, problem, Corruption("slab file: kv: size does not match the slab's shape"));
  }
  f.slab.tokens.resize(n_tokens);
  std::memcpy(f.slab.tokens.data(), meta.Bytes(n_tokens * sizeof(int32_t)).data(), n_tokens * sizeof(int32_t));

  // K, Kraw and V are read straight into the slab, a task's chunks at a time, each task's chunks
  // hashed right behind its read by the thread that read them, on as many threads as that is worth.
  for (KVBytes* t : {&f.slab.k, &f.slab.kraw, &f.slab.v}) {
    try {
      t->resize(tensor_bytes);  // KVBytes: nothing is written until the reads
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("slab file: kv: cannot allocate " + std::to_string(3 * tensor_bytes) + " bytes");
    }
  }
  KVBytes* tensors[] = {&f.slab.k, &f.slab.kraw, &f.slab.v};
  Result<std::vector<Digest>> chunks = internal::SlabChunkDigests(
      {f.slab.k.data(), f.slab.kraw.data(), f.slab.v.data()}, tensor_bytes, [&](size_t t, size_t offset, size_t bytes) {
        return file.ReadAt(at + t * tensor_bytes + offset, std::span(*tensors[t]).subspan(offset, bytes));
      });
  if (!chunks.has_value()) {
    if (problem != nullptr && chunks.error().code() == StatusCode::kCorruption) *problem = SlabFileProblem::kTruncated;
    return chunks.error();
  }
  f.slab_checksum = internal::SlabChecksumOfChunks(f.slab.shape, f.slab.start_position, f.slab.tokens, *chunks);
  if (check_kv_section && f.slab_checksum != want[3]) {
    return Fail(SlabFileProblem::kChecksum, problem, VerificationFailed("slab file: section 'kv' checksum mismatch"));
  }
  return f;
}

Result<SlabFile> DecodeSlabFile(std::string_view bytes, SlabFileProblem* problem, bool check_kv_section) {
  return DecodeSlabFile(*RandomAccessView(bytes), problem, check_kv_section);
}

}  // namespace fak
