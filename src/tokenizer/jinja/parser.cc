// Jinja source → AST: a lexer that applies jinja2's whitespace rules (trim_blocks, lstrip_blocks,
// `-` markers, the dropped trailing newline) exactly as its regexes do, and a recursive-descent
// parser with jinja2's operator precedence. Constructs outside the subset are refused by name.
#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "src/tokenizer/jinja/ast.h"
#include "src/tokenizer/jinja/template.h"
#include "src/tokenizer/unicode.h"

namespace fak::jinja {

namespace {

constexpr int kMaxParseDepth = 128;  // nested expressions and blocks; the parser recurses per level

// Python's str.rstrip() / the length of what `\s*` matches at the start (Unicode whitespace).
size_t RStripLength(std::string_view s) {
  std::vector<internal::CodePoint> cps = internal::DecodeUtf8(s);
  size_t e = cps.size();
  while (e > 0 && IsPythonSpace(cps[e - 1].cp)) --e;
  return e == 0 ? 0 : cps[e - 1].offset + cps[e - 1].len;
}
size_t LeadingSpace(std::string_view s) {
  size_t n = 0;
  for (const internal::CodePoint& c : internal::DecodeUtf8(s.substr(0, std::min<size_t>(s.size(), 1 << 16)))) {
    if (!IsPythonSpace(c.cp)) break;
    n = c.offset + c.len;
  }
  // Whitespace runs longer than the window are rare; continue past it.
  return n == (1 << 16) ? n + LeadingSpace(s.substr(n)) : n;
}

// jinja2 reads the source with str.splitlines() and joins the lines with "\n": every Python line
// break becomes "\n", and one trailing line break disappears (keep_trailing_newline=False).
std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (const internal::CodePoint& c : internal::DecodeUtf8(src)) {
    const uint32_t cp = c.cp;
    if (cp == '\r' && c.offset + 1 < src.size() && src[c.offset + 1] == '\n') continue;  // \r\n is one break
    if (cp == '\r' || cp == '\v' || cp == '\f' || cp == 0x1C || cp == 0x1D || cp == 0x1E || cp == 0x85 ||
        cp == 0x2028 || cp == 0x2029) {
      out += '\n';
    } else {
      out.append(src.substr(c.offset, c.len));
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // data, name, operator, or the string literal's value
  int line = 0;
  int64_t i = 0;
  double f = 0;
};

Status SyntaxError(int line, std::string what) {
  return InvalidArgument("jinja syntax error at line " + std::to_string(line) + ": " + what);
}

// Python's escapes in a string literal (jinja2 decodes literals with "unicode-escape").
Result<std::string> Unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t n) -> Result<uint32_t> {
      uint32_t v = 0;
      auto [p, ec] = std::from_chars(body.data() + i + 1, body.data() + i + 1 + n, v, 16);
      if (ec != std::errc() || p != body.data() + i + 1 + n) return SyntaxError(line, "bad \\x/\\u escape");
      i += n;
      return v;
    };
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '0': out += '\0'; break;
      case '\n': break;  // a backslash-newline continues the line
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + n >= body.size()) return SyntaxError(line, "truncated \\" + std::string(1, c) + " escape");
        FAK_ASSIGN_OR_RETURN(uint32_t cp, hex(n));
        if (cp > 0x10FFFF) return SyntaxError(line, "escape past U+10FFFF");
        internal::AppendUtf8(cp, out);
        break;
      }
      default:  // Python keeps an unknown escape as written
        out += '\\';
        out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t at = pos;
      while (true) {
        at = src_.find('{', at);
        if (at == std::string::npos || at + 1 >= src_.size()) {
          at = std::string::npos;
          break;
        }
        const char k = src_[at + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++at;
      }
      if (at == std::string::npos) {
        Data(src_.substr(pos), pos);
        break;
      }
      const char kind = src_[at + 1];
      std::string text = src_.substr(pos, at - pos);
      const char lmod = at + 2 < src_.size() ? src_[at + 2] : '\0';
      if (lmod == '-') {
        text.resize(RStripLength(text));
      } else if (lmod != '+' && kind != '{') {
        // lstrip_blocks: whitespace between a line's start and a block or comment tag goes.
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
      }
      Data(text, pos);
      size_t p = at + 2 + (lmod == '-' || lmod == '+' ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", p);
        if (end == std::string::npos) return SyntaxError(LineAt(at), "comment not closed");
        p = end + 2;
        const char rmod = end - 1 >= at + 2 ? src_[end - 1] : '\0';
        p = AfterTag(p, rmod == '-', /*block=*/rmod != '+');
      } else {
        FAK_ASSIGN_OR_RETURN(p, Tag(kind == '{', p, at));
      }
      line_starting = p > 0 && src_[p - 1] == '\n';
      pos = p;
    }
    tokens_.push_back({Tok::kEof, "", LineAt(src_.size())});
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t pos) {
    while (line_pos_ < pos && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    return line_;
  }

  void Data(std::string text, size_t pos) {
    if (!text.empty()) tokens_.push_back({Tok::kData, std::move(text), LineAt(pos)});
  }

  // Past a tag's end at `p`: `-` eats all whitespace after it; a block's or comment's end eats one
  // newline (trim_blocks).
  size_t AfterTag(size_t p, bool rstrip, bool block) {
    if (rstrip) return p + LeadingSpace(std::string_view(src_).substr(p));
    if (block && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  // The tokens inside {{ }} or {% %} from `p`; returns the position after the tag.
  Result<size_t> Tag(bool var, size_t p, size_t at) {
    tokens_.push_back({var ? Tok::kVarBegin : Tok::kBlockBegin, "", LineAt(at)});
    const std::string_view end = var ? "}}" : "%}";
    int balance = 0;
    while (true) {
      while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n' || src_[p] == '\r')) ++p;
      if (p >= src_.size()) return SyntaxError(LineAt(at), std::string(var ? "'{{'" : "'{%'") + " not closed");
      const int line = LineAt(p);
      if (balance == 0) {
        if (src_[p] == '-' && src_.compare(p + 1, 2, end) == 0) {
          tokens_.push_back({var ? Tok::kVarEnd : Tok::kBlockEnd, "", line});
          return AfterTag(p + 3, true, !var);
        }
        if (src_[p] == '+' && src_.compare(p + 1, 2, end) == 0) {  // `+%}` keeps the newline after it
          tokens_.push_back({var ? Tok::kVarEnd : Tok::kBlockEnd, "", line});
          return p + 3;
        }
        if (src_.compare(p, 2, end) == 0) {
          tokens_.push_back({var ? Tok::kVarEnd : Tok::kBlockEnd, "", line});
          return AfterTag(p + 2, false, !var);
        }
      }
      const char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        tokens_.push_back({Tok::kName, src_.substr(p, e - p), line});
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = p;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t x = e + 1;
          if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
          if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
            is_float = true;
            e = x;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        std::string digits;
        for (size_t i = p; i < e; ++i) {
          if (src_[i] != '_') digits += src_[i];
        }
        Token t{is_float ? Tok::kFloat : Tok::kInt, digits, line};
        if (is_float) {
          t.f = std::strtod(digits.c_str(), nullptr);
        } else {
          auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.i);
          if (ec != std::errc()) return SyntaxError(line, "integer literal " + digits + " out of range");
        }
        tokens_.push_back(std::move(t));
        p = e;
      } else if (c == '\'' || c == '"') {
        size_t e = p + 1;
        while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= src_.size()) return SyntaxError(line, "string literal not closed");
        FAK_ASSIGN_OR_RETURN(std::string s, Unescape(std::string_view(src_).substr(p + 1, e - p - 1), line));
        tokens_.push_back({Tok::kString, std::move(s), line});
        p = e + 1;
      } else {
        static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                                    "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "=", "<", ">"};
        std::string_view op;
        for (std::string_view o : kOps) {
          if (src_.compare(p, o.size(), o) == 0) {
            op = o;
            break;
          }
        }
        if (op.empty()) return SyntaxError(line, "unexpected character '" + std::string(1, c) + "'");
        if (op == "(" || op == "[" || op == "{") ++balance;
        if (op == ")" || op == "]" || op == "}") --balance;
        tokens_.push_back({Tok::kOp, std::string(op), line});
        p += op.size();
      }
    }
  }

  std::string src_;
  std::vector<Token> tokens_;
  int line_ = 1;
  size_t line_pos_ = 0;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<Body> Template() {
    std::string end;
    FAK_ASSIGN_OR_RETURN(Body body, Block({}, &end));
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(std::string_view n) const { return Cur().type == Tok::kName && Cur().text == n; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    ++i_;
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    ++i_;
    return true;
  }
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kEof: return "end of template";
      case Tok::kString: return "string literal";
      default: return "'" + (t.text.size() > 40 ? t.text.substr(0, 40) + "..." : t.text) + "'";
    }
  }
  Status Expected(std::string_view what) const {
    return SyntaxError(Cur().line, "expected " + std::string(what) + ", got " + Describe(Cur()));
  }
  Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Expected("'" + std::string(op) + "'");
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Cur().type != Tok::kName) return Expected("a name");
    return t_[i_++].text;
  }
  Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Expected("end of statement block");
    ++i_;
    return Status::Ok();
  }
  Status Deeper(int line) {
    if (++depth_ > kMaxParseDepth) {
      return ResourceExhausted("jinja template at line " + std::to_string(line) + ": nested deeper than " +
                               std::to_string(kMaxParseDepth) + " levels");
    }
    return Status::Ok();
  }

  // Statements until a block tag whose keyword is in `ends` (stored in *end, the tag's block
  // begin and keyword consumed) or the end of the template (when `ends` is empty).
  Result<Body> Block(std::initializer_list<std::string_view> ends, std::string* end) {
    FAK_RETURN_IF_ERROR(Deeper(Cur().line));
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == Tok::kEof) {
        if (ends.size() != 0) {
          std::string want;
          for (std::string_view e : ends) want += (want.empty() ? "" : " or ") + std::string(e);
          return SyntaxError(tok.line, "unexpected end of template, expected " + want);
        }
        break;
      }
      if (tok.type == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kData;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (tok.type == Tok::kVarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        FAK_ASSIGN_OR_RETURN(s->expr, TupleExpr());
        if (Cur().type != Tok::kVarEnd) return Expected("end of print statement");
        ++i_;
        body.push_back(std::move(s));
      } else if (tok.type == Tok::kBlockBegin) {
        ++i_;
        if (Cur().type != Tok::kName) return Expected("a statement name");
        const std::string kw = Cur().text;
        if (std::find(ends.begin(), ends.end(), kw) != ends.end()) {
          ++i_;
          *end = kw;
          --depth_;
          return body;
        }
        FAK_ASSIGN_OR_RETURN(std::unique_ptr<Stmt> s, Statement());
        body.push_back(std::move(s));
      } else {
        return Expected("text or a tag");
      }
    }
    --depth_;
    return body;
  }

  Result<std::unique_ptr<Stmt>> Statement() {
    const int line = Cur().line;
    const std::string kw = Cur().text;
    ++i_;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") {
      s->kind = Stmt::Kind::kIf;
      std::string end = "elif";
      while (end == "elif") {
        FAK_ASSIGN_OR_RETURN(ExprPtr cond, TupleExpr());
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        FAK_ASSIGN_OR_RETURN(Body body, Block({"elif", "else", "endif"}, &end));
        s->branches.emplace_back(std::move(cond), std::move(body));
      }
      if (end == "else") {
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        FAK_ASSIGN_OR_RETURN(s->else_body, Block({"endif"}, &end));
      }
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "for") {
      s->kind = Stmt::Kind::kFor;
      FAK_ASSIGN_OR_RETURN(s->targets, Targets());
      if (!SkipName("in")) return Expected("'in'");
      FAK_ASSIGN_OR_RETURN(s->expr, TupleExpr(/*no_cond=*/true));
      if (SkipName("if")) {
        FAK_ASSIGN_OR_RETURN(s->cond, Expression());
      }
      if (IsName("recursive")) return Unsupported("jinja: recursive for loops (line " + std::to_string(line) + ") are not supported");
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      FAK_ASSIGN_OR_RETURN(s->body, Block({"else", "endfor"}, &end));
      if (end == "else") {
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        FAK_ASSIGN_OR_RETURN(s->else_body, Block({"endfor"}, &end));
      }
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "set") {
      FAK_ASSIGN_OR_RETURN(s->targets, Targets());
      if (s->targets.size() == 1 && SkipOp(".")) {
        FAK_ASSIGN_OR_RETURN(s->attr, ExpectName());
      }
      if (Cur().type == Tok::kBlockEnd && s->attr.empty() && s->targets.size() == 1) {
        s->kind = Stmt::Kind::kSetBlock;
        ++i_;
        std::string end;
        FAK_ASSIGN_OR_RETURN(s->body, Block({"endset"}, &end));
        FAK_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      if (IsOp("|")) return Unsupported("jinja: filtered block set (line " + std::to_string(line) + ") is not supported");
      s->kind = Stmt::Kind::kSet;
      FAK_RETURN_IF_ERROR(ExpectOp("="));
      FAK_ASSIGN_OR_RETURN(s->expr, TupleExpr());
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "macro") {
      s->kind = Stmt::Kind::kMacro;
      FAK_ASSIGN_OR_RETURN(s->name, ExpectName());
      FAK_RETURN_IF_ERROR(ExpectOp("("));
      while (!SkipOp(")")) {
        if (!s->params.empty()) FAK_RETURN_IF_ERROR(ExpectOp(","));
        if (SkipOp(")")) break;
        FAK_ASSIGN_OR_RETURN(std::string param, ExpectName());
        ExprPtr def;
        if (SkipOp("=")) {
          FAK_ASSIGN_OR_RETURN(def, Expression());
        }
        s->params.emplace_back(std::move(param), std::move(def));
      }
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      FAK_ASSIGN_OR_RETURN(s->body, Block({"endmacro"}, &end));
      if (Cur().type == Tok::kName && Cur().text == s->name) ++i_;  // {% endmacro name %}
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body as is
      s->kind = Stmt::Kind::kScope;
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string end;
      FAK_ASSIGN_OR_RETURN(s->body, Block({"endgeneration"}, &end));
      FAK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    static constexpr std::string_view kKnown[] = {"call", "filter", "raw", "include", "import", "from", "extends",
                                                  "block", "with", "do", "autoescape", "trans"};
    if (std::find(std::begin(kKnown), std::end(kKnown), kw) != std::end(kKnown)) {
      return Unsupported("jinja: the '{% " + kw + " %}' statement (line " + std::to_string(line) +
                         ") is not supported by fak's chat-template interpreter");
    }
    return SyntaxError(line, "unknown tag '" + kw + "'");
  }

  // `a` or `a, b` (for/set targets).
  Result<std::vector<std::string>> Targets() {
    std::vector<std::string> names;
    const bool paren = SkipOp("(");
    do {
      FAK_ASSIGN_OR_RETURN(std::string n, ExpectName());
      names.push_back(std::move(n));
    } while (SkipOp(","));
    if (paren) FAK_RETURN_IF_ERROR(ExpectOp(")"));
    return names;
  }

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // An expression, or several separated by commas (a tuple), as {{ }} and set accept.
  Result<ExprPtr> TupleExpr(bool no_cond = false) {
    const int line = Cur().line;
    FAK_ASSIGN_OR_RETURN(ExprPtr first, no_cond ? Or() : Expression());
    if (!IsOp(",")) return first;
    ExprPtr t = Make(Expr::Kind::kList, line);
    t->tuple = true;
    t->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsName("if") || IsName("in")) break;
      FAK_ASSIGN_OR_RETURN(ExprPtr next, no_cond ? Or() : Expression());
      t->args.push_back(std::move(next));
    }
    return t;
  }

  Result<ExprPtr> Expression() {
    const int line = Cur().line;
    FAK_RETURN_IF_ERROR(Deeper(line));
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Or());
    while (SkipName("if")) {
      ExprPtr c = Make(Expr::Kind::kCond, line);
      FAK_ASSIGN_OR_RETURN(ExprPtr cond, Or());
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      if (SkipName("else")) {
        FAK_ASSIGN_OR_RETURN(ExprPtr other, Expression());
        c->args.push_back(std::move(other));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    --depth_;
    return e;
  }

  Result<ExprPtr> Binary(Expr::Kind kind, std::string op, ExprPtr a, ExprPtr b, int line) {
    ExprPtr e = Make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  Result<ExprPtr> Or() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, And());
    while (IsName("or")) {
      const int line = Cur().line;
      ++i_;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, And());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kOr, "or", std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> And() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Not());
    while (IsName("and")) {
      const int line = Cur().line;
      ++i_;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Not());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kAnd, "and", std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> Not() {
    if (IsName("not")) {
      const int line = Cur().line;
      ++i_;
      FAK_RETURN_IF_ERROR(Deeper(line));
      ExprPtr e = Make(Expr::Kind::kNot, line);
      FAK_ASSIGN_OR_RETURN(ExprPtr inner, Not());
      e->args.push_back(std::move(inner));
      --depth_;
      return e;
    }
    return Compare();
  }
  Result<ExprPtr> Compare() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Math1());
    while (true) {
      const int line = Cur().line;
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" || Cur().text == ">" ||
           Cur().text == ">=")) {
        op = Cur().text;
        ++i_;
      } else if (IsName("in")) {
        op = "in";
        ++i_;
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "notin";
        i_ += 2;
      } else {
        return e;
      }
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Math1());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, op, std::move(e), std::move(r), line));
    }
  }
  Result<ExprPtr> Math1() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Concat());
    while (IsOp("+") || IsOp("-")) {
      const int line = Cur().line;
      std::string op = t_[i_++].text;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Concat());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, op, std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> Concat() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Math2());
    while (IsOp("~")) {
      const int line = Cur().line;
      ++i_;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Math2());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, "~", std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> Math2() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Pow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const int line = Cur().line;
      std::string op = t_[i_++].text;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Pow());
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, op, std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> Pow() {
    FAK_ASSIGN_OR_RETURN(ExprPtr e, Unary(true));
    while (IsOp("**")) {
      const int line = Cur().line;
      ++i_;
      FAK_ASSIGN_OR_RETURN(ExprPtr r, Unary(true));
      FAK_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, "**", std::move(e), std::move(r), line));
    }
    return e;
  }
  Result<ExprPtr> Unary(bool with_filter) {
    const int line = Cur().line;
    FAK_RETURN_IF_ERROR(Deeper(line));
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
      ++i_;
      FAK_ASSIGN_OR_RETURN(ExprPtr inner, Unary(false));
      e->args.push_back(std::move(inner));
    } else {
      FAK_ASSIGN_OR_RETURN(e, Primary());
    }
    FAK_ASSIGN_OR_RETURN(e, Postfix(std::move(e)));
    if (with_filter) {
      FAK_ASSIGN_OR_RETURN(e, FilterExpr(std::move(e)));
    }
    --depth_;
    return e;
  }

  Result<ExprPtr> Primary() {
    const Token& tok = Cur();
    const int line = tok.line;
    if (tok.type == Tok::kName) {
      ++i_;
      ExprPtr e = Make(Expr::Kind::kLiteral, line);
      if (tok.text == "true" || tok.text == "True") {
        e->value = true;
      } else if (tok.text == "false" || tok.text == "False") {
        e->value = false;
      } else if (tok.text == "none" || tok.text == "None") {
        e->value = None{};
      } else {
        e->kind = Expr::Kind::kName;
        e->name = tok.text;
      }
      return e;
    }
    if (tok.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) s += t_[i_++].text;  // adjacent literals join
      ExprPtr e = Make(Expr::Kind::kLiteral, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (tok.type == Tok::kInt || tok.type == Tok::kFloat) {
      ExprPtr e = Make(Expr::Kind::kLiteral, line);
      e->value = tok.type == Tok::kInt ? Value(tok.i) : Value(tok.f);
      ++i_;
      return e;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) {
        ExprPtr t = Make(Expr::Kind::kList, line);
        t->tuple = true;
        return t;
      }
      FAK_ASSIGN_OR_RETURN(ExprPtr first, Expression());
      if (SkipOp(")")) return first;
      ExprPtr t = Make(Expr::Kind::kList, line);
      t->tuple = true;
      t->args.push_back(std::move(first));
      while (SkipOp(",")) {
        if (IsOp(")")) break;
        FAK_ASSIGN_OR_RETURN(ExprPtr next, Expression());
        t->args.push_back(std::move(next));
      }
      FAK_RETURN_IF_ERROR(ExpectOp(")"));
      return t;
    }
    if (SkipOp("[")) {
      ExprPtr l = Make(Expr::Kind::kList, line);
      while (!SkipOp("]")) {
        if (!l->args.empty()) {
          FAK_RETURN_IF_ERROR(ExpectOp(","));
          if (SkipOp("]")) break;
        }
        FAK_ASSIGN_OR_RETURN(ExprPtr item, Expression());
        l->args.push_back(std::move(item));
      }
      return l;
    }
    if (SkipOp("{")) {
      ExprPtr d = Make(Expr::Kind::kDict, line);
      while (!SkipOp("}")) {
        if (!d->args.empty()) {
          FAK_RETURN_IF_ERROR(ExpectOp(","));
          if (SkipOp("}")) break;
        }
        FAK_ASSIGN_OR_RETURN(ExprPtr key, Expression());
        FAK_RETURN_IF_ERROR(ExpectOp(":"));
        FAK_ASSIGN_OR_RETURN(ExprPtr value, Expression());
        d->args.push_back(std::move(key));
        d->args.push_back(std::move(value));
      }
      return d;
    }
    return Expected("an expression");
  }

  Result<ExprPtr> Postfix(ExprPtr e) {
    while (true) {
      const int line = Cur().line;
      if (SkipOp(".")) {
        ExprPtr a = Make(Expr::Kind::kAttr, line);
        if (Cur().type == Tok::kName) {
          a->name = t_[i_++].text;
        } else if (Cur().type == Tok::kInt) {  // x.0 is x[0]
          a->kind = Expr::Kind::kItem;
          a->args.push_back(std::move(e));
          ExprPtr idx = Make(Expr::Kind::kLiteral, line);
          idx->value = Value(t_[i_++].i);
          a->args.push_back(std::move(idx));
          e = std::move(a);
          continue;
        } else {
          return Expected("an attribute name");
        }
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (SkipOp("[")) {
        FAK_ASSIGN_OR_RETURN(e, Subscript(std::move(e), line));
      } else if (IsOp("(")) {
        FAK_ASSIGN_OR_RETURN(e, Call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> Subscript(ExprPtr target, int line) {
    std::vector<ExprPtr> parts(3);
    size_t part = 0;
    bool slice = false;
    while (!SkipOp("]")) {
      if (SkipOp(":")) {
        slice = true;
        if (++part > 2) return SyntaxError(line, "a slice has at most three parts");
        continue;
      }
      if (parts[part]) return Expected("']'");
      FAK_ASSIGN_OR_RETURN(parts[part], Expression());
    }
    if (!slice) {
      if (!parts[0]) return SyntaxError(line, "empty subscript");
      ExprPtr e = Make(Expr::Kind::kItem, line);
      e->args.push_back(std::move(target));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    ExprPtr e = Make(Expr::Kind::kSlice, line);
    e->args.push_back(std::move(target));
    for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  // Arguments "(a, b, name=c)" into `e` (positional after args already there).
  Status Args(Expr& e) {
    FAK_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!SkipOp(")")) {
      if (!first) {
        FAK_RETURN_IF_ERROR(ExpectOp(","));
        if (SkipOp(")")) break;
      }
      first = false;
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string name = t_[i_].text;
        i_ += 2;
        FAK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        e.named.emplace_back(std::move(name), std::move(v));
      } else {
        if (IsOp("*") || IsOp("**")) return Unsupported("jinja: *args/**kwargs in a call (line " + std::to_string(Cur().line) + ") are not supported");
        if (!e.named.empty()) return SyntaxError(Cur().line, "positional argument after a keyword argument");
        FAK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        e.args.push_back(std::move(v));
      }
    }
    return Status::Ok();
  }

  Result<ExprPtr> Call(ExprPtr callee) {
    ExprPtr c = Make(Expr::Kind::kCall, Cur().line);
    c->args.push_back(std::move(callee));
    FAK_RETURN_IF_ERROR(Args(*c));
    return c;
  }

  // `| filter(args)`, `is [not] test [arg]`, and calls after them.
  Result<ExprPtr> FilterExpr(ExprPtr e) {
    while (true) {
      const int line = Cur().line;
      if (SkipOp("|")) {
        ExprPtr f = Make(Expr::Kind::kFilter, line);
        FAK_ASSIGN_OR_RETURN(f->name, ExpectName());
        while (SkipOp(".")) {
          FAK_ASSIGN_OR_RETURN(std::string part, ExpectName());
          f->name += "." + part;
        }
        f->args.push_back(std::move(e));
        if (IsOp("(")) FAK_RETURN_IF_ERROR(Args(*f));
        e = std::move(f);
      } else if (IsName("is")) {
        ++i_;
        ExprPtr t = Make(Expr::Kind::kTest, line);
        t->negate = SkipName("not");
        FAK_ASSIGN_OR_RETURN(t->name, ExpectName());
        while (SkipOp(".")) {
          FAK_ASSIGN_OR_RETURN(std::string part, ExpectName());
          t->name += "." + part;
        }
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          FAK_RETURN_IF_ERROR(Args(*t));
        } else if ((Cur().type == Tok::kName && Cur().text != "else" && Cur().text != "or" && Cur().text != "and" &&
                    Cur().text != "if" && Cur().text != "in" && Cur().text != "not" && Cur().text != "is") ||
                   Cur().type == Tok::kString || Cur().type == Tok::kInt || Cur().type == Tok::kFloat ||
                   IsOp("[") || IsOp("{")) {
          // `x is divisibleby 3`: one argument without parentheses.
          FAK_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
          FAK_ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        FAK_ASSIGN_OR_RETURN(e, Call(std::move(e)));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Template> Template::Parse(std::string_view source) {
  FAK_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lexer(NormalizeNewlines(source)).Run());
  FAK_ASSIGN_OR_RETURN(Body body, Parser(std::move(tokens)).Template());
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

}  // namespace fak::jinja
