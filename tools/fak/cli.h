// The `fak` command-line tool: shared pieces — argument parsing, exit codes, model names,
// terminal output (progress bar, safe text) and the subcommand entry points.
//
// The tool is a thin layer over the public API (include/fak/ only); it adds no behaviour the
// library does not have. Errors go to stderr; exit codes are kExitOk, kExitFailure (the operation
// failed or a check did not hold) and kExitUsage (bad command line).
#ifndef FAK_TOOLS_FAK_CLI_H_
#define FAK_TOOLS_FAK_CLI_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/audit/signing_key.h"
#include "fak/core/status.h"
#include "fak/model/loaded_model.h"
#include "fak/model/model.h"
#include "fak/model/sampler.h"
#include "fak/model/speculation.h"
#include "fak/model/token_constraint.h"
#include "fak/screen/screen.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Plain argv parsing: positionals, `--name value`, `--name=value`, boolean `--flag`, `--` ends
// options; `-h`/`--help` is always a flag. An option may be repeated (GetAll sees every value).
class Args {
 public:
  struct Spec {
    std::vector<std::string_view> value_options;  // names without "--"
    std::vector<std::string_view> flags;
    // Other spellings, e.g. {"-n", "max-tokens"} or {"--temp", "temperature"}: the option is
    // stored under its name.
    std::vector<std::pair<std::string_view, std::string_view>> aliases = {};
  };
  // InvalidArgument naming an unknown option or a missing value.
  static Result<Args> Parse(std::span<char* const> argv, const Spec& spec);

  const std::vector<std::string>& positional() const { return positional_; }
  bool help() const { return Has("help"); }
  bool Has(std::string_view name) const;
  std::optional<std::string> Get(std::string_view name) const;  // the last value given
  std::vector<std::string> GetAll(std::string_view name) const;
  // Typed values; InvalidArgument naming the option when the text does not parse.
  Result<uint64_t> GetUint(std::string_view name, uint64_t default_value) const;
  Result<double> GetDouble(std::string_view name, double default_value) const;

 private:
  std::vector<std::string> positional_;
  std::vector<std::pair<std::string, std::string>> options_;  // flags hold ""
};

// Prints "fak <command>: <status>" to stderr and returns kExitFailure.
int Fail(std::string_view command, const Status& status);
// Prints "fak <command>: <message>" and the usage text to stderr and returns kExitUsage.
int UsageError(std::string_view command, std::string_view message, std::string_view usage);
// Prints `usage` to stdout and returns kExitOk (for --help).
int ShowHelp(std::string_view usage);

bool StdoutIsTerminal();
// "label [#####.....] 5/10" redrawn in place on stdout when it is a terminal; silent otherwise.
// The line is cleared when done == total.
void Progress(std::string_view label, size_t done, size_t total);
// Writes generated text to stdout. On a terminal, control bytes other than \n and \t are shown as
// \xNN (a synthetic model emits arbitrary bytes); elsewhere the bytes pass through unchanged.
void WriteText(std::string_view text);
// The whole file; "-" reads stdin. NotFound / IOError naming the path.
Result<std::string> ReadFileOrStdin(const std::string& path);

// MODEL names: LoadModel's specs (fak/model/loaded_model.h), which every command loads through.
inline constexpr char kModelHelp[] =
    "MODEL: 'embedded' (the embedded default: synthetic weights, seed 2026, byte tokenizer),\n"
    "       'embedded:SEED' (the same with other synthetic weights),\n"
    "       'shape:smollm2-135m' or 'shape:tinyllama-1.1b' (real shapes, random weights; bench and inspect only),\n"
    "       or a model file (run, chat and bench load GGUF files with their tokenizer; inspect also\n"
    "       reads safetensors).\n";
// LoadModel's options for the commands that serve a model (serve, run, chat, bench): -t/--threads,
// -c/--ctx-size where the command takes it (ModelOptions::max_context), and the KV dtype:
// --kv-dtype, else FAK_KV_DTYPE, else kServingKVDtype (f16). InvalidArgument naming a bad value.
Result<LoadOptions> ServingLoadOptions(const Args& args);
// Token ids of `prompt`, with BOS first when the tokenizer asks for it.
Result<std::vector<int32_t>> EncodePrompt(const Tokenizer& tokenizer, std::string_view prompt);
// Prefills `ids` onto `cache` and returns the last token's logits. On a terminal a long prompt is
// prefilled in chunks under a progress bar; within one kernel tier chunked and whole prefill give
// the same cache and logits bit for bit (architecture §2.1), so this changes only what is shown.
Result<std::vector<float>> PrefillWithProgress(const Model& model, KVCache* cache, std::span<const int32_t> ids);

// What `run` and `chat` share: sampling, stop strings, reply length, output form.
struct GenerationFlags {
  SamplingParams sampling;
  size_t max_tokens = 0;
  std::vector<std::string> stop;  // --stop, repeatable
  bool json = false;              // machine-readable output
  // --grammar FILE / --json-schema FILE ('-': stdin), at most one; read by GenerationConstraint.
  std::optional<std::string> grammar_file, json_schema_file;
  // --speculate off|ngram[:K]; --draft-model FILE (a draft model, loaded by SpeculationFor).
  SpeculationOptions speculation;
  std::optional<std::string> draft_model;
};
// The option names and spellings ParseGenerationFlags reads, to add to a command's Spec.
void AddGenerationOptions(Args::Spec* spec);
Result<GenerationFlags> ParseGenerationFlags(const Args& args, size_t default_max_tokens);
// The constraint --grammar or --json-schema names, over `tokenizer`'s vocabulary; null for none.
// NotFound / IOError for the file, InvalidArgument naming the rule or schema keyword (docs/grammar.md).
Result<std::shared_ptr<const TokenConstraint>> GenerationConstraint(const GenerationFlags& g, const Tokenizer& tokenizer);
// The speculation --speculate or --draft-model asks for, the draft model loaded with `load` (the
// same threads and context cap) and checked against `target`.
Result<SpeculationOptions> SpeculationFor(const GenerationFlags& g, const LoadOptions& load, const Model& target);
inline constexpr char kGenerationHelp[] =
    "generation options (run and chat):\n"
    "  -n, --max-tokens N     tokens to generate at most. Default: %zu\n"
    "  --temp, --temperature T  0 = greedy. Default: 0\n"
    "  --top-k K              keep the K most likely tokens; 0 = all. Default: 0\n"
    "  --top-p P              nucleus mass in (0, 1]. Default: 1\n"
    "  --min-p P              keep tokens at least P times as likely as the best; 0 = off. Default: 0\n"
    "  -s, --seed S           sampler seed (same seed, same tokens). Default: 0\n"
    "  --repeat-penalty R     > 1 discourages tokens of the prompt and reply (HF / llama.cpp rule). Default: 1\n"
    "  --repeat-last-n N      the penalty reads the last N tokens; 0 = all. Default: 0\n"
    "  --presence-penalty P, --frequency-penalty F  OpenAI's, in [-2, 2], over the reply. Default: 0\n"
    "  --stop TEXT            end the reply before TEXT (never printed); repeatable\n"
    "  --grammar FILE         the reply is a sentence of the GBNF grammar in FILE (start rule root; '-': stdin)\n"
    "  --json-schema FILE     the reply is JSON valid against the schema in FILE ('-': stdin); not with --grammar\n"
    "  --json                 print one JSON object per reply (text, tokens, finish_reason, usage, timings)\n"
    "  --speculate MODE       exact speculative decoding: off, ngram (prompt lookup: drafts the tokens that\n"
    "                         followed the last tokens' earlier occurrence) or ngram:K (K tokens a draft);\n"
    "                         same tokens, faster when replies repeat their context. Default: off\n"
    "  --draft-model FILE     speculate with a draft model (a smaller GGUF with the same vocabulary)\n"
    "  -t, --threads N        threads per forward pass; 0 = one per hardware thread. Default: 0\n"
    "  -c, --ctx-size N       cap the context (prompt + reply) at N tokens; 0 = the model's. Default: 0\n"
    "  --kv-dtype T           KV cache element type: f16, f32 or bf16 (docs/kv-regimes.md). Default:\n"
    "                         FAK_KV_DTYPE when set, else f16\n";
// The generation help with the command's default length filled in.
std::string GenerationHelp(size_t default_max_tokens);
// MODEL: `-m/--model` or the one positional (not both).
Result<std::string> ModelArgument(const Args& args);
// The chat template `chat` and `serve` render with: --template (a family name, or a file holding a
// Jinja template to recognise) overrides the model's; else the model's own (LoadedModel), else the
// Status saying why it has none. `m` must have a tokenizer.
Result<std::shared_ptr<const ChatTemplate>> ChatTemplateFor(const Args& args, const LoadedModel& m);
// Writes one JSON value and a newline to stdout.
void WriteJsonLine(const std::string& json);

// Where `fak chat` and `fak serve` keep their durable pieces (corpus, journal, signing key,
// certificates); a temporary one is removed on destruction.
struct StateDir {
  std::filesystem::path dir;
  bool temporary = false;
  StateDir() = default;
  StateDir(const StateDir&) = delete;
  StateDir& operator=(const StateDir&) = delete;
  ~StateDir();
};
// `requested`, or a new temporary directory named after `command`; DIR/certs is created.
Status OpenStateDir(const std::optional<std::string>& requested, std::string_view command, StateDir* state);
// DIR/key.pem: loaded when it exists, else generated and saved (mode 0600).
Result<SigningKey> StateKey(const StateDir& state);
// The built-in screens over a denylist kept in DIR/denylist (FileDenylist), so what was sealed (an
// evicted message, a quarantined tool result) stays sealed after a restart: never admitted, and its
// text never stored again. `n_sealed`: the entries it holds at start.
Result<std::shared_ptr<const ScreenChain>> StateScreenChain(const StateDir& state, size_t* n_sealed);

// Subcommands. `argv` starts after the subcommand's name.
int RunCommand(std::span<char* const> argv);
int ChatCommand(std::span<char* const> argv);
int BenchCommand(std::span<char* const> argv);
int ServeCommand(std::span<char* const> argv);  // built when FAK_WITH_SERVER
int InspectCommand(std::span<char* const> argv);
int VerifyCommand(std::span<char* const> argv);
int ManifestCommand(std::span<char* const> argv);
int StoreCommand(std::span<char* const> argv);

}  // namespace fak::cli

#endif  // FAK_TOOLS_FAK_CLI_H_
