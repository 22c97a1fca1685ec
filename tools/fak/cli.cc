// Shared pieces of the `fak` tool: argv parsing, error reporting, terminal output.
#include "tools/fak/cli.h"

#include "fak/grammar/grammar.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/json_schema.h"
#include "fak/screen/file_denylist.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace fak::cli {
namespace {

bool Contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

constexpr size_t kPrefillChunkTokens = 64;

}  // namespace

Result<Args> Args::Parse(std::span<char* const> argv, const Spec& spec) {
  Args args;
  bool options_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string_view arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      args.positional_.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      args.options_.emplace_back("help", "");
      continue;
    }
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      inline_value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
    }
    std::string_view name;
    for (const auto& [spelling, canonical] : spec.aliases)
      if (arg == spelling) name = canonical;
    if (name.empty()) {
      if (arg.substr(0, 2) != "--") return InvalidArgument("unknown option '" + std::string(arg) + "'");
      name = arg.substr(2);
    }
    if (Contains(spec.flags, name)) {
      if (inline_value) return InvalidArgument("option --" + std::string(name) + " takes no value");
      args.options_.emplace_back(std::string(name), "");
    } else if (Contains(spec.value_options, name)) {
      if (!inline_value && i + 1 >= argv.size()) return InvalidArgument("option --" + std::string(name) + " needs a value");
      args.options_.emplace_back(std::string(name), inline_value ? *inline_value : std::string(argv[++i]));
    } else {
      return InvalidArgument("unknown option '--" + std::string(name) + "'");
    }
  }
  return args;
}

bool Args::Has(std::string_view name) const {
  return std::any_of(options_.begin(), options_.end(), [&](const auto& o) { return o.first == name; });
}

std::optional<std::string> Args::Get(std::string_view name) const {
  std::optional<std::string> value;
  for (const auto& [n, v] : options_)
    if (n == name) value = v;
  return value;
}

std::vector<std::string> Args::GetAll(std::string_view name) const {
  std::vector<std::string> values;
  for (const auto& [n, v] : options_)
    if (n == name) values.push_back(v);
  return values;
}

Result<uint64_t> Args::GetUint(std::string_view name, uint64_t default_value) const {
  std::optional<std::string> text = Get(name);
  if (!text) return default_value;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size())
    return InvalidArgument("--" + std::string(name) + " wants a non-negative integer, got '" + *text + "'");
  return value;
}

Result<double> Args::GetDouble(std::string_view name, double default_value) const {
  std::optional<std::string> text = Get(name);
  if (!text) return default_value;
  std::istringstream in(*text);
  double value = 0;
  if (!(in >> value) || !in.eof()) return InvalidArgument("--" + std::string(name) + " wants a number, got '" + *text + "'");
  return value;
}

int Fail(std::string_view command, const Status& status) {
  std::fprintf(stderr, "fak %.*s: %s\n", int(command.size()), command.data(), status.ToString().c_str());
  return kExitFailure;
}

int UsageError(std::string_view command, std::string_view message, std::string_view usage) {
  std::fprintf(stderr, "fak %.*s: %.*s\n\n%.*s", int(command.size()), command.data(), int(message.size()), message.data(),
               int(usage.size()), usage.data());
  return kExitUsage;
}

int ShowHelp(std::string_view usage) {
  std::fwrite(usage.data(), 1, usage.size(), stdout);
  return kExitOk;
}

bool StdoutIsTerminal() { return ::isatty(STDOUT_FILENO) == 1; }

void Progress(std::string_view label, size_t done, size_t total) {
  if (!StdoutIsTerminal()) return;
  const size_t width = 30, filled = total ? width * done / total : width;
  std::printf("\r%-10.*s [%s%s] %zu/%zu", int(label.size()), label.data(), std::string(filled, '#').c_str(),
              std::string(width - filled, '.').c_str(), done, total);
  if (done >= total) std::printf("\r%*s\r", 72, "");
  std::fflush(stdout);
}

void WriteText(std::string_view text) {
  if (!StdoutIsTerminal()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    for (unsigned char c : text) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        std::printf("\\x%02x", c);
      else
        std::fputc(c, stdout);
    }
  }
  std::fflush(stdout);
}

Result<std::string> ReadFileOrStdin(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("no such file '" + path + "'");
  std::ifstream in(path, std::ios::binary);
  if (!in) return IOError("cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return IOError("cannot read '" + path + "'");
  return bytes;
}

Result<LoadOptions> ServingLoadOptions(const Args& args) {
  LoadOptions options;
  FAK_ASSIGN_OR_RETURN(options.model.n_threads, args.GetUint("threads", 0));
  FAK_ASSIGN_OR_RETURN(options.model.max_context, args.GetUint("ctx-size", 0));
  options.model.default_kv_dtype = kServingKVDtype;
  if (std::optional<std::string> name = args.Get("kv-dtype")) {
    options.model.kv_dtype = ParseKVDtype(*name);
    if (!options.model.kv_dtype) return InvalidArgument("--kv-dtype '" + *name + "': expected f16, f32 or bf16");
  }
  return options;
}

void AddGenerationOptions(Args::Spec* spec) {
  for (std::string_view name : {"max-tokens", "temperature", "top-k", "top-p", "min-p", "seed", "repeat-penalty",
                                "repeat-last-n", "presence-penalty", "frequency-penalty", "stop", "threads", "ctx-size", "kv-dtype",
                                "grammar", "json-schema", "speculate", "draft-model"})
    spec->value_options.push_back(name);
  spec->flags.push_back("json");
  spec->aliases.push_back({"-n", "max-tokens"});
  spec->aliases.push_back({"--temp", "temperature"});
  spec->aliases.push_back({"-c", "ctx-size"});
  spec->aliases.push_back({"-t", "threads"});
  spec->aliases.push_back({"-s", "seed"});
}

Result<GenerationFlags> ParseGenerationFlags(const Args& args, size_t default_max_tokens) {
  GenerationFlags g;
  FAK_ASSIGN_OR_RETURN(g.max_tokens, args.GetUint("max-tokens", default_max_tokens));
  FAK_ASSIGN_OR_RETURN(double temperature, args.GetDouble("temperature", 0.0));
  FAK_ASSIGN_OR_RETURN(double top_p, args.GetDouble("top-p", 1.0));
  FAK_ASSIGN_OR_RETURN(double penalty, args.GetDouble("repeat-penalty", 1.0));
  FAK_ASSIGN_OR_RETURN(uint64_t top_k, args.GetUint("top-k", 0));
  FAK_ASSIGN_OR_RETURN(uint64_t seed, args.GetUint("seed", 0));
  FAK_ASSIGN_OR_RETURN(g.sampling, SamplingParams::FromDoubles(temperature, top_k, top_p, penalty, seed));
  FAK_ASSIGN_OR_RETURN(double min_p, args.GetDouble("min-p", 0.0));
  FAK_ASSIGN_OR_RETURN(double presence, args.GetDouble("presence-penalty", 0.0));
  FAK_ASSIGN_OR_RETURN(double frequency, args.GetDouble("frequency-penalty", 0.0));
  FAK_ASSIGN_OR_RETURN(g.sampling.repetition_window, args.GetUint("repeat-last-n", 0));
  FAK_ASSIGN_OR_RETURN(g.sampling.min_p, SamplingFloat(min_p, "--min-p"));
  g.sampling.presence_penalty = static_cast<float>(presence);
  g.sampling.frequency_penalty = static_cast<float>(frequency);
  FAK_RETURN_IF_ERROR(g.sampling.Validate());
  for (std::string& stop : args.GetAll("stop")) {
    if (stop.empty()) return InvalidArgument("--stop wants a non-empty text");
    g.stop.push_back(std::move(stop));
  }
  g.json = args.Has("json");
  g.grammar_file = args.Get("grammar");
  g.json_schema_file = args.Get("json-schema");
  if (g.grammar_file && g.json_schema_file) return InvalidArgument("give --grammar or --json-schema, not both");
  if (std::optional<std::string> mode = args.Get("speculate")) {
    Result<SpeculationOptions> parsed = ParseSpeculation(*mode);
    if (!parsed) return parsed.error().WithContext("--speculate");
    g.speculation = std::move(*parsed);
  }
  g.draft_model = args.Get("draft-model");
  if (g.draft_model && g.speculation.source != DraftSource::kNone)
    return InvalidArgument("give --speculate or --draft-model, not both");
  return g;
}

Result<SpeculationOptions> SpeculationFor(const GenerationFlags& g, const LoadOptions& load, const Model& target) {
  SpeculationOptions speculation = g.speculation;
  if (g.draft_model) {
    FAK_ASSIGN_OR_RETURN(LoadedModel draft, LoadModel(*g.draft_model, load));
    speculation.source = DraftSource::kModel;
    speculation.draft_model = std::move(draft.model);
  }
  FAK_RETURN_IF_ERROR(speculation.Validate(target).WithContext(g.draft_model ? "--draft-model" : "--speculate"));
  return speculation;
}

Result<std::shared_ptr<const TokenConstraint>> GenerationConstraint(const GenerationFlags& g, const Tokenizer& tokenizer) {
  if (!g.grammar_file && !g.json_schema_file) return std::shared_ptr<const TokenConstraint>();
  const std::string_view flag = g.grammar_file ? "--grammar" : "--json-schema";
  FAK_ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(g.grammar_file ? *g.grammar_file : *g.json_schema_file));
  if (g.json_schema_file) {
    Result<std::string> gbnf = JsonSchemaToGbnf(text);
    if (!gbnf) return gbnf.error().WithContext(flag);
    text = std::move(*gbnf);
  }
  Result<Grammar> grammar = Grammar::Parse(text);
  if (!grammar) return grammar.error().WithContext(flag);
  FAK_ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> vocabulary, TokenVocabulary::Build(tokenizer));
  return std::shared_ptr<const TokenConstraint>(std::make_shared<GrammarConstraint>(std::move(*grammar), std::move(vocabulary)));
}

std::string GenerationHelp(size_t default_max_tokens) {
  std::string help(sizeof(kGenerationHelp) + 16, '\0');
  help.resize(std::snprintf(help.data(), help.size(), kGenerationHelp, default_max_tokens));
  return help;
}

Result<std::string> ModelArgument(const Args& args) {
  std::optional<std::string> named = args.Get("model");
  const size_t n = args.positional().size() + (named ? 1 : 0);
  if (n != 1) return InvalidArgument(n == 0 ? "expected a MODEL" : "expected one MODEL (positional or -m, not both)");
  return named ? *named : args.positional()[0];
}

Result<std::shared_ptr<const ChatTemplate>> ChatTemplateFor(const Args& args, const LoadedModel& m) {
  std::optional<std::string> given = args.Get("template");
  if (!given) return m.RequireChatTemplate();
  std::error_code ec;
  Result<ChatTemplate> chosen = ChatTemplate::ForFamily(*given, *m.tokenizer);
  if (std::filesystem::is_regular_file(*given, ec)) {
    FAK_ASSIGN_OR_RETURN(std::string source, ReadFileOrStdin(*given));
    chosen = ChatTemplate::Recognize(source, *m.tokenizer);
  }
  if (!chosen) return chosen.error();
  return std::make_shared<const ChatTemplate>(std::move(*chosen));
}

void WriteJsonLine(const std::string& json) {
  std::fwrite(json.data(), 1, json.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

Result<std::vector<int32_t>> EncodePrompt(const Tokenizer& tokenizer, std::string_view prompt) {
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(prompt));
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) ids.insert(ids.begin(), tokenizer.bos_id());
  if (ids.empty()) return InvalidArgument("the prompt is empty and the tokenizer adds no BOS token");
  return ids;
}

Result<std::vector<float>> PrefillWithProgress(const Model& model, KVCache* cache, std::span<const int32_t> ids) {
  if (!StdoutIsTerminal() || ids.size() <= 4 * kPrefillChunkTokens) return model.Prefill(cache, ids);
  std::vector<float> logits;
  for (size_t done = 0; done < ids.size();) {
    const size_t n = std::min(kPrefillChunkTokens, ids.size() - done);
    const LogitsMode mode = done + n == ids.size() ? LogitsMode::kLast : LogitsMode::kNone;
    FAK_ASSIGN_OR_RETURN(logits, model.Prefill(cache, ids.subspan(done, n), mode));
    done += n;
    Progress("prefill", done, ids.size());
  }
  return logits;
}

StateDir::~StateDir() {
  std::error_code ec;
  if (temporary) std::filesystem::remove_all(dir, ec);
}

Status OpenStateDir(const std::optional<std::string>& requested, std::string_view command, StateDir* state) {
  std::error_code ec;
  if (requested) {
    state->dir = *requested;
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path(ec) / ("fak-" + std::string(command) + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) return IOError("cannot create a temporary directory " + tmpl);
    state->dir = tmpl;
    state->temporary = true;
  }
  std::filesystem::create_directories(state->dir / "certs", ec);
  if (ec) return IOError("cannot create " + (state->dir / "certs").string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::shared_ptr<const ScreenChain>> StateScreenChain(const StateDir& state, size_t* n_sealed) {
  auto chain = std::make_shared<ScreenChain>(ScreenChain::Default());
  FAK_ASSIGN_OR_RETURN(std::shared_ptr<FileDenylist> denylist, FileDenylist::Open((state.dir / "denylist").string()));
  *n_sealed = denylist->size();
  FAK_RETURN_IF_ERROR(chain->set_denylist(std::move(denylist)));
  return std::shared_ptr<const ScreenChain>(std::move(chain));
}

Result<SigningKey> StateKey(const StateDir& state) {
  const std::string path = (state.dir / "key.pem").string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return SigningKey::LoadPem(path);
  FAK_ASSIGN_OR_RETURN(SigningKey key, SigningKey::Generate());
  FAK_RETURN_IF_ERROR(key.SavePem(path));
  return key;
}

}  // namespace fak::cli
