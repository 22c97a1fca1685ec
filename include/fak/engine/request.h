// What a caller hands the serving Engine (EngineRequest) and what it gets back (EngineResult).
//
// A request carries either token ids or chat messages, which the engine renders with its
// ChatTemplate (EngineOptions::chat_template). Plain values; copy freely (the callback is copied
// with them).
#ifndef FAK_ENGINE_REQUEST_H_
#define FAK_ENGINE_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/grammar/tool_calls.h"
#include "fak/model/embedding.h"
#include "fak/model/sampler.h"
#include "fak/model/token_constraint.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"
#include "fak/session/source_span.h"
#include "fak/tokenizer/chat_template.h"

namespace fak {

using RequestId = uint64_t;  // 0 is never issued

// Interactive requests go first everywhere: admission, a step's prefill tokens, and memory (a
// background request is preempted before any interactive one). Background work — a rollout's
// backfill, warming the tree with known prefixes — fills what interactive work leaves of each
// step, in the same batched forward passes.
enum class RequestPriority { kInteractive, kBackground };

// One generated token as the engine streams it.
struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;
  // The text TextStream released with this token: possibly empty (held back as a possible stop
  // string or half a UTF-8 character, or a stop token, which has no text); on the request's last
  // token it also carries what was held back.
  std::string_view text;
  // The token's log-probabilities when the request asked for them (EngineRequest::logprobs); else null.
  const TokenLogprobs* logprobs = nullptr;
};

// Runs on the engine's step thread (or whichever thread calls Step): keep it short, it delays every
// running request. Returning false cancels the request after this token. It may call
// Engine::Cancel and Engine::Submit, never Shutdown or Wait.
using TokenCallback = std::function<bool(const TokenEvent&)>;

struct EngineRequest {
  // Namespace of its prefix reuse (the radix tree's gate): IsValidTenant. Default: "default".
  std::string tenant = std::string(kDefaultTenant);
  // Token ids, at least one, each below the model's vocabulary size; or, instead, `messages`.
  std::vector<int32_t> prompt;
  // A conversation, rendered with EngineOptions::chat_template and its generation prompt, and
  // tokenized with the messages' text as plain text (EncodeRendered). With messages, empty
  // stop_tokens mean EndOfGenerationTokens (EOS and the template's end-of-turn tokens).
  std::vector<ChatMessage> messages;
  // With messages: the tools offered and how they may be called (OpenAI's tools, tool_choice,
  // parallel_tool_calls). Engine::Prepare renders them through the template (a template without
  // tools gets them described in the system message); for required or a named tool it installs
  // the grammar that forces calls as `constraint` (InvalidArgument if one is set already), for auto
  // (where the family marks its calls, and no constraint is set) a TriggeredGrammarConstraint that
  // leaves the text free until the call marker. Read the reply's calls with ToolCallReader.
  // Default: none.
  ToolRequest tools;
  // Which source texts runs of a token-id `prompt` came from (e.g. ChatSourceRuns of a chat the host
  // rendered itself), recorded with its KV in the tree and every tier so SourceSweeper and
  // page-in's denylist check reach it. Each run non-empty and within the prompt. With `messages`
  // the engine computes them itself: leave empty. Default: none (the KV is indexed by no text).
  std::vector<SourceSpan> sources;
  // Sampling and what is reported of it. One Sampler per request (in its Generation), seeded from
  // `sampling`; logit_bias ids must be below the model's vocabulary. Default: greedy.
  SamplingParams sampling;
  // Report each generated token's log-probability (LogprobsOf: the model's distribution before any
  // sampling change) and those of the top_logprobs (at most kMaxTopLogprobs) most likely tokens,
  // in EngineResult::logprobs and each TokenEvent. Default: off.
  bool logprobs = false;
  size_t top_logprobs = 0;
  // Which tokens may come next (a grammar or JSON schema: fak/grammar/grammar_constraint.h),
  // applied between the logits and the sampler; when it admits nothing more the request finishes
  // as at a stop token. Shared, immutable. Default: none.
  std::shared_ptr<const TokenConstraint> constraint;
  // Generation ends after this many tokens. 0: prefill only — the prompt's KV is computed and given
  // to the radix tree, nothing is sampled (warming the tree; finish is kLength). Default: 64.
  size_t max_tokens = 64;
  RequestPriority priority = RequestPriority::kInteractive;
  // Generation ends after emitting any of these (the id is in the result's tokens, with no text).
  std::vector<int32_t> stop_tokens;
  // Special tokens the reply's text spells by their vocabulary text (GenerateParams::spelled_tokens).
  // With tools, Prepare adds the family's call marker when the vocabulary holds it as one special
  // token that decodes to nothing, so ToolCallReader reads the call. Default: none.
  std::vector<int32_t> spelled_tokens;
  // Generation ends when the text contains one of these; it is never emitted, nor what follows.
  // An empty one is InvalidArgument at Submit (Generation::Create).
  std::vector<std::string> stop_strings;
  // Env::NowMonotonicNanos of the engine's Env past which the request finishes with kDeadline;
  // checked before every step. 0: none.
  int64_t deadline_ns = 0;
  TokenCallback on_token;  // may be empty
  // Use the engine's speculative decoding (EngineOptions::speculation) when it has one; its tokens
  // are the same either way. Default: true.
  bool speculate = true;
  // Keep the logits each generated token was sampled from (tests and witnesses; costs a vocabulary
  // of floats per token).
  bool record_logits = false;
  // Embed instead of generate: the prompt is read in the steps' batches like any other (chunked,
  // fair-shared, budgeted, cancellable) and the request finishes (kStopToken, no token) with its
  // pooled final hidden state in EngineResult::embedding — the bits Embed gives it alone. Nothing is
  // sampled: the generation fields (sampling, logprobs, constraint, max_tokens, stops, speculate)
  // are ignored. Its KV is never taken from the tree nor given to it (pooling reads every token's
  // hidden state; a prefix from the tree has none), so nothing of it outlives the request.
  // Default: none (generate).
  std::optional<EmbedParams> embed;
};

struct RequestUsage {
  size_t prompt_tokens = 0;
  size_t cached_tokens = 0;     // prompt tokens served from the radix tree at first admission
  size_t paged_tokens = 0;      // prompt tokens read from the KV tier for it (EngineOptions::pager); a
                                // paged last prompt token is still prefilled
  size_t page_ins = 0;          // times the KV tier was asked for its prefix
  PageInFailure page_in_failure = PageInFailure::kNone;  // why the last page-in stopped short, for its logits
  size_t generated_tokens = 0;
  size_t preemptions = 0;       // times its cache was dropped for memory and recomputed later
  size_t recomputed_tokens = 0; // tokens prefilled again after preemptions
  size_t draft_tokens = 0;      // speculative draft tokens verified for it
  size_t accepted_draft_tokens = 0;  // of them, the ones its generation chose
};

// Env::NowMonotonicNanos of the engine's Env.
struct RequestTimings {
  int64_t submitted_ns = 0;
  int64_t first_token_ns = 0;          // 0 when none was generated
  std::vector<int64_t> token_ns;       // when each generated token was sampled
  int64_t finished_ns = 0;
};

struct EngineResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token included)
  std::string text;             // the text streamed, without any stop string
  FinishReason finish = FinishReason::kLength;
  Status error;                 // set when finish == kError
  RequestUsage usage;
  RequestTimings timings;
  std::vector<std::vector<float>> logits;  // when record_logits: logits[i] produced tokens[i]
  std::vector<TokenLogprobs> logprobs;     // when EngineRequest::logprobs: logprobs[i] of tokens[i]
  std::vector<float> embedding;            // when EngineRequest::embed: [hidden_size]
};

}  // namespace fak

#endif  // FAK_ENGINE_REQUEST_H_
