// Conversations kept by the server, for fak's own endpoints (docs/server.md, "fak's endpoints"):
// each is a list of messages owned by one tenant, continued turn by turn through the Planner (prefix
// reuse, screening of tool results, quarantine with certificates), and editable afterwards — a
// message evicted on request comes back as an ed25519 deletion certificate, which the server can
// verify against its own journal.
//
// The Planner runs turns one request at a time per conversation on the connection's thread (not yet
// through the Engine's batches); in fak serve it shares the Engine's radix tree, and every text it
// seals also loses its KV in the server's other copies (EraseCopies).
//
// Thread-safety: every method may be called from any thread. One conversation serves one request
// at a time (another gets 409); different conversations run concurrently. Conversation message
// lists live in memory (their texts in the Planner's text store): a restart forgets the ids.
#ifndef FAK_SRC_SERVER_CONVERSATIONS_H_
#define FAK_SRC_SERVER_CONVERSATIONS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/planner/planner.h"
#include "fak/regen/transcript_ref.h"
#include "src/server/api_request.h"
#include "src/server/http_reply.h"

namespace fak::internal {

// Counters for /metrics.
struct ConversationStats {
  uint64_t conversations = 0;             // held now
  uint64_t turns = 0;                     // Planner::Complete calls that succeeded
  uint64_t quarantines = 0;               // tool results sealed at write time
  uint64_t evictions = 0;                 // messages evicted on request
  uint64_t certificates_quarantine = 0;   // certificates issued for quarantines
  uint64_t certificates_request = 0;      // certificates issued for evictions on request
  uint64_t verified_valid = 0, verified_invalid = 0;
};

// A conversation as a client holding it sends it to /v1/chat/completions: its messages in order,
// each sealed one as its stub (what the chat endpoint's screen renders it as), under its tenant.
// What a rollout's backfill runs on the new engine, so it warms the prompt a live request builds.
struct HeldChat {
  TranscriptRef ref;  // keyed by the conversation's id, with its tenant; segments: the unsealed texts
  size_t n_bytes = 0;  // of the unsealed texts: ranks the hot set
  std::vector<ChatMessage> messages;
  std::vector<SegmentKind> kinds;  // per message
  std::vector<bool> sealed;        // per message: shown as its stub
};

// `cert` as a reply carries it; in a fleet (`removed` — what EraseCopies returned — has a "fleet"
// entry with an event) it is first made to name, signed, the workers that confirmed their copies
// gone (Planner::RecordFleetConfirmations: a version 2 certificate).
Result<Json> RemovalCertificateJson(const Planner& planner, const Json& removed, DeletionCertificate cert);

class Conversations {
 public:
  // Removes a sealed text's KV from the copies the server holds beyond the Planner's tree (other
  // engines' trees, KV tiers): what `tenant` can reach (its erasure), or all of it (nullopt: a
  // quarantine); returns what it removed, for the reply.
  using EraseCopies = std::function<Json(const Digest& source, std::optional<std::string_view> tenant)>;
  // `planner` (and its model) must outlive this. At most `max_conversations` are held at once, at
  // most `max_per_tenant` of them by one tenant.
  Conversations(Planner& planner, const Model& model, size_t default_max_tokens, size_t max_conversations,
                size_t max_per_tenant, EraseCopies erase_copies);

  // POST /fak/v1/conversations: a new conversation from `request` (a chat completion body), and its
  // first turn. POST /fak/v1/conversations/{id}/messages: more messages and the next turn.
  // `client_gone` (may be null) is asked while the turn runs: once true the turn is cancelled and
  // its reply, which nobody would see, is not added to the conversation (499).
  using ClientGone = std::function<bool()>;
  HttpReply Create(const std::string& tenant, const ApiRequest& request, ClientGone client_gone = {});
  HttpReply Continue(const std::string& tenant, const std::string& id, const ApiRequest& request,
                     ClientGone client_gone = {});
  // GET /fak/v1/conversations/{id}: the messages as the model sees them (a sealed one as its stub).
  HttpReply Get(const std::string& tenant, const std::string& id);
  // POST /fak/v1/conversations/{id}/evict, body {"message": INDEX, "reason": TEXT}.
  HttpReply Evict(const std::string& tenant, const std::string& id, std::string_view body);
  // DELETE /fak/v1/conversations/{id}: forgets it and unpins its texts.
  HttpReply Delete(const std::string& tenant, const std::string& id);
  // POST /fak/v1/certificates/verify, body: a certificate as issued.
  HttpReply Verify(std::string_view body);

  // Every conversation as its client holds it (sealed messages as their stubs): the hot set of a
  // rollout. Waits for requests in flight on each conversation; one whose denylist cannot be asked
  // now is left out (not warmed).
  std::vector<HeldChat> HeldChats();

  ConversationStats Stats() const;
  Planner& planner() { return planner_; }

 private:
  struct Entry {
    std::mutex mu;  // held for the duration of one request on this conversation
    Conversation conversation;
  };
  using Key = std::pair<std::string, std::string>;  // tenant, id
  // The entry, locked; or a 404 / 409 reply.
  std::shared_ptr<Entry> Find(const std::string& tenant, const std::string& id, std::unique_lock<std::mutex>* lock,
                              HttpReply* error);
  HttpReply Turn(const std::string& id, Entry& entry, const ApiRequest& request, ClientGone client_gone);

  Planner& planner_;
  const Model& model_;
  const EraseCopies erase_copies_;
  const size_t default_max_tokens_;
  const size_t max_conversations_;
  const size_t max_per_tenant_;
  mutable std::mutex mu_;  // guards conversations_ and next_id_
  std::map<Key, std::shared_ptr<Entry>> conversations_;
  uint64_t next_id_ = 1;
  std::atomic<uint64_t> turns_{0}, quarantines_{0}, evictions_{0}, certificates_quarantine_{0},
      certificates_request_{0}, verified_valid_{0}, verified_invalid_{0};
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_CONVERSATIONS_H_
