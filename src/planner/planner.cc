// Planner: prepare (render, seal, tokenize), reuse (tree + gate), append (screen, evict, certify),
// decode, and give the context back to the tree.
#include "fak/planner/planner.h"

#include <algorithm>

#include "fak/core/env.h"
#include "fak/regen/page_in.h"
#include "fak/session/certify_eviction.h"
#include "fak/tokenizer/text_stream.h"
#include "src/core/str_cat.h"

namespace fak {
namespace {

int64_t NowNanos() { return Env::Default()->NowMonotonicNanos(); }
double MsSince(int64_t t0_ns) { return static_cast<double>(NowNanos() - t0_ns) / 1e6; }

}  // namespace

struct Planner::Prepared {
  std::vector<SegmentSpec> specs;  // one per message, then the generation prompt
  std::vector<int32_t> context;
};

Planner::Planner(const Model& model, const Tokenizer& tokenizer, SigningKey key, BlobStore& blobs,
                 std::shared_ptr<const ChatTemplate> chat_template, std::shared_ptr<const ScreenChain> chain,
                 std::unique_ptr<Journal> journal, PlannerOptions options)
    : model_(model), tokenizer_(tokenizer), key_(std::move(key)), corpus_(blobs), template_(std::move(chat_template)),
      chain_(std::move(chain)), journal_(std::move(journal)),
      tree_(std::make_unique<RadixTree>(model, tokenizer, options.tree)),
      denied_kv_sweep_interval_ns_(options.denied_kv_sweep_interval_ns), last_denied_kv_sweep_ns_(NowNanos()),
      pager_(options.pager), tier_bound_(options.pager != nullptr || options.tree.spill != nullptr) {}

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
  return std::unique_ptr<Planner>(new Planner(model, tokenizer, std::move(key), blobs, std::move(chat_template),
                                              std::move(chain), std::move(journal), std::move(options)));
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

Result<std::vector<SegmentSpec>> Planner::Segments(const std::vector<RecallSegment>& transcript, bool reply) const {
  std::vector<ChatMessage> messages;
  for (const RecallSegment& seg : transcript) messages.push_back(ChatMessage{RoleOf(seg.kind), seg.text});
  FAK_ASSIGN_OR_RETURN(RenderedChat rendered, template_->Render(messages, reply));
  const std::vector<std::string> pieces = rendered.Pieces();
  // Each piece is tokenized on its own: segment boundaries are token boundaries, so a span can
  // be evicted exactly and earlier turns keep their ids as the conversation grows. A message's
  // own text never becomes a special token (it cannot forge a turn).
  FAK_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> piece_ids, EncodePieces(tokenizer_, rendered));
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
    FAK_ASSIGN_OR_RETURN(bool listed, IsSealed(Digest::Of(m.text)));
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

Result<bool> Planner::IsSealed(const Digest& digest) const {
  Result<bool> listed = chain_->denylist().IsQuarantined(digest);
  if (!listed.has_value()) {
    return listed.error().WithContext("the denylist cannot say whether " + digest.Hex() +
                                      " is sealed; nothing was admitted or recorded, retry later");
  }
  return listed;
}

Result<EvictedSubtree> Planner::EvictDeniedKV() {
  EvictedSubtree out;
  for (const Digest& source : tree_->Sources()) {
    FAK_ASSIGN_OR_RETURN(const bool denied, IsSealed(source));
    if (!denied) continue;
    const EvictedSubtree gone = tree_->EvictSource(source);
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
  std::vector<bool> sealed;
  for (const Message& m : conversation.messages) {
    FAK_ASSIGN_OR_RETURN(const bool listed, IsSealed(Digest::Of(m.text)));
    sealed.push_back(listed);
  }
  const Digest d = Digest::Of(conversation.messages[index].text);
  if (sealed[index]) return FailedPrecondition("EvictMessage: message " + std::to_string(index) + " (" + d.Hex() + ") is sealed already");
  // The other texts are stored as Complete stores them (e.g. the last reply, not yet sent back), so
  // the session's pins can be renewed below.
  for (size_t i = 0; i < n; ++i) {
    if (i != index && !sealed[i]) FAK_RETURN_IF_ERROR(corpus_.PutSource(conversation.messages[i].text).status());
  }
  // The conversation as the next Complete would hold it (without the reply header), then the
  // message cut out of the middle: the later segments are re-prefilled, so the removal is exact.
  FAK_ASSIGN_OR_RETURN(std::vector<SegmentSpec> specs, Segments(TranscriptOf(conversation, sealed), /*reply=*/false));
  specs[index].source_digest = d;  // the subject the denylist and the stub name, as AppendNew does
  SegmentLedger ledger(model_);
  for (const SegmentSpec& spec : specs) FAK_RETURN_IF_ERROR(ledger.Append(spec).status());
  FAK_ASSIGN_OR_RETURN(const EvictionReport report, ledger.Evict(specs[index].id, Repair::kRecomputeTail));
  IssueOptions issue;
  issue.reason = reason.empty() ? std::string("user request") : "user request: " + std::string(reason);
  // Denied first, as for a quarantine: an unreachable denylist leaves no journal row or certificate.
  FAK_RETURN_IF_ERROR(chain_->denylist().Add(d, issue.reason).WithContext(
      "message " + std::to_string(index) + " cannot be sealed now; nothing was recorded, retry later"));
  DeletionCertificate cert;
  {
    std::lock_guard<std::mutex> lock(audit_mu_);
    FAK_ASSIGN_OR_RETURN(cert, IssueDeletionCertificate(model_, ledger, specs[index], report, journal_.get(), key_, issue));
  }
  sealed[index] = true;
  FAK_RETURN_IF_ERROR(HoldTexts(conversation, session, sealed));
  FAK_RETURN_IF_ERROR(EraseSource(d));
  (void)tree_->EvictSource(d);
  return cert;
}

CertificateCheck Planner::VerifyCertificate(const DeletionCertificate& cert, const CertificateVerifyOptions& options) const {
  const PublicKey trusted[] = {key_.public_key()};
  std::lock_guard<std::mutex> lock(audit_mu_);
  return VerifyDeletionCertificate(cert, journal_->rows(), trusted, options);
}

Status Planner::EraseSource(const Digest& digest) {
  Status s = corpus_.RemoveSource(digest);
  if (s.code() == StatusCode::kNotFound) return Status::Ok();
  return s.WithContext("erasing sealed content " + digest.Hex() + " from the text store");
}

Status Planner::HoldTexts(const Conversation& conversation, std::string_view session, const std::vector<bool>& sealed) {
  if (session.empty()) return Status::Ok();
  TranscriptRef held{std::string(session), {}, conversation.tenant};
  for (size_t i = 0; i < conversation.messages.size(); ++i) {
    if (!sealed[i]) held.segments.push_back(Digest::Of(conversation.messages[i].text));
  }
  return pins_.Hold(held).WithContext("pinning the texts of session '" + std::string(session) + "'");
}

Status Planner::ReleaseSession(std::string_view tenant, std::string_view session) {
  return pins_.Release(tenant, session);
}

Result<SegmentLedger> Planner::Rebuild(const RecalledTranscript& transcript) const {
  std::vector<RecallSegment> segments;
  for (const RecalledSegment& seg : transcript.segments) {
    segments.push_back(RecallSegment{seg.id, seg.kind, seg.current.quarantined() ? SealedStub(seg.source_digest) : seg.text});
  }
  FAK_ASSIGN_OR_RETURN(std::vector<SegmentSpec> specs, Segments(segments, /*reply=*/false));
  SegmentLedger ledger(model_);
  for (SegmentSpec& spec : specs) FAK_RETURN_IF_ERROR(ledger.Append(std::move(spec)).status());
  return ledger;
}

Result<Planner::Prepared> Planner::Prepare(const Conversation& conversation, const std::vector<bool>& sealed) const {
  Prepared p;
  FAK_ASSIGN_OR_RETURN(p.specs, Segments(TranscriptOf(conversation, sealed), /*reply=*/true));
  for (const SegmentSpec& spec : p.specs) p.context.insert(p.context.end(), spec.tokens.begin(), spec.tokens.end());
  return p;
}

Result<std::vector<float>> Planner::AppendNew(const Conversation& conversation, std::string_view session,
                                              std::vector<bool>& sealed, Prepared& p, size_t first,
                                              SegmentLedger& ledger, CompleteResult* out) {
  std::vector<float> logits;  // of the last segment: the reply header, never reused or screened
  for (size_t j = first; j < p.specs.size(); ++j) {
    const bool is_message = j < conversation.messages.size();
    const bool screen = is_message && conversation.messages[j].kind == SegmentKind::kToolResult && !out->messages[j].sealed;
    if (!screen) {
      FAK_ASSIGN_OR_RETURN(logits, ledger.Append(p.specs[j]));
      continue;
    }
    // The segment's source is the message text as given, not its rendering: a certificate's subject
    // then names the digest the denylist and the sealed stub carry (the rendered tokens are bound by
    // the journal row's tokens_digest).
    const Digest& d = out->messages[j].source_digest;
    SegmentSpec spec = p.specs[j];
    spec.source_digest = d;
    FAK_ASSIGN_OR_RETURN(AppendResult r, ledger.AppendScreened(spec, conversation.messages[j].text, *chain_));
    out->messages[j].verdict = r.verdict;
    if (!r.eviction.has_value()) continue;
    if (r.verdict.unavailable()) {
      // Undecided, not bad: withheld from this turn (the ledger dropped it, the tree never sees this
      // context), but neither certified nor sealed. The caller retries later.
      return Unavailable("message m" + std::to_string(j) + " (" + d.Hex() + ") withheld this turn: " + r.verdict.detector +
                         ": " + r.verdict.reason);
    }
    // Quarantined and evicted at write time: deny forever, certify, and put the stub in its place.
    // The denylist comes first, so an unreachable one leaves no journal row and no certificate; it
    // may be remote, so it is asked outside the journal's lock.
    IssueOptions issue;
    issue.reason = r.verdict.detector + ": " + r.verdict.reason;
    FAK_RETURN_IF_ERROR(chain_->denylist().Add(d, issue.reason).WithContext(
        "message m" + std::to_string(j) + " was quarantined but cannot be sealed now; nothing was recorded, retry later"));
    std::lock_guard<std::mutex> lock(audit_mu_);
    FAK_ASSIGN_OR_RETURN(DeletionCertificate cert,
                         IssueDeletionCertificate(model_, ledger, spec, *r.eviction, journal_.get(), key_, issue));
    out->certificates.push_back(std::move(cert));
    out->messages[j].sealed = true;
    // Stored (and pinned) before it was screened; no plaintext may stay behind.
    sealed[j] = true;
    FAK_RETURN_IF_ERROR(HoldTexts(conversation, session, sealed));
    FAK_RETURN_IF_ERROR(EraseSource(d));
    // Render again with the stub in the message's place: how a template renders a message may
    // depend on its neighbours, so the stub's segment and every later one come from the new text.
    FAK_ASSIGN_OR_RETURN(p, Prepare(conversation, sealed));
    SegmentSpec stub = p.specs[j];
    stub.id += ".sealed";
    FAK_ASSIGN_OR_RETURN(logits, ledger.Append(std::move(stub)));
  }
  return logits;
}

Status Planner::Decode(SegmentLedger& ledger, std::vector<float> logits, const CompleteParams& params,
                       CompleteResult* out) {
  GenerateParams g = params.generate;
  if (g.stop_tokens.empty()) g.stop_tokens = EndOfGenerationTokens(tokenizer_, template_.get());
  FAK_RETURN_IF_ERROR(g.sampling.Validate());
  Sampler sampler(g.sampling);
  TextStream stream(tokenizer_, params.stop);
  std::vector<int32_t> history(ledger.cache().tokens().begin(), ledger.cache().tokens().end());
  out->finish = FinishReason::kLength;
  while (out->generated.size() < g.max_new_tokens) {
    const int32_t next = sampler.Sample(logits, history);
    out->generated.push_back(next);
    history.push_back(next);
    if (std::find(g.stop_tokens.begin(), g.stop_tokens.end(), next) != g.stop_tokens.end()) {
      out->finish = FinishReason::kStopToken;
      break;
    }
    FAK_ASSIGN_OR_RETURN(std::string piece, stream.Push(next));
    if (!piece.empty() && params.on_text && !params.on_text(piece)) {
      out->finish = FinishReason::kCancelled;
      break;
    }
    if (stream.stopped()) {
      out->finish = FinishReason::kStopString;
      break;
    }
    if (out->generated.size() == g.max_new_tokens || ledger.cache().size() >= model_.config().context_length) break;
    FAK_ASSIGN_OR_RETURN(logits, ledger.ExtendLast(std::span<const int32_t>(&next, 1)));
  }
  if (out->finish != FinishReason::kCancelled) {
    const std::string rest = stream.Finish();
    if (!rest.empty() && params.on_text) params.on_text(rest);
  }
  out->text = stream.text();
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
  std::vector<bool> sealed_now;
  for (const Message& m : conversation.messages) {
    const Digest d = Digest::Of(m.text);
    FAK_ASSIGN_OR_RETURN(const bool sealed, IsSealed(d));
    if (!sealed) FAK_RETURN_IF_ERROR(corpus_.PutSource(m.text).status());
    sealed_now.push_back(sealed);
    out.messages.push_back(MessageOutcome{d, sealed ? Verdict::Quarantine("denylist", "sealed earlier") : Verdict::Admit(), sealed, false});
  }
  // Pinned first (which also unpins a text sealed since the last turn), then sealed text erased:
  // it is never stored again, and erasing here also finishes an erasure that failed after sealing.
  FAK_RETURN_IF_ERROR(HoldTexts(conversation, params.session, sealed_now));
  for (const MessageOutcome& m : out.messages) {
    if (m.sealed) FAK_RETURN_IF_ERROR(EraseSource(m.source_digest));
  }
  FAK_ASSIGN_OR_RETURN(Prepared p, Prepare(conversation, sealed_now));
  out.context_tokens = p.context.size();
  const int64_t t0 = NowNanos();

  // Reuse the longest prefix the gate admits for this tenant: whole segments, plus the start of
  // the next one unless it is a tool result (a different result may share a prefix; it must be
  // screened whole, so it is appended fresh).
  const ResidentClaim claim = tree_->ClaimFor(conversation.tenant);
  LookupResult hit = tree_->Lookup(claim, p.context);
  out.gate = hit.gate;
  if (pager_ != nullptr && hit.gate.outcome != ClaimOutcome::kRefuse) {
    // What the tree lacks may be in the tier (written before a restart, or by another worker). The
    // tree gets it with the whole prompt once its new messages are admitted (tier_bound_, below): a
    // Complete that fails before then leaves the tree unchanged.
    const PagedPrefix paged = PageInAfterLookup(*pager_, *tree_, claim, p.context, {}, hit, /*insert=*/false);
    out.paged_tokens = paged.paged_tokens;
    out.page_in = paged.failure;
    page_ins_.fetch_add(1, std::memory_order_relaxed);
    paged_tokens_.fetch_add(paged.paged_tokens, std::memory_order_relaxed);
    if (IsPageInRefusal(paged.failure)) page_in_refusals_.fetch_add(1, std::memory_order_relaxed);
  }
  size_t n_reused = 0, boundary = 0;
  while (n_reused < p.specs.size() && boundary + p.specs[n_reused].tokens.size() <= hit.matched_tokens) {
    boundary += p.specs[n_reused++].tokens.size();
  }
  const bool partial = n_reused < p.specs.size() && p.specs[n_reused].kind != SegmentKind::kToolResult &&
                       hit.matched_tokens > boundary;
  const size_t kept = partial ? hit.matched_tokens : boundary;
  FAK_RETURN_IF_ERROR(hit.cache.Truncate(kept));
  std::vector<SegmentSpec> reused(p.specs.begin(), p.specs.begin() + n_reused);
  if (partial) {
    reused.push_back(p.specs[n_reused]);
    reused.back().tokens.resize(kept - boundary);
  }
  FAK_ASSIGN_OR_RETURN(SegmentLedger ledger, SegmentLedger::Adopt(model_, std::move(hit.cache), std::move(reused)));
  for (size_t j = 0; j < n_reused && j < out.messages.size(); ++j) out.messages[j].reused = true;
  out.reused_tokens = kept;

  std::vector<float> logits;
  size_t first_new = n_reused;
  if (partial) {  // finish the partly reused segment
    const std::vector<int32_t>& ids = p.specs[n_reused].tokens;
    FAK_ASSIGN_OR_RETURN(logits, ledger.ExtendLast(std::span(ids).subspan(kept - boundary)));
    ++first_new;
  }
  if (first_new < p.specs.size()) {
    FAK_ASSIGN_OR_RETURN(logits, AppendNew(conversation, params.session, sealed_now, p, first_new, ledger, &out));
  }
  out.prefilled_tokens = ledger.cache().size() - kept;
  out.prefill_ms = MsSince(t0);
  // Each message's tokens are tagged with its text's digest, so a later denial can evict them.
  const auto ledger_sources = [&] {
    std::vector<SourceSpan> sources;
    for (size_t j = 0; j < conversation.messages.size(); ++j) {
      const Segment* seg = out.messages[j].sealed ? nullptr : ledger.Find(p.specs[j].id);
      if (seg != nullptr) sources.push_back(SourceSpan{seg->from, seg->tokens.size(), out.messages[j].source_digest});
    }
    return sources;
  };
  if (tier_bound_) {
    // A tier finds a slab by the digest of the context up to the slab's end: a node ending past the
    // prompt (prompt + reply, inserted below) could never serve this prompt again after a restart.
    // Reuse is an optimisation: a context the tree refuses is simply not kept.
    (void)tree_->Insert(conversation.tenant, ledger.cache().tokens(), ledger.cache(), ledger_sources());
  }

  const int64_t t1 = NowNanos();
  FAK_RETURN_IF_ERROR(Decode(ledger, std::move(logits), params, &out));
  out.decode_ms = MsSince(t1);
  FAK_RETURN_IF_ERROR(tree_->Insert(conversation.tenant, ledger.cache().tokens(), ledger.cache(), ledger_sources()));
  return out;
}

}  // namespace fak
