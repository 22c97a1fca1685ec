// What answers OpenAI requests: an engine on one model, and what a request needs of that model.
// The server holds the current one; a rollout builds the next when it begins and installs it at
// cutover. Each request holds its own reference for its whole life, so a request running when the
// switch happens finishes on the engine it started on, and a replaced engine (with its tree and
// weights) is freed when its last request ends — it takes no new ones, so that is its drain.
#ifndef FAK_SRC_SERVER_SERVING_H_
#define FAK_SRC_SERVER_SERVING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/session/radix_tree.h"
#include "src/server/server.h"

namespace fak::internal {

// Members are declared so that destruction frees the engine first, then the tree it may share,
// then the weights both are built on.
struct Serving {
  std::shared_ptr<const LoadedModel> weights;   // a rollout's model, tokenizer and template; null: the host's
  std::shared_ptr<RadixTree> tree;              // the tree the engine shares (blue_green's warmed one); may be null
  std::unique_ptr<Engine> owned_engine;         // null: the host's engine, which the host shuts down
  Engine* engine = nullptr;
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::string model_id;  // the id in /v1/models, which requests must name
  std::string label;     // how the weights were named
  std::vector<int32_t> completion_stop_tokens;  // a chat's are the engine's (Engine::Prepare)
  // Empty when the engine renders chats with the model's own template; else why it has none, and
  // so renders with the host's (a rollout to a model without a template).
  std::string borrowed_template_reason;

};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_SERVING_H_
