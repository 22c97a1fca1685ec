// LoadModel: every spec kind the surfaces accept (embedded, embedded:SEED, the shapes, a GGUF file,
// a Hugging Face checkpoint directory), the chat template each gets, and the errors naming the spec.
#include "fak/model/loaded_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/model/hf_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::HfData;
using testing::ScratchDir;

std::string Data(const std::string& name) { return std::string(FAK_TEST_DATA_DIR) + "/" + name; }

bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

std::string RenderHello(const ChatTemplate& t) {
  const std::vector<ChatMessage> chat = {{ChatRole::kUser, "hello"}};
  Result<RenderedChat> rendered = t.Render(chat);
  return rendered ? rendered->text : rendered.error().ToString();
}

TEST(LoadModelTest, EmbeddedIsTheDemoModelWithTheFakTemplate) {
  LoadOptions options;
  options.model.n_threads = 1;
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel("embedded", options));
  ASSERT_NE(m.model, nullptr);
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->kind(), "byte");
  ASSERT_NE(m.chat_template, nullptr);
  EXPECT_OK(m.template_status);
  EXPECT_EQ(m.chat_template->family(), "fak");
  EXPECT_EQ(m.label, "embedded (synthetic weights, seed 2026)");
  ASSERT_OK_AND_ASSIGN(auto demo, Model::Synthetic(ModelConfig::EmbeddedDefault(), kEmbeddedSeed));
  EXPECT_EQ(m.model->WeightsDigest(), demo->WeightsDigest());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const ChatTemplate> t, m.RequireChatTemplate());
  EXPECT_EQ(t, m.chat_template);
}

TEST(LoadModelTest, EmbeddedSeedNamesOtherWeights) {
  ASSERT_OK_AND_ASSIGN(LoadedModel base, LoadModel("embedded"));
  ASSERT_OK_AND_ASSIGN(LoadedModel seven, LoadModel("embedded:7"));
  EXPECT_NE(seven.model->WeightsDigest(), base.model->WeightsDigest());
  EXPECT_EQ(seven.label, "embedded (synthetic weights, seed 7)");
  EXPECT_EQ(seven.chat_template->family(), "fak");
  // LoadOptions::seed is "embedded"'s; "embedded:SEED" names its own.
  LoadOptions seed7;
  seed7.seed = 7;
  ASSERT_OK_AND_ASSIGN(LoadedModel via_option, LoadModel("embedded", seed7));
  EXPECT_EQ(via_option.model->WeightsDigest(), seven.model->WeightsDigest());
  LoadOptions seed9;
  seed9.seed = 9;
  ASSERT_OK_AND_ASSIGN(LoadedModel spec_wins, LoadModel("embedded:7", seed9));
  EXPECT_EQ(spec_wins.model->WeightsDigest(), seven.model->WeightsDigest());
}

TEST(LoadModelTest, MalformedEmbeddedSeedIsAnErrorNamingTheSpec) {
  for (std::string spec : {"embedded:", "embedded:x", "embedded:-1", "embedded:7x", "embedded: 7",
                           "embedded:99999999999999999999999"}) {
    Result<LoadedModel> m = LoadModel(spec);
    ASSERT_FALSE(m.has_value()) << spec;
    EXPECT_EQ(m.error().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_TRUE(Contains(m.error().message(), "'" + spec + "'")) << m.error().ToString();
  }
}

TEST(LoadModelTest, ShapeHasNoTokenizerAndSaysSo) {
  EXPECT_TRUE(IsBuiltinModelSpec("shape:tinyllama-1.1b"));  // 1.1B random weights: named, not loaded here
  EXPECT_TRUE(ShapeModelConfig("shape:tinyllama-1.1b").has_value());
  EXPECT_FALSE(ShapeModelConfig("shape:llama-7b").has_value());
  LoadOptions options;
  options.model.n_threads = 1;
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel("shape:smollm2-135m", options));
  EXPECT_EQ(m.model->config().vocab_size, ShapeModelConfig("shape:smollm2-135m")->vocab_size);
  EXPECT_EQ(m.tokenizer, nullptr);
  EXPECT_EQ(m.chat_template, nullptr);
  EXPECT_EQ(m.label, "shape:smollm2-135m (random weights, no tokenizer)");
  EXPECT_EQ(m.template_status.code(), StatusCode::kFailedPrecondition);
  Result<std::shared_ptr<const ChatTemplate>> t = m.RequireChatTemplate();
  ASSERT_FALSE(t.has_value());
  EXPECT_TRUE(Contains(t.error().message(), "shape:smollm2-135m")) << t.error().ToString();
  EXPECT_TRUE(Contains(t.error().message(), "no tokenizer")) << t.error().ToString();
}

TEST(LoadModelTest, GgufWithItsOwnTemplate) {
  const std::string path = Data("chat/gemma3_chat.gguf");
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(path));
  ASSERT_NE(m.tokenizer, nullptr);
  ASSERT_NE(m.chat_template, nullptr);
  EXPECT_EQ(m.chat_template->variant(), "gemma3");
  EXPECT_EQ(m.chat_template->source(), "tokenizer.chat_template");
  EXPECT_EQ(m.label, path + " (" + m.model->config().Describe() + ")");
  // The same template ChatTemplate::ForModel reads from the file.
  ASSERT_OK_AND_ASSIGN(ChatTemplate direct, ChatTemplate::ForModel(path, *m.tokenizer));
  EXPECT_EQ(RenderHello(*m.chat_template), RenderHello(direct));
  EXPECT_TRUE(Contains(RenderHello(*m.chat_template), "<start_of_turn>user"));
}

TEST(LoadModelTest, GgufWithoutTemplateTakesItsArchitecturesFamily) {
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(Data("llama_cpp/qwen2_f32.gguf")));
  ASSERT_NE(m.chat_template, nullptr);
  EXPECT_EQ(m.chat_template->family(), "chatml");
  EXPECT_EQ(m.chat_template->source(), "general.architecture=qwen2");
}

TEST(LoadModelTest, GgufWithNoTemplateStillLoads) {
  const std::string path = Data("llama_cpp/llama_f32.gguf");  // llama without a Llama 3 vocabulary
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(path));
  ASSERT_NE(m.tokenizer, nullptr);  // token-level use works
  EXPECT_EQ(m.chat_template, nullptr);
  EXPECT_EQ(m.template_status.code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(m.template_status.message(), path)) << m.template_status.ToString();
  Result<std::shared_ptr<const ChatTemplate>> t = m.RequireChatTemplate();
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().ToString(), m.template_status.ToString());
}

TEST(LoadModelTest, OptionsReachTheModel) {
  LoadOptions options;
  options.model.max_context = 64;
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(Data("chat/gemma3_chat.gguf"), options));
  EXPECT_EQ(m.model->config().context_length, 64u);
}

TEST(LoadModelTest, HfCheckpointDirectoryWithItsTokenizer) {
  ScratchDir dir("loaded_model");
  for (const char* name : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(HfData(std::string("gemma/") + name), dir.path() + "/" + name);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(HfData(std::string("spm/") + name), dir.path() + "/" + name);
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadModel(dir.path()));
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->kind(), "spm");
  ASSERT_NE(m.chat_template, nullptr) << m.template_status.ToString();
  EXPECT_EQ(m.chat_template->family(), "gemma");
  EXPECT_TRUE(Contains(m.chat_template->source(), "config.json model_type=")) << m.chat_template->source();
}

TEST(LoadModelTest, HfCheckpointWithoutTokenizerIsAnError) {
  Result<LoadedModel> m = LoadModel(HfData("llama"));
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(m.error().message(), "tokenizer.json")) << m.error().ToString();
}

TEST(LoadModelTest, UnknownNameOrMissingFileIsNotFoundNamingIt) {
  for (std::string spec : {"/no/such/model.gguf", "embeded", "shape:llama-7b", ""}) {
    EXPECT_FALSE(IsBuiltinModelSpec(spec)) << spec;
    Result<LoadedModel> m = LoadModel(spec);
    ASSERT_FALSE(m.has_value()) << spec;
    EXPECT_EQ(m.error().code(), StatusCode::kNotFound) << spec;
    EXPECT_TRUE(Contains(m.error().message(), "model '" + spec + "'")) << m.error().ToString();
  }
}

TEST(LoadModelTest, CorruptFileIsAnError) {
  ScratchDir dir("loaded_model_corrupt");
  dir.Write("junk.gguf", "GGUF but not really");
  Result<LoadedModel> m = LoadModel(dir.path() + "/junk.gguf");
  ASSERT_FALSE(m.has_value());
  EXPECT_TRUE(Contains(m.error().message(), "junk.gguf")) << m.error().ToString();
}

}  // namespace
}  // namespace fak
