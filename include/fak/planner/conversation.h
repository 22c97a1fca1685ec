// A conversation as the Planner takes it (messages with their kinds, per tenant) and what a turn,
// a screen or an erasure gives back: plain values, copy freely. fak/planner/planner.h is the
// Planner that uses them.
#ifndef FAK_PLANNER_CONVERSATION_H_
#define FAK_PLANNER_CONVERSATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/audit/deletion_certificate.h"
#include "fak/core/digest.h"
#include "fak/gate/resident_claim.h"
#include "fak/model/sampler.h"
#include "fak/screen/screen.h"
#include "fak/session/kv_pager.h"
#include "fak/session/radix_tree.h"
#include "fak/tokenizer/chat_template.h"

namespace fak {

struct Message {
  SegmentKind kind = SegmentKind::kUser;
  std::string text;
};

struct Conversation {
  std::string tenant = std::string(kDefaultTenant);
  std::vector<Message> messages;
};

struct CompleteParams {
  // stop_tokens, when empty, are EndOfGenerationTokens of the tokenizer and chat template (EOS
  // and the template's end-of-turn tokens).
  GenerateParams generate;
  // The reply ends before the first of these; none is ever part of it, nor streamed.
  std::vector<std::string> stop;
  // Called with each piece of generated text as it becomes safe to show (see TextStream), on the
  // engine's step thread; returning false stops generation.
  std::function<bool(std::string_view)> on_text;
  // Asked every few milliseconds while the turn runs (from another thread); true cancels it, prefill
  // included — e.g. its client went away. The result then has finish kCancelled. Null: never.
  std::function<bool()> cancelled;
  // Names the live conversation this call continues (unique within its tenant). When set, Complete
  // pins the texts of its messages in the text store until ReleaseSession, so evicting the store
  // can never take the source a later regen of the conversation needs. Empty: nothing is pinned.
  std::string session;
};

struct MessageOutcome {
  Digest source_digest;  // sha256 of the message text as given
  Verdict verdict;
  bool sealed = false;   // replaced by its stub (quarantined now or earlier)
  bool reused = false;   // its KV came from the tree
};

struct CompleteResult {
  std::string text;                // the reply (without the stop token's or stop string's text)
  std::vector<int32_t> generated;  // its token ids (a stop token included)
  FinishReason finish = FinishReason::kLength;
  size_t context_tokens = 0;       // rendered conversation + reply header
  size_t reused_tokens = 0;        // served from the tree (paged-in tokens included)
  size_t paged_tokens = 0;         // context tokens read from the KV tier by this call (a paged last
                                   // token is still prefilled, for its logits)
  PageInFailure page_in = PageInFailure::kNone;  // why the page-in stopped short (kNone: not asked, or no refusal)
  size_t prefilled_tokens = 0;
  std::vector<MessageOutcome> messages;
  std::vector<DeletionCertificate> certificates;  // issued during this call
  ClaimVerdict gate;               // the tree's verdict for this claim
  double prefill_ms = 0, decode_ms = 0;
};

// A chat screened for a request the serving Engine runs as messages (Planner::ScreenChat).
struct ScreenedChat {
  std::vector<ChatMessage> messages;     // what to run: each sealed message replaced by its stub
  std::vector<MessageOutcome> outcomes;  // one per message, in order
  std::vector<Digest> newly_sealed;      // quarantined by this call (their KV must go everywhere)
};

// What an erasure removed (Planner::EraseText); the host adds the copies it holds (KV tiers, other
// engines' trees) before reporting it.
struct ErasureReport {
  Digest source_digest;
  bool newly_sealed = false;   // false: it was sealed already (the copies are removed again anyway)
  bool text_erased = false;    // its bytes were in the text store and are gone
  size_t tree_tokens = 0;      // resident KV tokens evicted from the planner's tree
  uint64_t journal_seq = 0;    // the "erasure" row
};

}  // namespace fak

#endif  // FAK_PLANNER_CONVERSATION_H_
