// `fak chat`: a stdin REPL through the Planner — prefix reuse, screening of tool results, exact
// eviction and deletion certificates, exactly as an agent runtime embedding fak would get them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "fak/audit/audit.h"
#include "fak/store/blob_store.h"
#include "fak/planner/planner.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kChatUsage =
    "usage: fak chat MODEL [options]\n"
    "\n"
    "Reads one user message per line from stdin (a terminal or a pipe) and streams each reply through\n"
    "the planner, rendered with the model's chat template: the conversation's earlier turns are\n"
    "reused from the radix tree, tool results are screened and a quarantined one is evicted at once\n"
    "with a signed deletion certificate. A reply ends at the model's end-of-turn token, EOS, a --stop\n"
    "text or the length limit. With --grammar or --json-schema every reply is held to it (a FILE, not\n"
    "stdin). Per-turn numbers go to stderr.\n"
    "\n"
    "lines:\n"
    "  TEXT                   a user message; the model replies\n"
    "  /tool TEXT             a tool result (screened), then the model replies\n"
    "  /quit                  end (so does end of input)\n"
    "\n"
    "options:\n"
    "  -m, --model MODEL      the model (or give it as the positional argument)\n"
    "  --system TEXT          a system message first. Default: none\n"
    "  --template NAME|FILE   the chat template: a family (gemma, llama3, chatml, mistral, llama2,\n"
    "                         phi3, fak) or a file with a Jinja template. Default: the model's own\n"
    "  --tenant NAME          the tenant the radix tree serves. Default: \"default\"\n"
    "  --state DIR            keep the corpus (DIR/corpus), journal (DIR/journal.log), signing key\n"
    "                         (DIR/key.pem), certificates (DIR/certs/SEQ.json) and seals\n"
    "                         (DIR/denylist: a quarantined text stays sealed across restarts) in DIR,\n"
    "                         for `fak verify` and `fak store fsck`. Default: a temporary directory,\n"
    "                         removed at exit\n";
constexpr size_t kChatDefaultMaxTokens = 128;

Status SaveCertificate(const StateDir& state, const DeletionCertificate& cert, std::string* path_out) {
  FAK_ASSIGN_OR_RETURN(std::string json, cert.ToJson());
  *path_out = (state.dir / "certs" / (std::to_string(cert.journal_seq) + ".json")).string();
  std::ofstream out(*path_out, std::ios::binary | std::ios::trunc);
  out << json << '\n';
  out.close();
  if (!out) return IOError("cannot write " + *path_out);
  return Status::Ok();
}

// Per-turn numbers to stderr; the certificate paths written, for --json.
std::vector<std::string> ReportTurn(const StateDir& state, const CompleteResult& r) {
  std::vector<std::string> written;
  std::fprintf(stderr, "[context %zu tokens: %zu reused, %zu prefilled; %zu generated (%s); prefill %.1f ms, decode %.1f ms]\n",
               r.context_tokens, r.reused_tokens, r.prefilled_tokens, r.generated.size(),
               std::string(FinishReasonName(r.finish)).c_str(), r.prefill_ms, r.decode_ms);
  for (const MessageOutcome& m : r.messages) {
    if (!m.verdict.quarantined() || !m.sealed) continue;
    std::fprintf(stderr, "[sealed %s…: quarantined by %s (%s)]\n", m.source_digest.Hex().substr(0, 12).c_str(),
                 m.verdict.detector.c_str(), m.verdict.reason.c_str());
  }
  for (const DeletionCertificate& cert : r.certificates) {
    std::string path;
    Status saved = SaveCertificate(state, cert, &path);
    if (saved.ok()) written.push_back(path);
    std::fprintf(stderr, "[evicted %llu tokens, certified: journal row #%llu, max|dlogit| %g; %s]\n",
                 static_cast<unsigned long long>(cert.evicted_count), static_cast<unsigned long long>(cert.journal_seq),
                 cert.max_abs_delta, saved.ok() ? ("certificate " + path).c_str() : saved.ToString().c_str());
  }
  return written;
}

std::string TurnJson(size_t turn, const CompleteResult& r, const std::vector<std::string>& certificates) {
  nlohmann::json j = {
      {"turn", turn},
      {"text", r.text},
      {"finish_reason", std::string(FinishReasonName(r.finish))},
      {"usage",
       {{"prompt_tokens", r.context_tokens}, {"cached_tokens", r.reused_tokens}, {"completion_tokens", r.generated.size()}}},
      {"timings", {{"prefill_ms", r.prefill_ms}, {"decode_ms", r.decode_ms}}},
      {"certificates", certificates},
  };
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct ChatSettings {
  CompleteParams params;
  Conversation conversation;
  bool json = false;
  GenerationFlags flags;  // for the constraint, built once the tokenizer is loaded
};

// The REPL: one line in, one reply out, until /quit or end of input.
Status Repl(Planner& planner, const StateDir& state, ChatSettings& s) {
  const bool interactive = ::isatty(STDIN_FILENO) == 1 && StdoutIsTerminal() && !s.json;
  if (!s.json) {
    s.params.on_text = [](std::string_view piece) {
      WriteText(piece);
      return true;
    };
  }
  size_t turn = 0;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line) || line == "/quit") break;
    if (line.empty()) continue;
    if (line.rfind("/tool ", 0) == 0) {
      s.conversation.messages.push_back({SegmentKind::kToolResult, line.substr(6)});
    } else if (line[0] == '/') {
      std::fprintf(stderr, "unknown command '%s' (try /tool TEXT or /quit)\n", line.c_str());
      continue;
    } else {
      s.conversation.messages.push_back({SegmentKind::kUser, line});
    }
    FAK_ASSIGN_OR_RETURN(CompleteResult r, planner.Complete(s.conversation, s.params));
    if (!s.json) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
    const std::vector<std::string> certificates = ReportTurn(state, r);
    if (s.json) WriteJsonLine(TurnJson(++turn, r, certificates));
    s.conversation.messages.push_back({SegmentKind::kAssistant, r.text});
  }
  if (!state.temporary)
    std::fprintf(stderr, "[state in %s; issuer key %s]\n", state.dir.c_str(), planner.public_key().Hex().c_str());
  return Status::Ok();
}

Result<ChatSettings> ParseSettings(const Args& args) {
  ChatSettings s;
  FAK_ASSIGN_OR_RETURN(GenerationFlags g, ParseGenerationFlags(args, kChatDefaultMaxTokens));
  s.params.generate.max_new_tokens = g.max_tokens;
  s.params.generate.sampling = g.sampling;
  s.params.stop = std::move(g.stop);
  s.json = g.json;
  if (g.grammar_file == "-" || g.json_schema_file == "-")
    return InvalidArgument("stdin holds the conversation: give --grammar or --json-schema a file");
  s.flags = std::move(g);
  if (std::optional<std::string> tenant = args.Get("tenant")) s.conversation.tenant = *tenant;
  if (std::optional<std::string> system = args.Get("system")) s.conversation.messages.push_back({SegmentKind::kSystem, *system});
  return s;
}

}  // namespace

int ChatCommand(std::span<char* const> argv) {
  Args::Spec spec{{"model", "system", "template", "tenant", "state"}, {}, {{"-m", "model"}}};
  AddGenerationOptions(&spec);
  const std::string usage = std::string(kChatUsage) + GenerationHelp(kChatDefaultMaxTokens);
  Result<Args> args = Args::Parse(argv, spec);
  if (!args) return UsageError("chat", args.error().message(), usage);
  if (args->help()) return ShowHelp(usage + "\n" + kModelHelp);
  Result<std::string> model_spec = ModelArgument(*args);
  if (!model_spec) return UsageError("chat", model_spec.error().message(), usage + kModelHelp);
  Result<ChatSettings> settings = ParseSettings(*args);
  Result<LoadOptions> load = ServingLoadOptions(*args);
  for (const Status& s : {settings.error(), load.error()})
    if (!s.ok()) return UsageError("chat", s.message(), usage);

  Result<LoadedModel> m = LoadModel(*model_spec, *load);
  if (!m) return Fail("chat", m.error());
  if (!m->tokenizer) return Fail("chat", Unsupported(m->label + " has no tokenizer; it serves `fak bench` and `fak inspect`"));
  Result<std::shared_ptr<const TokenConstraint>> constraint = GenerationConstraint(settings->flags, *m->tokenizer);
  if (!constraint) return Fail("chat", constraint.error());
  settings->params.generate.constraint = std::move(*constraint);
  Result<std::shared_ptr<const ChatTemplate>> chat_template = ChatTemplateFor(*args, *m);
  if (!chat_template) return Fail("chat", chat_template.error());
  std::fprintf(stderr, "[chat template %s, from %s]\n", std::string((*chat_template)->variant()).c_str(),
               std::string((*chat_template)->source()).c_str());
  StateDir state;
  if (Status s = OpenStateDir(args->Get("state"), "chat", &state); !s.ok()) return Fail("chat", s);
  Result<SigningKey> key = StateKey(state);
  if (!key) return Fail("chat", key.error());
  Result<std::unique_ptr<BlobStore>> blobs = OpenDirectoryBlobStore((state.dir / "corpus").string());
  if (!blobs) return Fail("chat", blobs.error());
  size_t n_sealed = 0;
  Result<std::shared_ptr<const ScreenChain>> chain = StateScreenChain(state, &n_sealed);
  if (!chain) return Fail("chat", chain.error());
  PlannerOptions options;
  options.journal_path = (state.dir / "journal.log").string();
  options.chat_template = std::move(*chat_template);
  options.chain = std::move(*chain);
  // Speculation is the engine's: with it the turns run on an engine made here (outliving the planner).
  Result<SpeculationOptions> speculation = SpeculationFor(settings->flags, *load, *m->model);
  if (!speculation) return Fail("chat", speculation.error());
  std::unique_ptr<Engine> engine;
  if (speculation->source != DraftSource::kNone) {
    EngineOptions engine_options;
    engine_options.speculation = std::move(*speculation);
    Result<std::unique_ptr<Engine>> made = Engine::Create(*m->model, *m->tokenizer, std::move(engine_options));
    if (!made) return Fail("chat", made.error());
    engine = std::move(*made);
    options.engine = engine.get();
  }
  Result<std::unique_ptr<Planner>> planner = Planner::Create(*m->model, *m->tokenizer, *key, **blobs, options);
  if (!planner) return Fail("chat", planner.error());
  if (Status s = Repl(**planner, state, *settings); !s.ok()) return Fail("chat", s);
  return kExitOk;
}

}  // namespace fak::cli
