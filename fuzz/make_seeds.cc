// fak_fuzz_seeds: writes the committed seed corpora (fuzz/corpus/<target>/) and the fixed TSA root
// the certificate and time_anchor targets verify against (fuzz/data/tsa_root.pem). Every seed is
// the output of fak's own writers (or a tiny hand-built file) and is checked to be accepted by the
// reader it seeds, so the fuzzer starts from inputs that reach deep. Run by hand when a format
// changes: build/fuzz/fuzz/fak_fuzz_seeds <repo>/fuzz. Deterministic except for keys and nonces.
#include <openssl/pkcs7.h>
#include <openssl/ts.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fak/audit/deletion_certificate.h"
#include "fak/audit/journal.h"
#include "fak/audit/signing_key.h"
#include "fak/audit/time_anchor.h"
#include "fak/gate/binding_tuple.h"
#include "fak/gate/kv_manifest.h"
#include "fak/gate/kv_transfer.h"
#include "fak/io/gguf.h"
#include "fak/io/safetensors.h"
#include "fak/kvtier/slab_file.h"
#include "fak/model/model.h"
#include "fak/recall/recall.h"
#include "fak/store/blob_store.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/audit/journal_format.h"
#include "tests/audit/test_pki.h"
#include "tests/io/gguf_writer.h"

namespace fak {
namespace {

namespace fs = std::filesystem;
using testing::GgufWriter;

std::string g_root;  // <repo>/fuzz

void Die(const std::string& what) {
  std::fprintf(stderr, "fak_fuzz_seeds: %s\n", what.c_str());
  std::exit(1);
}
template <class T>
T Must(Result<T> r, const std::string& what) {
  if (!r.has_value()) Die(what + ": " + r.error().ToString());
  return std::move(*r);
}
void Must(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what + ": " + s.ToString());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Seed(const std::string& target, const std::string& name, std::string_view bytes) {
  if (bytes.size() >= 4096) Die(target + "/" + name + " is " + std::to_string(bytes.size()) + " bytes (keep seeds < 4 KB)");
  const fs::path dir = fs::path(g_root) / "corpus" / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string AsString(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string Scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("fak_fuzz_seeds_" + name);
  fs::remove_all(p);
  return p.string();
}

// ---- models ----

struct TinyShape {
  std::string arch = "llama";
  uint32_t vocab = 16, hidden = 8, heads = 2, kv_heads = 1, head_dim = 4, ffn = 8;
  uint32_t type = 0;  // ggml type of the matrices: 0 F32, 1 F16
};

std::vector<uint8_t> Floats(size_t n, uint32_t type, float base) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i < n; ++i) {
    const float v = base + 0.05f * std::sin(static_cast<float>(i) * 0.7f + base);
    if (type == 1) {  // f16 of a small value: sign, 5-bit exponent, 10-bit mantissa
      const _Float16 h = static_cast<_Float16>(v);
      GgufWriter::PutPod(b, h);
    } else {
      GgufWriter::PutPod(b, v);
    }
  }
  return b;
}

std::string TinyGguf(const TinyShape& s) {
  const std::string& a = s.arch;
  const bool gemma = a == "gemma3", qwen = a == "qwen2";
  GgufWriter g;
  g.KvString("general.architecture", a);
  g.Kv<uint32_t>(a + ".context_length", GgufType::kUint32, 32);
  g.Kv<uint32_t>(a + ".embedding_length", GgufType::kUint32, s.hidden);
  g.Kv<uint32_t>(a + ".block_count", GgufType::kUint32, 1);
  g.Kv<uint32_t>(a + ".feed_forward_length", GgufType::kUint32, s.ffn);
  g.Kv<uint32_t>(a + ".attention.head_count", GgufType::kUint32, s.heads);
  g.Kv<uint32_t>(a + ".attention.head_count_kv", GgufType::kUint32, s.kv_heads);
  g.Kv<uint32_t>(a + ".attention.key_length", GgufType::kUint32, s.head_dim);
  g.Kv<uint32_t>(a + ".attention.value_length", GgufType::kUint32, s.head_dim);
  g.Kv<float>(a + ".rope.freq_base", GgufType::kFloat32, 10000.0f);
  g.Kv<float>(a + ".attention.layer_norm_rms_epsilon", GgufType::kFloat32, 1e-5f);
  if (gemma) g.Kv<uint32_t>("gemma3.attention.sliding_window", GgufType::kUint32, 4);
  const uint32_t q = s.heads * s.head_dim, kv = s.kv_heads * s.head_dim;
  auto mat = [&](const std::string& name, uint32_t cols, uint32_t rows) {
    g.Tensor(name, {cols, rows}, s.type, Floats(size_t{cols} * rows, s.type, 0.0f));
  };
  auto vec = [&](const std::string& name, uint32_t n) { g.Tensor(name, {n}, 0, Floats(n, 0, 1.0f)); };
  mat("token_embd.weight", s.hidden, s.vocab);
  vec("output_norm.weight", s.hidden);
  const std::string p = "blk.0.";
  vec(p + "attn_norm.weight", s.hidden);
  mat(p + "attn_q.weight", s.hidden, q);
  mat(p + "attn_k.weight", s.hidden, kv);
  mat(p + "attn_v.weight", s.hidden, kv);
  if (qwen) {
    vec(p + "attn_q.bias", q);
    vec(p + "attn_k.bias", kv);
    vec(p + "attn_v.bias", kv);
  }
  mat(p + "attn_output.weight", q, s.hidden);
  vec(p + "ffn_norm.weight", s.hidden);
  mat(p + "ffn_gate.weight", s.hidden, s.ffn);
  mat(p + "ffn_up.weight", s.hidden, s.ffn);
  mat(p + "ffn_down.weight", s.ffn, s.hidden);
  if (gemma) {
    vec(p + "attn_q_norm.weight", s.head_dim);
    vec(p + "attn_k_norm.weight", s.head_dim);
    vec(p + "post_attention_norm.weight", s.hidden);
    vec(p + "post_ffw_norm.weight", s.hidden);
  }
  return AsString(g.Build());
}

void CheckModelLoads(const std::string& path, const std::string& what) {
  ModelOptions o;
  o.n_threads = 1;
  auto m = Must(Model::Load(path, o), what + " does not load");
  KVCache cache = m->NewCache();
  const std::vector<int32_t> tokens = {1, 2};
  (void)Must(m->Prefill(&cache, tokens), what + " does not prefill");
}

void ModelSeeds() {
  for (const auto& [name, shape] : std::vector<std::pair<std::string, TinyShape>>{
           {"llama_f32", {}}, {"qwen2_f32", {.arch = "qwen2"}}, {"gemma3_f32", {.arch = "gemma3"}},
           {"llama_f16", {.type = 1}}}) {
    const std::string bytes = TinyGguf(shape);
    const std::string path = Scratch(name + ".gguf");
    std::ofstream(path, std::ios::binary) << bytes;
    CheckModelLoads(path, name);
    Seed("gguf_model", name + ".gguf", bytes);
    Seed("gguf_file", name + ".gguf", bytes);
  }
  Seed("gguf_file", "rich.gguf", AsString(testing::MakeRichGguf()));
}

// A tokenizer-only GGUF: SPM (byte fallback, scores) or GPT-2 BPE (merges).
void TokenizerGgufSeeds() {
  {
    GgufWriter g;
    g.KvString("tokenizer.ggml.model", "llama");
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; b += 17) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      tokens.push_back(hex), scores.push_back(0), types.push_back(6);
    }
    for (const char* piece : {"\xe2\x96\x81", "\xe2\x96\x81H", "e", "l", "o", "ll", "llo", "\xe2\x96\x81w", "or", "d"}) {
      tokens.push_back(piece), scores.push_back(-static_cast<float>(tokens.size())), types.push_back(1);
    }
    g.KvStrings("tokenizer.ggml.tokens", tokens);
    g.KvArray<float>("tokenizer.ggml.scores", GgufType::kFloat32, scores);
    g.KvArray<int32_t>("tokenizer.ggml.token_type", GgufType::kInt32, types);
    g.Kv<uint32_t>("tokenizer.ggml.bos_token_id", GgufType::kUint32, 1);
    g.Kv<uint32_t>("tokenizer.ggml.eos_token_id", GgufType::kUint32, 2);
    const std::vector<uint8_t> b = g.Build();
    auto f = Must(GgufFile::Parse(b, "spm"), "spm seed");
    (void)Must(LoadTokenizerFromGguf(*f), "spm seed tokenizer");
    Seed("gguf_file", "spm_tokenizer.gguf", AsString(b));
  }
  {
    GgufWriter g;
    g.KvString("tokenizer.ggml.model", "gpt2");
    g.KvString("tokenizer.ggml.pre", "gpt-2");
    std::vector<std::string> tokens;
    // The GPT-2 byte-to-unicode map: printable bytes stand for themselves, the rest map to 256+.
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const int cp = printable ? b : 256 + extra++;
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xc0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3f));
      }
      tokens.push_back(s);
    }
    for (const char* t : {"he", "ll", "hell", "hello", "\xc4\xa0w"}) tokens.push_back(t);
    tokens.push_back("<|endoftext|>");
    std::vector<int32_t> types(tokens.size(), 1);
    types.back() = 3;
    g.KvStrings("tokenizer.ggml.tokens", tokens);
    g.KvArray<int32_t>("tokenizer.ggml.token_type", GgufType::kInt32, types);
    g.KvStrings("tokenizer.ggml.merges", {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"});
    g.Kv<uint32_t>("tokenizer.ggml.eos_token_id", GgufType::kUint32, static_cast<uint32_t>(tokens.size() - 1));
    const std::vector<uint8_t> b = g.Build();
    auto f = Must(GgufFile::Parse(b, "bpe"), "bpe seed");
    (void)Must(LoadTokenizerFromGguf(*f), "bpe seed tokenizer");
    Seed("gguf_file", "bpe_tokenizer.gguf", AsString(b));
  }
}

// ---- safetensors + config.json ----

std::string Safetensors(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, shape] : tensors) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    const std::vector<uint8_t> f = Floats(n, 0, name.find("norm") != std::string::npos ? 1.0f : 0.0f);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + f.size()}}};
    data.append(f.begin(), f.end());
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

void SafetensorsSeeds() {
  const int64_t vocab = 16, hidden = 8, heads = 2, kv_heads = 1, hd = 4, ffn = 8;
  const std::string config = nlohmann::json{
      {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", vocab},
      {"hidden_size", hidden}, {"intermediate_size", ffn}, {"num_hidden_layers", 1},
      {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"max_position_embeddings", 32},
      {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", true},
      {"hidden_act", "silu"}, {"torch_dtype", "float32"}, {"bos_token_id", 1}, {"eos_token_id", 2},
      {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}}}}.dump();
  const std::string p = "model.layers.0.";
  const std::string weights = Safetensors({
      {"model.embed_tokens.weight", {vocab, hidden}}, {"model.norm.weight", {hidden}},
      {p + "input_layernorm.weight", {hidden}}, {p + "post_attention_layernorm.weight", {hidden}},
      {p + "self_attn.q_proj.weight", {heads * hd, hidden}}, {p + "self_attn.k_proj.weight", {kv_heads * hd, hidden}},
      {p + "self_attn.v_proj.weight", {kv_heads * hd, hidden}}, {p + "self_attn.o_proj.weight", {hidden, heads * hd}},
      {p + "mlp.gate_proj.weight", {ffn, hidden}}, {p + "mlp.up_proj.weight", {ffn, hidden}},
      {p + "mlp.down_proj.weight", {hidden, ffn}}});
  const std::string dir = Scratch("hf");
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json") << config;
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << weights;
  CheckModelLoads(dir, "safetensors seed");
  Seed("safetensors", "llama3_rope", config + "\n--fak-safetensors--\n" + weights);
  for (const char* name : {"gemma", "qwen2", "llama_sharded"}) {
    Seed("safetensors", std::string(name) + "_config_only",
         ReadAll(std::string(FAK_TEST_DATA_DIR) + "/hf/" + name + "/config.json") + "\n--fak-safetensors--\n");
  }
}

// ---- tokenizer.json and tokenization ----

// tokens/merges of a test tokenizer.json cut down to `keep` entries past the byte alphabet.
std::string ShrinkTokenizerJson(const std::string& name, size_t keep_vocab, size_t keep_merges) {
  nlohmann::json j = nlohmann::json::parse(ReadAll(std::string(FAK_TEST_DATA_DIR) + "/hf/" + name));
  nlohmann::json& model = j["model"];
  nlohmann::json vocab = nlohmann::json::object();
  std::vector<std::pair<int64_t, std::string>> by_id;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) by_id.emplace_back(it.value().get<int64_t>(), it.key());
  std::sort(by_id.begin(), by_id.end());
  for (size_t i = 0; i < by_id.size() && i < keep_vocab; ++i) vocab[by_id[i].second] = by_id[i].first;
  nlohmann::json merges = nlohmann::json::array();
  for (const nlohmann::json& m : model["merges"]) {
    if (merges.size() >= keep_merges) break;
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      a = s.substr(0, s.find(' ')), b = s.substr(s.find(' ') + 1);
    } else {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();
    }
    if (vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) merges.push_back(m);
  }
  model["vocab"] = vocab;
  model["merges"] = merges;
  nlohmann::json added = nlohmann::json::array();
  for (const nlohmann::json& t : j["added_tokens"]) {
    if (t["id"].get<int64_t>() < static_cast<int64_t>(keep_vocab)) added.push_back(t);
  }
  j["added_tokens"] = added;
  const std::string out = j.dump();
  (void)Must(ParseHfTokenizer(out, {}, name), "shrunk " + name);
  return out;
}

void TokenizerSeeds() {
  Seed("hf_tokenizer", "bpe_gpt2", ShrinkTokenizerJson("bpe_gpt2.json", 300, 40));
  Seed("hf_tokenizer", "bpe_llama3", ShrinkTokenizerJson("bpe_llama3.json", 300, 40));
  Seed("hf_tokenizer", "bpe_qwen2_with_config",
       ShrinkTokenizerJson("bpe_qwen2.json", 290, 30) +
           "\n--fak-tokenizer-config--\n{\"add_bos_token\":true,\"bos_token\":\"<|endoftext|>\",\"eos_token\":\"<|im_end|>\"}");
  Seed("hf_tokenizer", "spm_gemma", ShrinkTokenizerJson("spm_gemma.json", 200, 20));
  // Tokenization: a few lines of the tests' texts for each of the target's six tokenizers.
  std::istringstream texts(ReadAll(std::string(FAK_TEST_DATA_DIR) + "/hf/texts.inp"));
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(texts, line)) {
    if (!line.empty() && line.size() < 300) lines.push_back(line);
  }
  for (size_t t = 0; t < 6; ++t) {
    for (size_t i = t; i < lines.size() && i < t + 12; i += 6) {
      Seed("tokenize", "t" + std::to_string(t) + "_" + std::to_string(i), std::string(1, static_cast<char>(t)) + lines[i]);
    }
  }
}

// ---- gate, audit, recall, store ----

void GateSeeds() {
  ModelConfig c = ModelConfig::EmbeddedDefault();
  auto model = Must(Model::Synthetic(c, 1), "synthetic model");
  auto tok = MakeByteTokenizer();
  KVCache cache = model->NewCache();
  const std::vector<int32_t> tokens = {'h', 'i', ' ', 'f', 'u', 'z', 'z'};
  (void)Must(model->Prefill(&cache, tokens), "prefill");
  BindingTuple b = Must(BindCacheSpan(*model, *tok, cache, 0, tokens.size()), "bind");
  KVManifest m = Must(MakeManifest(b, Digest::Of("hi fuzz"), "acme", Sharing::kPublicPrefix), "manifest");
  Seed("manifest_json", "manifest", std::string(1, '\0') + Must(m.ToJson(), "manifest json"));
  KVTransfer t;
  t.direction = TransferDirection::kOnload;
  t.source = KVTier::kRemoteStore;
  t.target = KVTier::kResidentMemory;
  t.manifest = m;
  Seed("manifest_json", "transfer", std::string(1, '\1') + Must(t.ToJson(), "transfer json"));
}

std::string TokenDer(TimestampAuthority& tsa, const Digest& digest) {
  const std::string resp = Must(tsa.Respond(Must(MakeTimestampRequest(digest), "ts request")), "ts respond");
  const unsigned char* p = reinterpret_cast<const unsigned char*>(resp.data());
  TS_RESP* r = d2i_TS_RESP(nullptr, &p, static_cast<long>(resp.size()));
  if (r == nullptr) Die("TS response does not parse");
  unsigned char* der = nullptr;
  const int n = i2d_PKCS7(TS_RESP_get_token(r), &der);
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  TS_RESP_free(r);
  return out;
}

void AuditSeeds() {
  const testing::TestPki& pki = testing::SharedTestPki();
  fs::create_directories(fs::path(g_root) / "data");
  std::ofstream(fs::path(g_root) / "data" / "tsa_root.pem") << pki.ca_cert_pem;
  auto tsa = Must(MakeLocalTimestampAuthority(pki.tsa_cert_pem, pki.tsa_key_pem, testing::kTestTsaPolicy), "tsa");
  const Digest anchor_digest = Digest::Of("fak fuzz time anchor");
  const std::string token = TokenDer(*tsa, anchor_digest);
  (void)Must(VerifyTimeAnchor(token, anchor_digest, pki.ca_cert_pem), "seed token");
  Seed("time_anchor", "token.der", token);

  const std::string path = Scratch("audit.journal");
  auto journal = Must(Journal::Open(path), "journal");
  for (int i = 0; i < 3; ++i) {
    (void)Must(journal->Append("deletion", Digest::Of(std::to_string(i)).Hex(), "{\"from\":3,\"len\":" + std::to_string(i + 1) + "}"),
               "append");
  }
  const std::string rows = ReadAll(path);
  Seed("audit_journal", "three_rows", rows);
  Seed("audit_journal", "torn_tail", rows.substr(0, rows.size() - 20));

  DeletionCertificate c;
  c.scope = std::string(internal::audit_format::kCertificateScope);
  c.subject = Digest::Of("secret");
  c.segment_id = "tool-1";
  c.span_from = 3, c.span_len = 2, c.evicted_count = 2;
  c.cache_digest_before = Digest::Of("before");
  c.cache_digest_after = c.never_saw_digest = Digest::Of("after");
  c.model_digest = Digest::Of("model");
  c.journal_seq = 1;
  c.journal_row_hash = journal->rows()[0].hash;
  c.issued_at_unix_us = 1700000000000000;
  SigningKey key = Must(SigningKey::Generate(), "key");
  Must(SignCertificate(&c, key), "sign");
  Seed("certificate", "signed", Must(c.ToJson(), "cert json"));
  Must(AnchorCertificate(&c, *tsa), "anchor");
  Seed("certificate", "anchored", Must(c.ToJson(), "anchored cert json"));
}

void RecallSeeds() {
  const std::string dir = Scratch("recall");
  auto store = Must(RecallStore::Open(dir), "recall store");
  const std::vector<RecallSegment> segs = {{"sys", SegmentKind::kSystem, "You are terse."},
                                           {"u1", SegmentKind::kUser, "hello"},
                                           {"t1", SegmentKind::kToolResult, "AKIAABCDEFGHIJKLMNOP"}};
  (void)Must(store->Save("chat-1", segs, ScreenChain::Default()), "save");
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".json") Seed("recall_image", e.path().filename().string(), ReadAll(e.path().string()));
  }
}

// A chunk of the blob_store target's input: tag, u16 LE length, bytes.
std::string Chunk(char tag, std::string_view body) {
  std::string out(1, tag);
  out += static_cast<char>(body.size() & 0xff);
  out += static_cast<char>(body.size() >> 8);
  return out.append(body);
}

void StoreSeeds() {
  const std::string dir = Scratch("store");
  {
    auto store = Must(OpenDirectoryBlobStore(dir), "store");
    const Digest small = Must(store->Put("inline text"), "put");
    Must(store->Pin(small), "pin");
    (void)Must(store->Put(std::string(300, 'x') + " a blob with a file of its own"), "put big");
    const Digest gone = Must(store->Put("removed"), "put");
    Must(store->Remove(gone), "remove");
  }
  std::string in;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), dir).string();
    if (rel == "journal") in += Chunk('J', ReadAll(e.path().string()));
    if (rel.starts_with("blobs/")) in += Chunk('B', ReadAll(e.path().string()));
  }
  Seed("blob_store", "written_by_store", in);
  // The structured form: header, an inline put, a pin count, a removal of another digest.
  std::string r = Chunk('H', "");
  r += Chunk('R', std::string("\x01\x00", 2) + "hello");
  r += Chunk('R', std::string("\x03\x00", 2) + std::string("\x02\x00\x00\x00", 4));
  r += Chunk('R', std::string("\x02\x01", 2));
  Seed("blob_store", "records", r);
}

// A slab file as the tier spiller writes it (one layer, one head, 3 tokens), once as written and
// once with the checksum-fixing mode bit (slab_file_fuzz.cc); and a damaged copy of each kind.
void SlabFileSeeds() {
  KVSlab slab;
  slab.shape = KVShape{1, 1, 4, 64};
  slab.start_position = 2;
  slab.tokens = {7, 8, 9};
  for (auto* t : {&slab.k, &slab.kraw, &slab.v}) {
    for (int i = 0; i < 12; ++i) {
      const float f = 0.25f * static_cast<float>(i) - 1.0f;
      const auto* b = reinterpret_cast<const std::byte*>(&f);
      t->insert(t->end(), b, b + sizeof(f));
    }
  }
  const std::vector<int32_t> context{1, 2, 7, 8, 9};
  BindingTuple b;
  b.model_id = Digest::Of("model");
  b.tokenizer_id = Digest::Of("tokenizer");
  b.precision = Precision{"f32", "f32", "scalar"};
  b.position = PositionConvention{"rope", "adjacent", 10000, "none"};
  b.producer = Producer{"fak", "0.1.0", "fuzz seed"};
  b = Must(BindSpan(b, context, 2, 3), "bind span");
  b.integrity_checksum = KVSlabChecksum(slab);
  const std::vector<SourceSpan> sources{SourceSpan{2, 3, Digest::Of("text")}};
  const KVManifest m = Must(MakeManifest(b, SourceSetDigest(sources, 2, 3, b.span_digest), "acme"), "slab manifest");
  const std::string file = Must(EncodeSlabFile(m, sources, slab), "encode slab");
  (void)Must(DecodeSlabFile(file), "decode slab seed");
  Seed("slab_file", "slab", std::string(1, '\0') + file);
  Seed("slab_file", "slab_fixed", std::string(1, '\1') + file);
  Seed("slab_file", "slab_unhashed_kv", std::string(1, '\3') + file);
  std::string damaged = file;
  damaged[damaged.size() - 3] ^= 0x40;  // a bit of V
  Seed("slab_file", "damaged_kv", std::string(1, '\0') + damaged);
  Seed("slab_file", "truncated", std::string(1, '\1') + file.substr(0, file.size() - 10));
}

// Replies fak's Redis clients receive (GET, SMEMBERS, SCAN, HGETALL, EVAL, errors), fed in pieces
// of 7 bytes (first byte 6) or at once with the small limits (first byte 64 + 63).
void RedisReplySeeds() {
  const std::pair<const char*, std::string> replies[] = {
      {"status", "+PONG\r\n+OK\r\n"},
      {"get", "$11\r\n12 3 10000\r\n$-1\r\n"},
      {"smembers", "*3\r\n$2\r\n17\r\n$3\r\n256\r\n$1\r\n9\r\n"},
      {"scan", "*2\r\n$1\r\n0\r\n*2\r\n$9\r\nfak:b:abc\r\n$9\r\nfak:b:def\r\n"},
      {"hgetall", "*4\r\n$5\r\nstate\r\n$6\r\nsealed\r\n$2\r\nat\r\n$13\r\n1700000000000\r\n"},
      {"errors", "-OOM command not allowed\r\n-WRONGTYPE Operation\r\n:0\r\n:-1\r\n*-1\r\n*0\r\n"},
  };
  for (const auto& [name, bytes] : replies) {
    Seed("redis_reply", name, std::string(1, '\x06') + bytes);
    Seed("redis_reply", std::string(name) + "_small_limits", std::string(1, '\x7f') + bytes);
  }
}

}  // namespace
}  // namespace fak

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fak_fuzz_seeds <repo>/fuzz\n");
    return 2;
  }
  fak::g_root = argv[1];
  fak::ModelSeeds();
  fak::TokenizerGgufSeeds();
  fak::SafetensorsSeeds();
  fak::TokenizerSeeds();
  fak::GateSeeds();
  fak::AuditSeeds();
  fak::RecallSeeds();
  fak::StoreSeeds();
  fak::SlabFileSeeds();
  fak::RedisReplySeeds();
  std::printf("fak_fuzz_seeds: wrote %s/corpus and %s/data\n", argv[1], argv[1]);
  return 0;
}
