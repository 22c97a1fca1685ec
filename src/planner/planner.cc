// Planner: prepare (render, seal, tokenize), reuse (tree + gate), append (screen, evict, certify),
// decode, and give the context back to the tree.
#include "fak/planner/planner.h"

#include <algorithm>
#include <mutex>

#include "fak/core/env.h"
#include "fak/session/certify_eviction.h"
#include "src/core/json.h"
#include "src/core/str_cat.h"

namespace fak {
namespace {

int64_t NowNanos() { return Env::Default()->NowMonotonicNanos(); }

}  // namespace

struct Planner::Prepared {
  std::vector<SegmentSpec> specs;  // one per message, then the generation prompt
  std::vector<int32_t> context;
};

Planner::Planner(const Model& model, const Tokenizer& tokenizer, SigningKey key, BlobStore& blobs,
                 std::shared_ptr<const ChatTemplate> chat_template, std::shared_ptr<const ScreenChain> chain,
                 std::unique_ptr<Journal> journal, PlannerOptions options)
    : key_(std::move(key)), shared_texts_(blobs),
      tenant_store_(options.tenant_store),
      chain_(std::move(chain)), journal_(std::move(journal)),
      owned_tree_(options.engine != nullptr ? nullptr : std::make_unique<RadixTree>(model, tokenizer, options.tree)),
      backend_(std::make_shared<const Backend>(Backend{&model, &tokenizer, options.engine, std::move(chat_template), nullptr})),
      denied_kv_sweep_interval_ns_(options.denied_kv_sweep_interval_ns), last_denied_kv_sweep_ns_(NowNanos()) {}

PlannerStats Planner::Stats() const {
  return PlannerStats{page_ins_.load(), paged_tokens_.load(), page_in_refusals_.load()};
}

Result<std::unique_ptr<Planner>> Planner::Create(const Model& model, const Tokenizer& tokenizer, SigningKey key,
                                                 BlobStore& blobs, PlannerOptions options) {
  if (options.journal_path.empty()) return InvalidArgument("PlannerOptions.journal_path is empty");
  if (tokenizer.vocab_size() > model.config().vocab_size) {
    return InvalidArgument("tokenizer vocabulary " + std::to_string(tokenizer.vocab_size()) + " exceeds the model's " +
                           std::to_string(model.config().vocab_size));
  }
  std::shared_ptr<const ChatTemplate> chat_template = options.chat_template;
  if (!chat_template) {
    // Only the embedded model has an obvious template (its own); any other model's comes from its
    // file, and guessing one would make every turn subtly wrong.
    if (tokenizer.kind() != "byte") {
      return InvalidArgument("PlannerOptions.chat_template is required for a '" + std::string(tokenizer.kind()) +
                             "' tokenizer (ChatTemplate::ForModel reads the model's own)");
    }
    FAK_ASSIGN_OR_RETURN(ChatTemplate fak_family, ChatTemplate::ForFamily("fak", tokenizer));
    chat_template = std::make_shared<const ChatTemplate>(std::move(fak_family));
  }
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal, Journal::Open(options.journal_path));
  if (options.denied_kv_sweep_interval_ns < 0) return InvalidArgument("PlannerOptions.denied_kv_sweep_interval_ns is negative");
  auto chain = options.chain ? options.chain : std::make_shared<const ScreenChain>(ScreenChain::Default());
  KVPager* const pager = options.pager;
  std::unique_ptr<Planner> planner(new Planner(model, tokenizer, std::move(key), blobs, std::move(chat_template),
                                               std::move(chain), std::move(journal), std::move(options)));
  if (planner->backend_->engine == nullptr) {
    // Its own engine over its own tree: turns still run batched with each other.
    EngineOptions engine_options;
    planner->owned_tree_->SetPager(pager);
    engine_options.tree = planner->owned_tree_.get();
    FAK_ASSIGN_OR_RETURN(planner->owned_engine_, Engine::Create(model, tokenizer, std::move(engine_options)));
    planner->backend_ = std::make_shared<const Backend>(
        Backend{&model, &tokenizer, planner->owned_engine_.get(), planner->backend_->chat_template, nullptr});
  }
  return planner;
}

std::shared_ptr<const Planner::Backend> Planner::Current() const {
  std::lock_guard<std::mutex> lock(backend_mu_);
  return backend_;
}

void Planner::SwitchEngine(const Model& model, const Tokenizer& tokenizer, Engine& engine,
                           std::shared_ptr<const ChatTemplate> chat_template, std::shared_ptr<const void> keep_alive) {
  std::lock_guard<std::mutex> lock(backend_mu_);
  if (chat_template == nullptr) chat_template = backend_->chat_template;
  backend_ = std::make_shared<const Backend>(
      Backend{&model, &tokenizer, &engine, std::move(chat_template), std::move(keep_alive)});
}

ChatRole Planner::RoleOf(SegmentKind kind) {
  switch (kind) {
    case SegmentKind::kSystem: return ChatRole::kSystem;
    case SegmentKind::kUser: return ChatRole::kUser;
    case SegmentKind::kToolResult: return ChatRole::kTool;
    case SegmentKind::kAssistant: return ChatRole::kAssistant;
  }
  return ChatRole::kUser;
}

Result<std::vector<SegmentSpec>> Planner::Segments(const Backend& b, const std::vector<RecallSegment>& transcript,
                                                  bool reply) const {
  std::vector<ChatMessage> messages;
  for (const RecallSegment& seg : transcript) messages.push_back(ChatMessage{RoleOf(seg.kind), seg.text});
  FAK_ASSIGN_OR_RETURN(RenderedChat rendered, b.chat_template->Render(messages, reply));
  const std::vector<std::string> pieces = rendered.Pieces();
  // Each piece is tokenized on its own: segment boundaries are token boundaries, so a span can
  // be evicted exactly and earlier turns keep their ids as the conversation grows. A message's
  // own text never becomes a special token (it cannot forge a turn).
  FAK_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> piece_ids, EncodePieces(*b.tokenizer, rendered));
  std::vector<SegmentSpec> specs;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool is_reply = i == transcript.size();
    if (is_reply && !reply) break;
    const std::string id = is_reply ? "reply" : transcript[i].id;
    if (piece_ids[i].empty()) return InvalidArgument("message " + id + " renders to no tokens");
    specs.push_back(SegmentSpec{id, is_reply ? SegmentKind::kAssistant : transcript[i].kind, std::move(piece_ids[i]),
                                Digest::Of(pieces[i])});
  }
  return specs;
}

std::string Planner::SealedStub(const Digest& digest) { return fak::SealedStub(digest); }

Result<std::vector<RecallSegment>> Planner::Transcript(const Conversation& conversation) const {
  std::vector<bool> sealed;
  for (const Message& m : conversation.messages) {
    FAK_ASSIGN_OR_RETURN(bool listed, IsSealed(conversation.tenant, Digest::Of(m.text)));
    sealed.push_back(listed);
  }
  return TranscriptOf(conversation, sealed);
}

std::vector<RecallSegment> Planner::TranscriptOf(const Conversation& conversation, const std::vector<bool>& sealed) {
  std::vector<RecallSegment> out;
  for (size_t i = 0; i < conversation.messages.size(); ++i) {
    const Message& m = conversation.messages[i];
    const std::string text = sealed[i] ? SealedStub(Digest::Of(m.text)) : m.text;
    out.push_back(RecallSegment{internal::StrCat("m", std::to_string(i)), m.kind, text});
  }
  return out;
}

Result<bool> Planner::IsSealed(std::string_view tenant, const Digest& digest) const {
  Result<bool> listed = IsSealedFor(chain_->denylist(), tenant, digest);
  if (!listed.has_value()) {
    return listed.error().WithContext("the denylist cannot say whether " + digest.Hex() +
                                      " is sealed; nothing was admitted or recorded, retry later");
  }
  return listed;
}

Result<EvictedSubtree> Planner::EvictDeniedKV() {
  EvictedSubtree out;
  const std::shared_ptr<const Backend> b = Current();
  RadixTree& tree = b->engine->tree();
  for (const Digest& source : tree.Sources()) {
    // Quarantines (listed for every tenant); a tenant's erasure evicted its KV when it was made.
    Result<bool> denied = chain_->denylist().IsQuarantined(source);
    if (!denied.has_value()) return denied.error().WithContext("the denylist cannot be asked now; retry later");
    if (!*denied) continue;
    const EvictedSubtree gone = tree.EvictSource(source);
    out.n_nodes += gone.n_nodes;
    out.n_tokens += gone.n_tokens;
    out.span_digests.insert(out.span_digests.end(), gone.span_digests.begin(), gone.span_digests.end());
  }
  return out;
}

Result<DeletionCertificate> Planner::EvictMessage(const Conversation& conversation, size_t index,
                                                  std::string_view reason, std::string_view session) {
  if (!IsValidTenant(conversation.tenant)) return InvalidArgument("EvictMessage: invalid tenant '" + conversation.tenant + "'");
  const size_t n = conversation.messages.size();
  if (index >= n) {
    return InvalidArgument("EvictMessage: message " + std::to_string(index) + " is past the end; the conversation has " +
                           std::to_string(n) + " messages");
  }
  const std::string& tenant = conversation.tenant;
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(tenant));
  const std::shared_ptr<const Backend> b = Current();
  std::vector<bool> sealed;
  for (const Message& m : conversation.messages) {
    FAK_ASSIGN_OR_RETURN(const bool listed, IsSealed(tenant, Digest::Of(m.text)));
    sealed.push_back(listed);
  }
  const Digest d = Digest::Of(conversation.messages[index].text);
  if (sealed[index]) return FailedPrecondition("EvictMessage: message " + std::to_string(index) + " (" + d.Hex() + ") is sealed already");
  // The other texts are stored as Complete stores them (e.g. the last reply, not yet sent back), so
  // the session's pins can be renewed below.
  for (size_t i = 0; i < n; ++i) {
    if (i != index && !sealed[i]) FAK_RETURN_IF_ERROR(texts->corpus.PutSource(conversation.messages[i].text).status());
  }
  // The conversation as the next Complete would hold it (without the reply header), then the
  // message cut out of the middle: the later segments are re-prefilled, so the removal is exact.
  FAK_ASSIGN_OR_RETURN(std::vector<SegmentSpec> specs, Segments(*b, TranscriptOf(conversation, sealed), /*reply=*/false));
  specs[index].source_digest = d;  // the subject the denylist and the stub name, as AppendNew does
  SegmentLedger ledger(*b->model);
  for (const SegmentSpec& spec : specs) FAK_RETURN_IF_ERROR(ledger.Append(spec).status());
  FAK_ASSIGN_OR_RETURN(const EvictionReport report, ledger.Evict(specs[index].id, Repair::kRecomputeTail));
  IssueOptions issue;
  issue.reason = reason.empty() ? std::string("user request") : "user request: " + std::string(reason);
  // Sealed first, for this tenant only (another tenant's messages with the same text stay theirs):
  // an unreachable denylist leaves no journal row or certificate.
  FAK_RETURN_IF_ERROR(chain_->denylist().Add(TenantSealKey(tenant, d), issue.reason).WithContext(
      "message " + std::to_string(index) + " cannot be sealed now; nothing was recorded, retry later"));
  sealed[index] = true;
  // The text and its KV go before the deletion is journaled: a failure here leaves it sealed (never
  // served again) but records no deletion that did not happen; evicting it again finishes the job.
  FAK_RETURN_IF_ERROR(HoldTexts(conversation, session, sealed));
  FAK_RETURN_IF_ERROR(EraseSource(tenant, d));
  (void)b->engine->tree().EvictSource(d, tenant);
  std::lock_guard<std::mutex> lock(audit_mu_);
  return IssueDeletionCertificate(*b->model, ledger, specs[index], report, journal_.get(), key_, issue);
}

Result<ScreenedChat> Planner::ScreenChat(std::string_view tenant, std::span<const ChatMessage> messages, bool screen_user) {
  if (!IsValidTenant(tenant)) return InvalidArgument("ScreenChat: invalid tenant '" + std::string(tenant) + "'");
  ScreenedChat out;
  out.messages.assign(messages.begin(), messages.end());
  for (size_t i = 0; i < messages.size(); ++i) {
    MessageOutcome o;
    o.source_digest = Digest::Of(messages[i].content);
    FAK_ASSIGN_OR_RETURN(o.sealed, IsSealed(tenant, o.source_digest));
    const bool screen = messages[i].role == ChatRole::kTool || (screen_user && messages[i].role == ChatRole::kUser);
    if (!o.sealed && screen) {
      const SegmentKind kind = messages[i].role == ChatRole::kTool ? SegmentKind::kToolResult : SegmentKind::kUser;
      o.verdict = chain_->Screen(ScreenInput{messages[i].content, kind, o.source_digest});
      if (o.verdict.unavailable()) {
        return Unavailable("message " + std::to_string(i) + " (" + o.source_digest.Hex() + ") cannot be screened now: " +
                           o.verdict.detector + ": " + o.verdict.reason + "; nothing was sealed, retry later");
      }
    }
    out.outcomes.push_back(std::move(o));
  }
  // Sealed after every message was judged, so an Unavailable above seals nothing.
  for (size_t i = 0; i < messages.size(); ++i) {
    MessageOutcome& o = out.outcomes[i];
    if (o.verdict.quarantined() && !o.sealed) {
      const std::string reason = o.verdict.detector + ": " + o.verdict.reason;
      FAK_RETURN_IF_ERROR(chain_->denylist().Add(o.source_digest, reason).WithContext(
          "message " + std::to_string(i) + " was quarantined but cannot be sealed now; retry later"));
      {
        std::lock_guard<std::mutex> lock(audit_mu_);
        const internal::Json payload = {{"path", "engine"}, {"reason", reason}, {"tenant", tenant}};
        FAK_RETURN_IF_ERROR(journal_->Append("quarantine", o.source_digest.Hex(), internal::DumpJson(payload)).status());
      }
      FAK_RETURN_IF_ERROR(EraseSource(tenant, o.source_digest));
      (void)tree().EvictSource(o.source_digest);  // a quarantine: every tenant's copy
      o.sealed = true;
      out.newly_sealed.push_back(o.source_digest);
    }
    if (o.sealed) out.messages[i].content = SealedStub(o.source_digest);
  }
  return out;
}

Result<ErasureReport> Planner::EraseText(std::string_view tenant, const Digest& digest, std::string_view reason) {
  if (!IsValidTenant(tenant)) return InvalidArgument("EraseText: invalid tenant '" + std::string(tenant) + "'");
  ErasureReport report;
  report.source_digest = digest;
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(tenant));
  FAK_ASSIGN_OR_RETURN(const bool sealed, IsSealed(tenant, digest));
  const std::string why = reason.empty() ? std::string("user request") : "user request: " + std::string(reason);
  if (!sealed) {
    // For this tenant only: another tenant's messages with the same text stay theirs.
    FAK_RETURN_IF_ERROR(chain_->denylist().Add(TenantSealKey(tenant, digest), why)
                            .WithContext("the text cannot be sealed now; nothing was erased, retry later"));
    report.newly_sealed = true;
  }
  report.tree_tokens = tree().EvictSource(digest, tenant).n_tokens;
  if (Status s = texts->corpus.RemoveSource(digest); s.ok()) {
    report.text_erased = true;
  } else if (s.code() != StatusCode::kNotFound) {
    return s.WithContext("erasing " + digest.Hex() + " from the text store (it is sealed and its KV evicted; erase it again)");
  }
  const internal::Json payload = {{"reason", why}, {"tenant", tenant}, {"text_erased", report.text_erased},
                                  {"tree_tokens", report.tree_tokens}};
  std::lock_guard<std::mutex> lock(audit_mu_);
  FAK_ASSIGN_OR_RETURN(JournalRow row, journal_->Append("erasure", digest.Hex(), internal::DumpJson(payload)));
  report.journal_seq = row.seq;
  return report;
}

Result<DeletionCertificate> Planner::CertifyErasure(uint64_t journal_seq) const {
  std::lock_guard<std::mutex> lock(audit_mu_);
  FAK_ASSIGN_OR_RETURN(JournalRow row, journal_->Row(journal_seq));
  return fak::CertifyErasure(row, key_);
}

Status Planner::RecordFleetConfirmations(DeletionCertificate* cert, std::string event, std::vector<std::string> confirmed) const {
  return AddFleetConfirmations(cert, std::move(event), std::move(confirmed), key_);
}

CertificateCheck Planner::VerifyCertificate(const DeletionCertificate& cert, const CertificateVerifyOptions& options) const {
  const PublicKey trusted[] = {key_.public_key()};
  std::lock_guard<std::mutex> lock(audit_mu_);
  return VerifyDeletionCertificate(cert, journal_->rows(), trusted, options);
}

Result<Planner::Texts*> Planner::TextsOf(std::string_view tenant) {
  if (!tenant_store_) return &shared_texts_;
  std::lock_guard<std::mutex> lock(texts_mu_);
  auto it = tenant_texts_.find(tenant);
  if (it != tenant_texts_.end()) return it->second.get();
  Result<std::unique_ptr<BlobStore>> store = tenant_store_(tenant);
  if (!store.has_value()) return store.error().WithContext("opening the text store of tenant '" + std::string(tenant) + "'");
  if (*store == nullptr) return FailedPrecondition("PlannerOptions::tenant_store gave no store for tenant '" + std::string(tenant) + "'");
  auto texts = std::make_unique<Texts>(std::move(*store));
  Texts* out = texts.get();
  tenant_texts_.emplace(std::string(tenant), std::move(texts));
  return out;
}

Result<TextCorpus*> Planner::corpus(std::string_view tenant) {
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(tenant));
  return &texts->corpus;
}

Status Planner::EraseSource(std::string_view tenant, const Digest& digest) {
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(tenant));
  Status s = texts->corpus.RemoveSource(digest);
  if (s.code() == StatusCode::kNotFound) return Status::Ok();
  return s.WithContext("erasing sealed content " + digest.Hex() + " from the text store");
}

Status Planner::HoldTexts(const Conversation& conversation, std::string_view session, const std::vector<bool>& sealed) {
  if (session.empty()) return Status::Ok();
  TranscriptRef held{std::string(session), {}, conversation.tenant};
  for (size_t i = 0; i < conversation.messages.size(); ++i) {
    if (!sealed[i]) held.segments.push_back(Digest::Of(conversation.messages[i].text));
  }
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(conversation.tenant));
  return texts->pins.Hold(held).WithContext("pinning the texts of session '" + std::string(session) + "'");
}

Status Planner::ReleaseSession(std::string_view tenant, std::string_view session) {
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(tenant));
  return texts->pins.Release(tenant, session);
}

Result<SegmentLedger> Planner::Rebuild(const RecalledTranscript& transcript) const {
  std::vector<RecallSegment> segments;
  for (const RecalledSegment& seg : transcript.segments) {
    segments.push_back(RecallSegment{seg.id, seg.kind, seg.current.quarantined() ? SealedStub(seg.source_digest) : seg.text});
  }
  const std::shared_ptr<const Backend> b = Current();
  FAK_ASSIGN_OR_RETURN(std::vector<SegmentSpec> specs, Segments(*b, segments, /*reply=*/false));
  SegmentLedger ledger(*b->model);
  for (SegmentSpec& spec : specs) FAK_RETURN_IF_ERROR(ledger.Append(std::move(spec)).status());
  return ledger;
}

Result<Planner::Prepared> Planner::Prepare(const Backend& b, const Conversation& conversation,
                                           const std::vector<bool>& sealed) const {
  Prepared p;
  FAK_ASSIGN_OR_RETURN(p.specs, Segments(b, TranscriptOf(conversation, sealed), /*reply=*/true));
  for (const SegmentSpec& spec : p.specs) p.context.insert(p.context.end(), spec.tokens.begin(), spec.tokens.end());
  return p;
}

Result<DeletionCertificate> Planner::CertifyQuarantine(const Backend& b, const Conversation& conversation,
                                                       const std::vector<bool>& sealed,
                                                       size_t index, const std::string& reason) {
  FAK_ASSIGN_OR_RETURN(std::vector<SegmentSpec> specs, Segments(b, TranscriptOf(conversation, sealed), /*reply=*/false));
  // The subject is the message text as given, not its rendering: it names the digest the denylist
  // and the stub carry (the rendered tokens are bound by the journal row's tokens_digest).
  specs[index].source_digest = Digest::Of(conversation.messages[index].text);
  SegmentLedger ledger(*b.model);
  for (size_t i = 0; i <= index; ++i) FAK_RETURN_IF_ERROR(ledger.Append(specs[i]).status());
  FAK_ASSIGN_OR_RETURN(const EvictionReport report, ledger.Evict(specs[index].id));
  IssueOptions issue;
  issue.reason = reason;
  std::lock_guard<std::mutex> lock(audit_mu_);
  return IssueDeletionCertificate(*b.model, ledger, specs[index], report, journal_.get(), key_, issue);
}

Status Planner::ScreenToolResults(const Backend& b, const Conversation& conversation, std::string_view session, std::vector<bool>& sealed,
                                  CompleteResult* out) {
  std::vector<size_t> quarantined;
  for (size_t j = 0; j < conversation.messages.size(); ++j) {
    if (conversation.messages[j].kind != SegmentKind::kToolResult || sealed[j]) continue;
    MessageOutcome& m = out->messages[j];
    m.verdict = chain_->Screen(ScreenInput{conversation.messages[j].text, SegmentKind::kToolResult, m.source_digest});
    if (m.verdict.unavailable()) {
      // Undecided, not bad: the turn does not run, nothing is certified or sealed; retry later.
      return Unavailable("message m" + std::to_string(j) + " (" + m.source_digest.Hex() + ") withheld this turn: " +
                         m.verdict.detector + ": " + m.verdict.reason);
    }
    if (m.verdict.quarantined()) quarantined.push_back(j);
  }
  for (size_t j : quarantined) {
    MessageOutcome& m = out->messages[j];
    const std::string reason = m.verdict.detector + ": " + m.verdict.reason;
    // Denied first: an unreachable denylist leaves no journal row and no certificate. It may be
    // remote, so it is asked outside the journal's lock.
    FAK_RETURN_IF_ERROR(chain_->denylist().Add(m.source_digest, reason).WithContext(
        "message m" + std::to_string(j) + " was quarantined but cannot be sealed now; nothing was recorded, retry later"));
    FAK_ASSIGN_OR_RETURN(DeletionCertificate cert, CertifyQuarantine(b, conversation, sealed, j, reason));
    out->certificates.push_back(std::move(cert));
    m.sealed = true;
    sealed[j] = true;
    // Stored (and pinned) before it was screened; no plaintext may stay behind, nor KV of the same
    // text from an earlier request.
    FAK_RETURN_IF_ERROR(HoldTexts(conversation, session, sealed));
    FAK_RETURN_IF_ERROR(EraseSource(conversation.tenant, m.source_digest));
    (void)b.engine->tree().EvictSource(m.source_digest);
  }
  return Status::Ok();
}

Status Planner::Run(const Backend& b, const Conversation& conversation, const Prepared& p, const CompleteParams& params,
                    CompleteResult* out) {
  const size_t limit = b.model->config().context_length;
  if (p.context.size() > limit) {
    return ResourceExhausted("Complete: the conversation is " + std::to_string(p.context.size()) +
                             " tokens; the model's context is " + std::to_string(limit));
  }
  EngineRequest request;
  request.tenant = conversation.tenant;
  request.prompt = p.context;
  // Each message's tokens are tagged with its text's digest, so a later denial can evict them; a
  // sealed message's stub carries none.
  for (size_t j = 0, from = 0; j < p.specs.size(); from += p.specs[j++].tokens.size()) {
    if (j < out->messages.size() && !out->messages[j].sealed) {
      request.sources.push_back(SourceSpan{from, p.specs[j].tokens.size(), out->messages[j].source_digest});
    }
  }
  request.sampling = params.generate.sampling;
  request.constraint = params.generate.constraint;
  // Generation stops at the end of the context rather than being refused.
  request.max_tokens = std::min(params.generate.max_new_tokens, limit + 1 - p.context.size());
  request.stop_tokens = params.generate.stop_tokens;
  if (request.stop_tokens.empty()) request.stop_tokens = EndOfGenerationTokens(*b.tokenizer, b.chat_template.get());
  request.stop_strings = params.stop;
  if (params.on_text) {
    request.on_token = [&on_text = params.on_text](const TokenEvent& event) {
      return event.text.empty() || on_text(event.text);
    };
  }
  FAK_ASSIGN_OR_RETURN(const RequestId id, b.engine->Submit(std::move(request)));
  Result<EngineResult> waited =
      params.cancelled ? std::move(WaitUnlessCancelled(*b.engine, {&id, 1}, params.cancelled)[0]) : b.engine->Wait(id);
  FAK_ASSIGN_OR_RETURN(EngineResult r, std::move(waited));
  if (r.finish == FinishReason::kError) return r.error;
  out->text = std::move(r.text);
  out->generated = std::move(r.tokens);
  out->finish = r.finish;
  out->reused_tokens = r.usage.cached_tokens;
  out->paged_tokens = r.usage.paged_tokens;
  out->prefilled_tokens = p.context.size() - std::min(p.context.size(), r.usage.cached_tokens);
  out->page_in = IsPageInRefusal(r.usage.page_in_failure) ? r.usage.page_in_failure : PageInFailure::kNone;
  for (size_t j = 0, end = 0; j < out->messages.size(); ++j) {
    end += p.specs[j].tokens.size();
    out->messages[j].reused = end <= r.usage.cached_tokens;
  }
  const RequestTimings& t = r.timings;
  const int64_t first = t.first_token_ns > 0 ? t.first_token_ns : t.finished_ns;
  out->prefill_ms = static_cast<double>(first - t.submitted_ns) / 1e6;
  out->decode_ms = static_cast<double>(t.finished_ns - first) / 1e6;
  page_ins_.fetch_add(r.usage.page_ins, std::memory_order_relaxed);
  paged_tokens_.fetch_add(r.usage.paged_tokens, std::memory_order_relaxed);
  if (IsPageInRefusal(r.usage.page_in_failure)) page_in_refusals_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Result<CompleteResult> Planner::Complete(const Conversation& conversation, const CompleteParams& params) {
  if (conversation.messages.empty()) return InvalidArgument("Complete: the conversation has no messages");
  if (!IsValidTenant(conversation.tenant)) return InvalidArgument("Complete: invalid tenant '" + conversation.tenant + "'");
  // A denylist entry made since the last sweep must also stop the KV already held for that text.
  const int64_t now = NowNanos();
  int64_t last = last_denied_kv_sweep_ns_.load();
  if (now - last >= denied_kv_sweep_interval_ns_ && last_denied_kv_sweep_ns_.compare_exchange_strong(last, now)) {
    FAK_RETURN_IF_ERROR(EvictDeniedKV().status());
  }
  CompleteResult out;
  FAK_ASSIGN_OR_RETURN(Texts* texts, TextsOf(conversation.tenant));
  std::vector<bool> sealed_now;
  for (const Message& m : conversation.messages) {
    const Digest d = Digest::Of(m.text);
    FAK_ASSIGN_OR_RETURN(const bool sealed, IsSealed(conversation.tenant, d));
    if (!sealed) FAK_RETURN_IF_ERROR(texts->corpus.PutSource(m.text).status());
    sealed_now.push_back(sealed);
    out.messages.push_back(MessageOutcome{d, sealed ? Verdict::Quarantine("denylist", "sealed earlier") : Verdict::Admit(), sealed, false});
  }
  // Pinned first (which also unpins a text sealed since the last turn), then sealed text erased:
  // it is never stored again, and erasing here also finishes an erasure that failed after sealing.
  FAK_RETURN_IF_ERROR(HoldTexts(conversation, params.session, sealed_now));
  for (const MessageOutcome& m : out.messages) {
    if (m.sealed) FAK_RETURN_IF_ERROR(EraseSource(conversation.tenant, m.source_digest));
  }
  // Screened by their text before any of it is prefilled; a quarantined one becomes its stub.
  // One engine for the whole turn, even if SwitchEngine runs meanwhile.
  const std::shared_ptr<const Backend> b = Current();
  FAK_RETURN_IF_ERROR(ScreenToolResults(*b, conversation, params.session, sealed_now, &out));
  FAK_ASSIGN_OR_RETURN(const Prepared p, Prepare(*b, conversation, sealed_now));
  out.context_tokens = p.context.size();
  // The gate's verdict on what the tree holds of the context for this tenant (read-only: the
  // engine's own lookup serves it).
  RadixTree& tree = b->engine->tree();
  out.gate = tree.ProbeGate(tree.ClaimFor(conversation.tenant), p.context, conversation.tenant).verdict;
  FAK_RETURN_IF_ERROR(Run(*b, conversation, p, params, &out));
  return out;
}

}  // namespace fak
