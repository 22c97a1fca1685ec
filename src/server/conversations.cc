// Conversations kept by the server: turns through the Planner, eviction on request with a deletion
// certificate, verification against the server's journal.
#include "src/server/conversations.h"

#include <iterator>
#include <vector>

#include "src/server/verdict_json.h"

namespace fak::internal {
namespace {

constexpr size_t kMaxReasonBytes = 1024;

SegmentKind KindOf(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return SegmentKind::kSystem;
    case ChatRole::kUser: return SegmentKind::kUser;
    case ChatRole::kAssistant: return SegmentKind::kAssistant;
    case ChatRole::kTool: return SegmentKind::kToolResult;
  }
  return SegmentKind::kUser;
}

std::string_view FinishName(FinishReason finish) {
  switch (finish) {
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    default: return "stop";
  }
}

std::string_view VerdictName(const Verdict& v) {
  if (v.unavailable()) return "unavailable";
  return v.quarantined() ? "quarantine" : "admit";
}

Result<Json> CertificateJson(const DeletionCertificate& cert) {
  FAK_ASSIGN_OR_RETURN(std::string text, cert.ToJson());
  return ParseJson(text, "the certificate", StatusCode::kCorruption);
}

Result<Json> TurnJson(const std::string& id, const Conversation& c, const CompleteResult& r) {
  Json messages = Json::array();
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const MessageOutcome& m = r.messages[i];
    messages.push_back({{"index", i},
                        {"role", ChatRoleName(Planner::RoleOf(c.messages[i].kind))},
                        {"source_digest", m.source_digest.Hex()},
                        {"verdict", VerdictName(m.verdict)},
                        {"detector", m.verdict.detector},
                        {"reason", m.verdict.reason},
                        {"sealed", m.sealed},
                        {"reused", m.reused}});
  }
  Json certificates = Json::array();
  for (const DeletionCertificate& cert : r.certificates) {
    FAK_ASSIGN_OR_RETURN(Json j, CertificateJson(cert));
    certificates.push_back(std::move(j));
  }
  return Json{{"id", id},
              {"object", "fak.conversation.turn"},
              {"tenant", c.tenant},
              {"reply", {{"role", "assistant"}, {"content", r.text}}},
              {"finish_reason", FinishName(r.finish)},
              {"usage",
               {{"prompt_tokens", r.context_tokens},
                {"completion_tokens", r.generated.size()},
                {"cached_tokens", r.reused_tokens},
                {"prefilled_tokens", r.prefilled_tokens},
                {"paged_tokens", r.paged_tokens}}},
              {"gate", VerdictJson(r.gate)},
              {"messages", std::move(messages)},
              {"certificates", std::move(certificates)}};
}

// {"message": INDEX, "reason": TEXT}; unknown fields refused by name.
bool ParseEvictBody(std::string_view body, size_t* index, std::string* reason, HttpReply* error) {
  Result<Json> parsed = ParseJsonObject(body, "the request body");
  if (!parsed) {
    *error = HttpReply::BadRequest(std::string(parsed.error().message()), "", "invalid_request");
    return false;
  }
  bool has_index = false;
  for (const auto& [key, v] : parsed->items()) {
    if (key == "message") {
      if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
        *error = HttpReply::BadRequest("message must be a non-negative integer (the message's index)", "message");
        return false;
      }
      *index = static_cast<size_t>(v.get<uint64_t>());
      has_index = true;
    } else if (key == "reason") {
      if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxReasonBytes) {
        *error = HttpReply::BadRequest("reason must be a string of at most 1024 bytes", "reason");
        return false;
      }
      *reason = v.get<std::string>();
    } else {
      *error = HttpReply::BadRequest("unknown field '" + key + "'", key);
      return false;
    }
  }
  if (!has_index) *error = HttpReply::BadRequest("message is required (the index of the message to evict)", "message");
  return has_index;
}

}  // namespace

Result<Json> RemovalCertificateJson(const Planner& planner, const Json& removed, DeletionCertificate cert) {
  if (auto fleet = removed.find("fleet"); fleet != removed.end() && !(*fleet)["event"].get<std::string>().empty()) {
    FAK_RETURN_IF_ERROR(planner.RecordFleetConfirmations(&cert, (*fleet)["event"].get<std::string>(),
                                                         (*fleet)["confirmed"].get<std::vector<std::string>>()));
  }
  return CertificateJson(cert);
}

Conversations::Conversations(Planner& planner, const Model& model, size_t default_max_tokens, size_t max_conversations,
                             size_t max_per_tenant, EraseCopies erase_copies)
    : planner_(planner), model_(model), erase_copies_(std::move(erase_copies)), default_max_tokens_(default_max_tokens),
      max_conversations_(max_conversations), max_per_tenant_(max_per_tenant) {}

std::shared_ptr<Conversations::Entry> Conversations::Find(const std::string& tenant, const std::string& id,
                                                          std::unique_lock<std::mutex>* lock, HttpReply* error) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> guard(mu_);
    auto it = conversations_.find({tenant, id});
    if (it != conversations_.end()) entry = it->second;
  }
  if (!entry) {
    // Another tenant's conversation is as absent as one that never existed.
    *error = HttpReply::Error({404, "invalid_request_error", "no conversation '" + id + "'", "", "not_found"});
    return nullptr;
  }
  *lock = std::unique_lock<std::mutex>(entry->mu, std::try_to_lock);
  if (!lock->owns_lock()) {
    *error = HttpReply::Error({409, "invalid_request_error", "conversation '" + id + "' is busy with another request",
                               "", "conflict"});
    return nullptr;
  }
  return entry;
}

HttpReply Conversations::Turn(const std::string& id, Entry& entry, const ApiRequest& request, ClientGone client_gone) {
  if (request.stream) return HttpReply::BadRequest("conversation turns are not streamed", "stream");
  if (request.n != 1) return HttpReply::BadRequest("a conversation turn has one reply (n = 1)", "n");
  if (request.logprobs) return HttpReply::BadRequest("conversation turns do not report logprobs", "logprobs");
  const size_t context = model_.config().context_length;
  if (request.max_tokens && *request.max_tokens >= context) {
    return HttpReply::BadRequest("max_tokens must be below the model's context of " + std::to_string(context), "max_tokens",
                                 "context_length_exceeded");
  }
  Conversation next = entry.conversation;
  for (const ChatMessage& m : request.messages) next.messages.push_back({KindOf(m.role), m.content});
  CompleteParams params;
  params.generate.max_new_tokens = request.max_tokens.value_or(default_max_tokens_);
  params.generate.sampling = request.sampling;
  params.generate.sampling.seed = request.seed.value_or(0);  // a turn is reproducible: no seed is seed 0
  params.stop = request.stop;
  params.session = id;
  params.cancelled = std::move(client_gone);
  Result<CompleteResult> r = planner_.Complete(next, params);
  if (!r) return StatusReply(r.error(), "messages");
  if (r->finish == FinishReason::kCancelled) {
    // Nobody reads this reply; the conversation stays as it was (nginx's 499: client closed request).
    return HttpReply::Error({499, "invalid_request_error", "the client went away; the turn was cancelled", "", "cancelled"});
  }
  turns_.fetch_add(1, std::memory_order_relaxed);
  // A turn's certificates are its write-time quarantines, one each.
  certificates_quarantine_.fetch_add(r->certificates.size(), std::memory_order_relaxed);
  quarantines_.fetch_add(r->certificates.size(), std::memory_order_relaxed);
  for (const DeletionCertificate& cert : r->certificates) (void)erase_copies_(cert.subject, std::nullopt);
  // The reply is stored now rather than by the next turn, so a rollout's backfill finds it. Best
  // effort: the next turn stores it anyway, and a backfill without it is refused, not wrong.
  if (Result<TextCorpus*> texts = planner_.corpus(next.tenant)) (void)(*texts)->PutSource(r->text);
  Result<Json> body = TurnJson(id, next, *r);
  next.messages.push_back({SegmentKind::kAssistant, r->text});
  entry.conversation = std::move(next);
  if (!body) return StatusReply(body.error());
  return HttpReply::Ok(std::move(*body));
}

HttpReply Conversations::Create(const std::string& tenant, const ApiRequest& request, ClientGone client_gone) {
  auto entry = std::make_shared<Entry>();
  entry->conversation.tenant = tenant;
  std::unique_lock<std::mutex> lock(entry->mu);
  std::string id;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (conversations_.size() >= max_conversations_) {
      return HttpReply::Error({503, "server_overloaded", "the server holds " + std::to_string(max_conversations_) +
                                   " conversations; delete one first", "", "too_many_conversations"});
    }
    // Keys sort by tenant first: this tenant's conversations are one range.
    const auto first = conversations_.lower_bound(Key{tenant, ""});
    const auto last = conversations_.lower_bound(Key{tenant + '\0', ""});
    if (static_cast<size_t>(std::distance(first, last)) >= max_per_tenant_) {
      return HttpReply::Error({503, "server_overloaded", "tenant '" + tenant + "' holds " + std::to_string(max_per_tenant_) +
                                   " conversations (its share); delete one first", "", "too_many_conversations"});
    }
    id = "conv-" + std::to_string(next_id_++);
    conversations_.emplace(Key{tenant, id}, entry);
  }
  // A failed first turn leaves no conversation behind — however it fails, a throw included.
  struct Undo {
    Conversations* self;
    const Key key;
    bool keep = false;
    ~Undo() {
      if (keep) return;
      {
        std::lock_guard<std::mutex> guard(self->mu_);
        self->conversations_.erase(key);
      }
      (void)self->planner_.ReleaseSession(key.first, key.second);
    }
  } undo{this, Key{tenant, id}};
  HttpReply reply = Turn(id, *entry, request, std::move(client_gone));
  undo.keep = reply.status == 200;
  return reply;
}

HttpReply Conversations::Continue(const std::string& tenant, const std::string& id, const ApiRequest& request,
                                  ClientGone client_gone) {
  std::unique_lock<std::mutex> lock;
  HttpReply error;
  std::shared_ptr<Entry> entry = Find(tenant, id, &lock, &error);
  if (!entry) return error;
  return Turn(id, *entry, request, std::move(client_gone));
}

HttpReply Conversations::Get(const std::string& tenant, const std::string& id) {
  std::unique_lock<std::mutex> lock;
  HttpReply error;
  std::shared_ptr<Entry> entry = Find(tenant, id, &lock, &error);
  if (!entry) return error;
  const Conversation& c = entry->conversation;
  Result<std::vector<RecallSegment>> transcript = planner_.Transcript(c);
  if (!transcript) return StatusReply(transcript.error());
  Json messages = Json::array();
  for (size_t i = 0; i < transcript->size(); ++i) {
    const RecallSegment& seg = (*transcript)[i];
    messages.push_back({{"index", i},
                        {"role", ChatRoleName(Planner::RoleOf(seg.kind))},
                        {"content", seg.text},
                        {"source_digest", Digest::Of(c.messages[i].text).Hex()},
                        {"sealed", seg.text != c.messages[i].text}});
  }
  return HttpReply::Ok({{"id", id}, {"object", "fak.conversation"}, {"tenant", c.tenant}, {"messages", std::move(messages)}});
}

HttpReply Conversations::Evict(const std::string& tenant, const std::string& id, std::string_view body) {
  size_t index = 0;
  std::string reason;
  HttpReply error;
  if (!ParseEvictBody(body, &index, &reason, &error)) return error;
  std::unique_lock<std::mutex> lock;
  std::shared_ptr<Entry> entry = Find(tenant, id, &lock, &error);
  if (!entry) return error;
  Result<DeletionCertificate> cert = planner_.EvictMessage(entry->conversation, index, reason, id);
  if (!cert) return StatusReply(cert.error(), "message");
  evictions_.fetch_add(1, std::memory_order_relaxed);
  certificates_request_.fetch_add(1, std::memory_order_relaxed);
  // The planner removed the text's KV from its tree (the engine's, in fak serve); the rest go now.
  Json copies = erase_copies_(cert->subject, tenant);
  Result<Json> j = RemovalCertificateJson(planner_, copies, *cert);
  if (!j) return StatusReply(j.error());
  return HttpReply::Ok({{"id", id},
                        {"object", "fak.deletion"},
                        {"message", index},
                        {"subject", cert->subject.Hex()},
                        {"removed", std::move(copies)},
                        {"certificate", std::move(*j)}});
}

HttpReply Conversations::Delete(const std::string& tenant, const std::string& id) {
  std::unique_lock<std::mutex> lock;
  HttpReply error;
  std::shared_ptr<Entry> entry = Find(tenant, id, &lock, &error);
  if (!entry) return error;
  {
    std::lock_guard<std::mutex> guard(mu_);
    conversations_.erase({tenant, id});
  }
  const Status released = planner_.ReleaseSession(tenant, id);
  if (!released.ok() && released.code() != StatusCode::kNotFound) return StatusReply(released);
  return HttpReply::Ok({{"id", id}, {"object", "fak.conversation.deleted"}, {"deleted", true}});
}

HttpReply Conversations::Verify(std::string_view body) {
  Result<DeletionCertificate> cert = DeletionCertificate::FromJson(body);
  if (!cert) return HttpReply::BadRequest("not a deletion certificate: " + std::string(cert.error().message()), "", "invalid_certificate");
  const CertificateCheck check = planner_.VerifyCertificate(*cert);
  (check.ok() ? verified_valid_ : verified_invalid_).fetch_add(1, std::memory_order_relaxed);
  return HttpReply::Ok({{"object", "fak.certificate.verdict"},
                        {"valid", check.ok()},
                        {"fault", CertificateFaultName(check.fault)},
                        {"detail", check.detail},
                        {"subject", cert->subject.Hex()},
                        {"journal_seq", cert->journal_seq}});
}

std::vector<HeldChat> Conversations::HeldChats() {
  std::vector<std::pair<Key, std::shared_ptr<Entry>>> entries;
  {
    std::lock_guard<std::mutex> guard(mu_);
    entries.assign(conversations_.begin(), conversations_.end());
  }
  std::vector<HeldChat> out;
  for (const auto& [key, entry] : entries) {
    std::lock_guard<std::mutex> lock(entry->mu);
    const Conversation& c = entry->conversation;
    // Sealed messages as their stubs (Planner::SealedStub): what the chat endpoint's screen runs.
    Result<std::vector<RecallSegment>> shown = planner_.Transcript(c);
    if (!shown) continue;  // the denylist cannot be asked now: this one is not warmed
    HeldChat chat;
    chat.ref = TranscriptRef{key.second, {}, c.tenant};
    for (size_t i = 0; i < c.messages.size(); ++i) {
      const bool sealed = (*shown)[i].text != c.messages[i].text;
      chat.messages.push_back(ChatMessage{Planner::RoleOf(c.messages[i].kind), (*shown)[i].text});
      chat.kinds.push_back(c.messages[i].kind);
      chat.sealed.push_back(sealed);
      if (sealed || c.messages[i].text.empty()) continue;
      chat.ref.segments.push_back(Digest::Of(c.messages[i].text));
      chat.n_bytes += c.messages[i].text.size();
    }
    if (!chat.messages.empty()) out.push_back(std::move(chat));
  }
  return out;
}

ConversationStats Conversations::Stats() const {
  ConversationStats s;
  {
    std::lock_guard<std::mutex> guard(mu_);
    s.conversations = conversations_.size();
  }
  s.turns = turns_.load(std::memory_order_relaxed);
  s.quarantines = quarantines_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.certificates_quarantine = certificates_quarantine_.load(std::memory_order_relaxed);
  s.certificates_request = certificates_request_.load(std::memory_order_relaxed);
  s.verified_valid = verified_valid_.load(std::memory_order_relaxed);
  s.verified_invalid = verified_invalid_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace fak::internal
