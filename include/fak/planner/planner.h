// Planner: the agent-facing entry point — "here is the conversation so far, continue it".
//
// Complete() stores each message's text in the corpus by SourceDigest (sealed ones excepted: their
// text is erased from it when they are sealed and never stored again), renders the conversation
// with the model's chat template (each message's part of the rendering tokenized on its own, so
// message borders are token borders), screens tool results before anything of them is prefilled —
// a quarantined one is certified (a ledger that prefills the conversation up to it and evicts it:
// signed, journaled, witnessed against a never-saw run) and from then on replaced everywhere by a
// sealed stub naming its digest, so no later turn or regen re-feeds it — and then runs the turn as
// one request of the serving Engine (PlannerOptions::engine, or the planner's own): the engine
// reuses the longest prefix its tree holds through the manifest gate (with the caller's tenant),
// pages in from a KV tier, prefills the rest batched with its other requests, decodes, streams text
// through a callback, and puts the finished context back into the tree for the next turn.
//
// A denylist that cannot be asked (e.g. a RedisDenylist whose server is down) is "unknown", never
// "quarantined": Complete then answers Unavailable — the message is not admitted this turn, but it
// is not quarantined, not added to the denylist, and no deletion row or certificate is written.
// The caller retries the same call later.
//
// KV tier: the engine's pager (EngineOptions::pager; PlannerOptions::pager for the planner's own
// engine) pages a missing prefix in, verified by the manifest gate under the conversation's tenant;
// refusals fall back to prefill; CompleteResult and Stats() count both.
//
// Thread-safety: Complete may run concurrently for many conversations; their turns are batched by
// the engine. CompleteParams::on_text runs on the engine's step thread. The model, tokenizer, key,
// blob store and a given engine must outlive the planner.
#ifndef FAK_PLANNER_PLANNER_H_
#define FAK_PLANNER_PLANNER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/audit/audit.h"
#include "fak/core/export.h"
#include "fak/engine/engine.h"
#include "fak/planner/conversation.h"
#include "fak/store/blob_store.h"
#include "fak/model/model.h"
#include "fak/session/radix_tree.h"
#include "fak/recall/recall.h"
#include "fak/regen/regen_driver.h"
#include "fak/regen/transcript_pins.h"
#include "fak/model/sampler.h"
#include "fak/screen/screen.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

struct PlannerOptions {
  // The engine that runs the turns (e.g. a server's, so conversation turns are batched with its
  // other requests and share its tree and KV budget); built on the same model and tokenizer; not
  // owned, must outlive the planner. The planner's tree is then the engine's. Null: the planner
  // builds its own engine (its own step thread) over its own tree from `tree` and `pager`.
  // Default: null.
  Engine* engine = nullptr;
  RadixTreeOptions tree;
  // Journal file for deletion rows (created if absent). Required.
  std::string journal_path;
  // How messages are rendered: the model's chat template (ChatTemplate::ForModel). Required,
  // except with the embedded byte-level tokenizer, whose default is family "fak".
  std::shared_ptr<const ChatTemplate> chat_template;
  // Screens tool results. Default: ScreenChain::Default() (prompt injection + secrets + denylist).
  std::shared_ptr<const ScreenChain> chain;
  // How often Complete sweeps the tree for KV of texts the chain's denylist lists now (entries
  // added elsewhere, e.g. a fleet denylist copied in by RedisDenylist::CopyTo): it asks the denylist
  // once per distinct source held and evicts their nodes. 0 = on every Complete. Default: 1 s.
  int64_t denied_kv_sweep_interval_ns = 1'000'000'000;
  // Each tenant's texts in a store of its own, opened on first use and kept (e.g. a directory per
  // tenant, or a Redis store with RedisOptions::tenant): one tenant's erasure never removes another
  // tenant's copy of the same text, and one tenant's pins never block another's erasure. Null: every
  // tenant's texts share the store given to Create (which then holds nothing when this is set).
  // Default: null.
  std::function<Result<std::unique_ptr<BlobStore>>(std::string_view tenant)> tenant_store;
  // For the planner's own engine (ignored with `engine`): a lower KV tier (e.g. TierPager over a
  // directory or Redis store; built with tree.access) asked on a tree miss; thread-safe, must
  // outlive the planner. `tree.spill` is the way out to a tier. Null = none. Default: null.
  KVPager* pager = nullptr;
};

// KV-tier counters since Create (snapshot).
struct PlannerStats {
  uint64_t page_ins = 0;          // Completes that asked the pager
  uint64_t paged_tokens = 0;      // context tokens it supplied
  uint64_t page_in_refusals = 0;  // page-ins stopped by a refused slab or an unavailable tier
};

class FAK_EXPORT Planner {
 public:
  // `blobs` holds the corpus texts (e.g. a directory store); all references must outlive it.
  static Result<std::unique_ptr<Planner>> Create(const Model& model, const Tokenizer& tokenizer, SigningKey key,
                                                 BlobStore& blobs, PlannerOptions options);

  // Errors: Unavailable when the chain's denylist cannot be asked now (checking for sealed
  // messages, or sealing a quarantined one), or an admitter answered Verdict::Unavailable for a new
  // tool result: nothing was admitted, sealed, journaled or certified, and the tree is unchanged;
  // retry later. Other codes are real failures.
  Result<CompleteResult> Complete(const Conversation& conversation, const CompleteParams& params = {});

  // The conversation as durable text, in order: each message's own text (a sealed one as its stub)
  // and kind — what RecallStore::Save persists. Unavailable when the denylist cannot be asked.
  Result<std::vector<RecallSegment>> Transcript(const Conversation& conversation) const;
  // Rebuilds a session's KV from a recalled transcript exactly as Complete builds it live: the
  // segments rendered by the chat template, a segment the current chain quarantines as its stub.
  Result<SegmentLedger> Rebuild(const RecalledTranscript& transcript) const;
  // What replaces a quarantined message: names its digest, carries none of its bytes
  // (fak::SealedStub, which recall images store in a quarantined segment's place).
  static std::string SealedStub(const Digest& digest);
  // The role a message kind has in a chat template.
  static ChatRole RoleOf(SegmentKind kind);

  // User-requested deletion of message `index` (e.g. a right-to-erasure request): the message is
  // evicted from a ledger of the conversation exactly (the later messages re-prefilled from their
  // token ids), certified against a never-saw run (signed, journaled with `reason`), then sealed
  // like a quarantined tool result — its digest is added to the chain's denylist (so it is sealed
  // in every conversation and tenant that carries the same text), its text erased from the corpus
  // and its KV evicted from the tree. Later Completes render it as SealedStub. `session` is the
  // one its Complete named (CompleteParams::session), so the pin goes before the text; "" = none.
  // The other messages' texts are stored (and pinned for `session`) as Complete stores them.
  // Only this message is removed: another message that quotes its content (a reply that repeated
  // it) stays until it is evicted too.
  // Cost: one prefill of the conversation, the tail's recompute and the witness's prefill.
  // Errors: InvalidArgument for an invalid tenant or an index past the end; FailedPrecondition
  // when the message is sealed already; Unavailable when the denylist cannot be asked or added to
  // (then nothing was journaled or certified). Failures before the denylist entry change nothing.
  Result<DeletionCertificate> EvictMessage(const Conversation& conversation, size_t index, std::string_view reason,
                                           std::string_view session = {});

  // The signed certificate of the erasure journaled at `journal_seq` (EraseText's row; CertifyErasure
  // in fak/audit/deletion_certificate.h). NotFound when there is no such row, InvalidArgument when
  // it is not an erasure row.
  Result<DeletionCertificate> CertifyErasure(uint64_t journal_seq) const;

  // Makes `cert` (one this planner issued) name the fleet workers that confirmed the erasure of its
  // subject, re-signed (AddFleetConfirmations): for a host whose fleet confirms after the issue.
  Status RecordFleetConfirmations(DeletionCertificate* cert, std::string event, std::vector<std::string> confirmed) const;

  // Verifies `cert` against this planner's journal and public key (VerifyDeletionCertificate), while
  // no certificate is being issued: a host that keeps only the certificate can check it here.
  CertificateCheck VerifyCertificate(const DeletionCertificate& cert, const CertificateVerifyOptions& options = {}) const;

  // Evicts from the tree every node whose tokens came from a text the chain's denylist lists now;
  // returns what it removed. Unavailable when the denylist cannot be asked (nothing more evicted).
  Result<EvictedSubtree> EvictDeniedKV();
  // Screening for chats the serving Engine runs (the OpenAI chat endpoint), where nothing is
  // prefilled before the screen: every message whose text is sealed is replaced by SealedStub; every
  // tool result (and user message when `screen_user`) not sealed passes the chain, and a quarantined
  // one is sealed like Complete seals it — denylist, text erased from the store, KV evicted from the
  // tree, a "quarantine" journal row — and replaced by its stub. No KV was ever computed from it, so
  // there is nothing to certify: the request never sees its bytes. InvalidArgument for an invalid
  // tenant; Unavailable when the denylist or an admitter cannot answer (nothing was sealed, retry).
  Result<ScreenedChat> ScreenChat(std::string_view tenant, std::span<const ChatMessage> messages, bool screen_user = false);
  // Erasure of a text however it arrived (e.g. through the OpenAI endpoints): sealed (denylist), its
  // bytes erased from the text store, its KV evicted from the tree, and an "erasure" row journaled
  // naming what was removed. Idempotent: erasing a sealed text removes any copy again. `tenant` is
  // who asked (journaled). InvalidArgument for an invalid tenant; Unavailable when the denylist
  // cannot be added to (nothing was removed or journaled); FailedPrecondition when a live session
  // pins the text (sealed and its KV evicted, but its bytes stay and nothing is journaled: erase it
  // again once the session ends).
  Result<ErasureReport> EraseText(std::string_view tenant, const Digest& digest, std::string_view reason);
  // Unpins the texts a conversation's Complete pinned (CompleteParams::session): it ended. NotFound
  // when it holds none.
  Status ReleaseSession(std::string_view tenant, std::string_view session);

  PlannerStats Stats() const;

  // Moves the planner's turns to another engine — a rollout's cutover to new weights, so
  // conversations switch with the OpenAI endpoints. `model`, `tokenizer` and `chat_template` are
  // the engine's (null template: keep the current one); `keep_alive` (e.g. what owns the engine) is
  // held while the planner uses them. Turns in flight finish on the engine they started on; the
  // journal, key, texts and seals stay.
  void SwitchEngine(const Model& model, const Tokenizer& tokenizer, Engine& engine,
                    std::shared_ptr<const ChatTemplate> chat_template, std::shared_ptr<const void> keep_alive);
  // The current engine's tree (valid until the next SwitchEngine lets go of it).
  RadixTree& tree() { return Current()->engine->tree(); }
  Journal& journal() { return *journal_; }
  // The texts of the store given to Create (every tenant's, without PlannerOptions::tenant_store).
  TextCorpus& corpus() { return shared_texts_.corpus; }
  // The corpus `tenant`'s texts are in (opened on first use with PlannerOptions::tenant_store).
  Result<TextCorpus*> corpus(std::string_view tenant);
  const ScreenChain& chain() const { return *chain_; }
  // The current engine's chat template (valid until the next SwitchEngine lets go of it).
  const ChatTemplate& chat_template() const { return *Current()->chat_template; }
  const PublicKey public_key() const { return key_.public_key(); }

 private:
  struct Prepared;
  Planner(const Model& model, const Tokenizer& tokenizer, SigningKey key, BlobStore& blobs,
          std::shared_ptr<const ChatTemplate> chat_template, std::shared_ptr<const ScreenChain> chain,
          std::unique_ptr<Journal> journal, PlannerOptions options);
  // The segments of `transcript` as the template renders them: one per message, then the
  // generation prompt when `reply` (its id "reply").
  // What turns run on: a model, its tokenizer and the engine over them (SwitchEngine).
  struct Backend {
    const Model* model = nullptr;
    const Tokenizer* tokenizer = nullptr;
    Engine* engine = nullptr;
    std::shared_ptr<const ChatTemplate> chat_template;
    std::shared_ptr<const void> keep_alive;
  };
  std::shared_ptr<const Backend> Current() const;
  Result<std::vector<SegmentSpec>> Segments(const Backend& b, const std::vector<RecallSegment>& transcript, bool reply) const;
  // `sealed[i]`: message i is on the denylist (asked once per call).
  Result<Prepared> Prepare(const Backend& b, const Conversation& conversation, const std::vector<bool>& sealed) const;
  static std::vector<RecallSegment> TranscriptOf(const Conversation& conversation, const std::vector<bool>& sealed);
  // Whether the denylist lists `digest`; Unavailable (with context) when it cannot be asked.
  // (A quarantine seals a text for every tenant; an erasure only for the tenant that asked:
  // IsSealedFor, TenantSealKey in fak/screen/screen.h.)
  Result<bool> IsSealed(std::string_view tenant, const Digest& digest) const;
  // Removes sealed content's text (and cached token lists) from the corpus; absent is fine.
  Status EraseSource(std::string_view tenant, const Digest& digest);
  // One tenant's texts (or everyone's, without PlannerOptions::tenant_store) and the pins on them.
  struct Texts {
    explicit Texts(BlobStore& store) : corpus(store) {}
    explicit Texts(std::unique_ptr<BlobStore> store) : owned(std::move(store)), corpus(*owned) {}
    std::unique_ptr<BlobStore> owned;
    TextCorpus corpus;
    TranscriptPins pins{corpus};
  };
  Result<Texts*> TextsOf(std::string_view tenant);
  // Pins the texts of the conversation's unsealed messages for its session (none when it names
  // none), unpinning those it no longer holds — a text must be unpinned before it is erased.
  Status HoldTexts(const Conversation& conversation, std::string_view session, const std::vector<bool>& sealed);
  // Screens the conversation's unsealed tool results by their text; certifies and seals each one
  // quarantined (in `sealed` and `out`), in order. Unavailable when a screen cannot decide.
  Status ScreenToolResults(const Backend& b, const Conversation& conversation, std::string_view session, std::vector<bool>& sealed,
                           CompleteResult* out);
  // The write-time certificate of quarantined message `index`: a ledger of the conversation up to
  // it (as `sealed` renders it) that prefills it and evicts it again — the tail, so exactly.
  Result<DeletionCertificate> CertifyQuarantine(const Backend& b, const Conversation& conversation, const std::vector<bool>& sealed,
                                                size_t index, const std::string& reason);
  // Runs the turn's context `p` as one engine request and fills `out` from its result.
  Status Run(const Backend& b, const Conversation& conversation, const Prepared& p, const CompleteParams& params, CompleteResult* out);

  SigningKey key_;
  Texts shared_texts_;
  const std::function<Result<std::unique_ptr<BlobStore>>(std::string_view tenant)> tenant_store_;
  std::mutex texts_mu_;
  std::map<std::string, std::unique_ptr<Texts>, std::less<>> tenant_texts_;  // GUARDED_BY(texts_mu_)
  std::shared_ptr<const ScreenChain> chain_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<RadixTree> owned_tree_;  // null with PlannerOptions::engine
  std::unique_ptr<Engine> owned_engine_;   // over owned_tree_; destroyed before it
  mutable std::mutex backend_mu_;
  std::shared_ptr<const Backend> backend_;  // GUARDED_BY(backend_mu_); never null after Create
  mutable std::mutex audit_mu_;  // serialises certificate issuance (journal appends) and verification; never held across denylist calls
  const int64_t denied_kv_sweep_interval_ns_;
  std::atomic<int64_t> last_denied_kv_sweep_ns_;  // monotonic; starts at construction (the tree is empty)
  std::atomic<uint64_t> page_ins_{0}, paged_tokens_{0}, page_in_refusals_{0};
};

}  // namespace fak

#endif  // FAK_PLANNER_PLANNER_H_
