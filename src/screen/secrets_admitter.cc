// SecretsAdmitter: private-key blocks and common API-key shapes, matched by a small table of
// prefix + alphabet + length rules (no std::regex: it is slow and throws).
#include <cctype>
#include <string>

#include "fak/screen/screen.h"

namespace fak {
namespace {

enum class Alphabet { kUpperDigit, kAlnum, kAlnumUnderscore, kAlnumDash, kAlnumDashUnderscore };

bool InAlphabet(Alphabet a, unsigned char c) {
  switch (a) {
    case Alphabet::kUpperDigit: return std::isupper(c) || std::isdigit(c);
    case Alphabet::kAlnum: return std::isalnum(c);
    case Alphabet::kAlnumUnderscore: return std::isalnum(c) || c == '_';
    case Alphabet::kAlnumDash: return std::isalnum(c) || c == '-';
    case Alphabet::kAlnumDashUnderscore: return std::isalnum(c) || c == '-' || c == '_';
  }
  return false;
}

struct KeyShape {
  std::string_view kind;
  std::string_view prefix;
  Alphabet alphabet;
  size_t min_len, max_len;  // of the part after the prefix
};

constexpr size_t kUnbounded = 1 << 20;
constexpr KeyShape kShapes[] = {
    {"aws_access_key_id", "AKIA", Alphabet::kUpperDigit, 16, 16},
    {"aws_access_key_id", "ASIA", Alphabet::kUpperDigit, 16, 16},
    {"github_token", "ghp_", Alphabet::kAlnum, 36, 255},
    {"github_token", "gho_", Alphabet::kAlnum, 36, 255},
    {"github_token", "ghu_", Alphabet::kAlnum, 36, 255},
    {"github_token", "ghs_", Alphabet::kAlnum, 36, 255},
    {"github_token", "ghr_", Alphabet::kAlnum, 36, 255},
    {"github_pat", "github_pat_", Alphabet::kAlnumUnderscore, 22, 255},
    {"slack_token", "xoxb-", Alphabet::kAlnumDash, 10, kUnbounded},
    {"slack_token", "xoxp-", Alphabet::kAlnumDash, 10, kUnbounded},
    {"slack_token", "xoxa-", Alphabet::kAlnumDash, 10, kUnbounded},
    {"slack_token", "xoxr-", Alphabet::kAlnumDash, 10, kUnbounded},
    {"slack_token", "xoxs-", Alphabet::kAlnumDash, 10, kUnbounded},
    {"api_secret_key", "sk-", Alphabet::kAlnumDashUnderscore, 32, kUnbounded},
    {"google_api_key", "AIza", Alphabet::kAlnumDashUnderscore, 35, 35},
    {"stripe_live_key", "sk_live_", Alphabet::kAlnum, 24, kUnbounded},
    {"stripe_live_key", "rk_live_", Alphabet::kAlnum, 24, kUnbounded},
};

// Offset of the first match of `shape` in `text`, or npos.
size_t FindShape(std::string_view text, const KeyShape& shape) {
  for (size_t at = text.find(shape.prefix); at != std::string_view::npos; at = text.find(shape.prefix, at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(text[at - 1]))) continue;  // glued to a word
    size_t n = 0;
    const size_t body = at + shape.prefix.size();
    while (body + n < text.size() && n <= shape.max_len && InAlphabet(shape.alphabet, static_cast<unsigned char>(text[body + n]))) ++n;
    if (n >= shape.min_len && n <= shape.max_len) return at;
  }
  return std::string_view::npos;
}

// Offset of a "-----BEGIN <...>PRIVATE KEY" header (also "PRIVATE KEY BLOCK"), or npos.
size_t FindPrivateKeyBlock(std::string_view text) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  for (size_t at = text.find(kBegin); at != std::string_view::npos; at = text.find(kBegin, at + 1)) {
    const size_t eol = text.find('\n', at);
    const std::string_view line = text.substr(at, eol == std::string_view::npos ? std::string_view::npos : eol - at);
    if (line.size() <= 80 && line.find("PRIVATE KEY") != std::string_view::npos) return at;
  }
  return std::string_view::npos;
}

class SecretsAdmitter final : public Admitter {
 public:
  std::string_view name() const override { return "secrets"; }
  std::string_view version() const override { return "1"; }
  Verdict Screen(const ScreenInput& input) const override {
    if (size_t at = FindPrivateKeyBlock(input.bytes); at != std::string_view::npos) {
      return Verdict::Quarantine("secrets", "private key block at byte " + std::to_string(at));
    }
    for (const KeyShape& shape : kShapes) {
      if (size_t at = FindShape(input.bytes, shape); at != std::string_view::npos) {
        return Verdict::Quarantine("secrets", std::string(shape.kind) + " at byte " + std::to_string(at));
      }
    }
    return Verdict::Admit();
  }
  Digest Fingerprint() const override {
    Digester d;
    d.Update("fak.secrets_admitter/1");
    for (const KeyShape& s : kShapes) {
      d.Update(s.kind).Update(s.prefix).UpdatePod(static_cast<int>(s.alphabet)).UpdatePod(s.min_len).UpdatePod(s.max_len);
    }
    return d.Finish();
  }
};

}  // namespace

std::unique_ptr<Admitter> MakeSecretsAdmitter() { return std::make_unique<SecretsAdmitter>(); }

}  // namespace fak
