// Embedding fak: load the embedded model, generate a few tokens, evict a named span exactly and
// print the digests that prove what the cache now holds. Public headers only.
#include <cstdio>
#include <string>

#include "fak/fak.h"

static int Fail(const fak::Status& status) {
  std::fprintf(stderr, "fak_embed: %s\n", status.ToString().c_str());
  return 1;
}

int main() {
  auto model = fak::Model::Synthetic(fak::ModelConfig::EmbeddedDefault(), /*seed=*/2026);
  if (!model) return Fail(model.error());
  auto tokenizer = fak::MakeByteTokenizer();

  // Two named spans over one cache: an instruction, then a tool result we will take back.
  fak::SegmentLedger ledger(**model);
  const std::string texts[] = {"You are a terse assistant.", "tool: the door code is 4921"};
  const char* ids[] = {"system", "tool"};
  for (int i = 0; i < 2; ++i) {
    auto tokens = tokenizer->Encode(texts[i]);
    if (!tokens) return Fail(tokens.error());
    auto appended = ledger.Append({ids[i], fak::SegmentKind::kUser, *tokens, fak::Digest::Of(texts[i])});
    if (!appended) return Fail(appended.error());
  }

  // Generate a few tokens from a copy of the context (the ledger's cache stays as it is).
  fak::KVCache session = ledger.cache().Clone();
  auto prompt = tokenizer->Encode("\nQ: ");
  if (!prompt) return Fail(prompt.error());
  fak::GenerateParams params;
  params.max_new_tokens = 8;
  auto generated = fak::Generate(**model, &session, *prompt, params);
  if (!generated) return Fail(generated.error());
  std::printf("generated %zu tokens after %zu context tokens\n", generated->tokens.size(), ledger.cache().size());

  // Evict the tool result by name. It is the tail, so the removal is exact: the cache now equals
  // one that never saw it.
  auto report = ledger.Evict("tool");
  if (!report) return Fail(report.error());
  std::printf("evicted span '%s': %zu tokens at %zu, exact: %s\n", report->segment_id.c_str(), report->n_evicted,
              report->from, report->exact ? "yes" : "no");
  std::printf("span source digest  %s\n", fak::Digest::Of(texts[1]).Hex().c_str());
  std::printf("cache digest after  %s\n", report->cache_digest_after.Hex().c_str());
  return report->exact ? 0 : 1;
}
