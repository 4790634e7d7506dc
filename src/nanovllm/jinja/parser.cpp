// Parser: statements ({% if/for/set/macro/call/filter/break/continue %}) and expressions.
#include "nanovllm/jinja/parser.h"

#include <cstdlib>
#include <set>

#include "nanovllm/utils/error.h"

namespace nanovllm::jinja {
namespace {

class Parser {
 public:
  Parser(std::string_view source, const std::vector<Token>& tokens) : src_(source), t_(tokens) {}

  NodeList parse_program() {
    NodeList out;
    while (cur_ < t_.size()) out.push_back(parse_any());
    return out;
  }

 private:
  std::string_view src_;
  const std::vector<Token>& t_;
  size_t cur_ = 0;
  int depth_ = 0;

  // Bounds the recursion of nested blocks and expressions.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) { p.deeper(); }
    ~DepthGuard() { --p.depth_; }
  };
  // A chain (a|f|g, a + b + c, a.b.c, a(b)(c), a is t is u) is parsed in a loop, but it nests one
  // node per link, and the interpreter and the tree's destructor recurse along it: every link
  // counts as one level of nesting until the chain ends.
  struct ChainGuard {
    Parser& p;
    int links = 0;
    explicit ChainGuard(Parser& parser) : p(parser) {}
    void link() {
      ++links;
      p.deeper();
    }
    ~ChainGuard() { p.depth_ -= links; }
  };
  void deeper() {
    if (++depth_ > kMaxParseDepth)
      fail("template nested too deeply (more than " + std::to_string(kMaxParseDepth) +
           " levels of blocks, brackets and chained filters or operators)");
  }

  uint32_t here() const { return cur_ < t_.size() ? t_[cur_].offset : static_cast<uint32_t>(src_.size()); }
  [[noreturn]] void fail(const std::string& what) const { fail_at(what, here()); }
  [[noreturn]] void fail_at(const std::string& what, uint32_t off) const {
    throw TokenizerError("chat template syntax error: " + what + " at " + line_col(src_, off));
  }
  std::string describe_current() const {
    if (cur_ >= t_.size()) return "end of template";
    const Token& t = t_[cur_];
    if (t.type == Tok::Ident || t.type == Tok::Number) return std::string(tok_name(t.type)) + " '" + t.value + "'";
    if (t.type == Tok::String) return "string literal";
    if (t.type == Tok::Text) return "text";
    return tok_name(t.type);
  }

  bool is(Tok type, size_t ahead = 0) const { return cur_ + ahead < t_.size() && t_[cur_ + ahead].type == type; }
  bool is_ident(std::string_view name, size_t ahead = 0) const {
    return is(Tok::Ident, ahead) && t_[cur_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::OpenStmt) || !is(Tok::Ident, 1)) return false;
    for (auto n : names)
      if (t_[cur_ + 1].value == n) return true;
    return false;
  }
  const Token& expect(Tok type, const std::string& context) {
    if (!is(type)) fail(std::string("expected ") + tok_name(type) + " " + context + ", found " + describe_current());
    return t_[cur_++];
  }
  void expect_ident(std::string_view name, const std::string& context) {
    if (!is_ident(name)) fail("expected '" + std::string(name) + "' " + context + ", found " + describe_current());
    ++cur_;
  }
  NodePtr make(NK k, uint32_t off) { return std::make_unique<Node>(k, off); }

  // Parses statements until one of `ends` opens ({% end... %}); errors if the template ends first.
  NodeList parse_body(std::initializer_list<std::string_view> ends, const char* block, uint32_t opened) {
    NodeList body;
    while (!is_statement(ends)) {
      if (cur_ >= t_.size())
        fail_at(std::string("unclosed '") + block + "' block (expected {% end" + block + " %})", opened);
      body.push_back(parse_any());
    }
    return body;
  }
  void close_block(std::string_view end_name) {
    expect(Tok::OpenStmt, "");
    expect_ident(end_name, "");
    expect(Tok::CloseStmt, std::string("after '") + std::string(end_name) + "'");
  }

  NodePtr parse_any() {
    DepthGuard g(*this);
    const Token& t = t_[cur_];
    switch (t.type) {
      case Tok::Comment: ++cur_; return make(NK::Comment, t.offset);
      case Tok::Text: {
        auto n = make(NK::Text, t.offset);
        n->text = t.value;
        ++cur_;
        return n;
      }
      case Tok::OpenStmt: return parse_statement();
      case Tok::OpenExpr: {
        ++cur_;
        auto n = make(NK::Output, t.offset);
        n->a.push_back(parse_expression());
        expect(Tok::CloseExpr, "to close '{{' opened at " + line_col(src_, t.offset));
        return n;
      }
      default: fail("unexpected " + describe_current() + " outside of a tag");
    }
  }

  NodePtr parse_statement() {
    uint32_t opened = t_[cur_].offset;
    ++cur_;  // {%
    if (!is(Tok::Ident)) fail("expected a statement name after '{%', found " + describe_current());
    std::string name = t_[cur_].value;
    uint32_t name_off = t_[cur_].offset;
    ++cur_;
    NodePtr n;
    if (name == "set") {
      n = parse_set(opened);
    } else if (name == "if") {
      n = parse_if(opened);
      close_block("endif");
    } else if (name == "for") {
      n = parse_for(opened);
      close_block("endfor");
    } else if (name == "macro") {
      n = make(NK::Macro, opened);
      if (!is(Tok::Ident)) fail("expected a macro name, found " + describe_current());
      n->text = t_[cur_++].value;
      n->a = parse_args(true);
      expect(Tok::CloseStmt, "after macro signature");
      n->b = parse_body({"endmacro"}, "macro", opened);
      close_block("endmacro");
    } else if (name == "call") {
      n = make(NK::CallBlock, opened);
      if (is(Tok::LParen)) n->c = parse_args(true);
      if (!is(Tok::Ident)) fail("expected a macro name after 'call', found " + describe_current());
      auto call = make(NK::Call, here());
      auto callee = make(NK::Ident, here());
      callee->text = t_[cur_++].value;
      call->a.push_back(std::move(callee));
      call->b = parse_args(false);
      n->a.push_back(std::move(call));
      expect(Tok::CloseStmt, "after call statement");
      n->b = parse_body({"endcall"}, "call", opened);
      close_block("endcall");
    } else if (name == "filter") {
      n = make(NK::FilterBlock, opened);
      if (!is(Tok::Ident)) fail("expected a filter name, found " + describe_current());
      n->text = t_[cur_++].value;
      if (is(Tok::LParen)) n->c = parse_args(false);
      expect(Tok::CloseStmt, "after filter statement");
      n->b = parse_body({"endfilter"}, "filter", opened);
      close_block("endfilter");
    } else if (name == "break" || name == "continue") {
      n = make(name == "break" ? NK::Break : NK::Continue, opened);
      expect(Tok::CloseStmt, "after '" + name + "'");
    } else {
      fail_at("unknown statement '" + name + "'", name_off);
    }
    return n;
  }

  NodePtr parse_set(uint32_t opened) {
    auto n = make(NK::Set, opened);
    n->a.push_back(parse_sequence(false));
    if (is(Tok::Equals)) {
      ++cur_;
      n->a.push_back(parse_sequence(false));
    } else {
      expect(Tok::CloseStmt, "or '=' after set target");
      n->b = parse_body({"endset"}, "set", opened);
      expect(Tok::OpenStmt, "");
      expect_ident("endset", "");
    }
    expect(Tok::CloseStmt, "to close 'set' statement");
    return n;
  }

  NodePtr parse_if(uint32_t opened) {
    DepthGuard g(*this);
    auto n = make(NK::If, opened);
    n->a.push_back(parse_expression());
    expect(Tok::CloseStmt, "after if condition");
    n->b = parse_body({"elif", "else", "endif"}, "if", opened);
    if (is_statement({"elif"})) {
      uint32_t elif_off = t_[cur_].offset;
      cur_ += 2;
      n->c.push_back(parse_if(elif_off));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStmt, "after 'else'");
      n->c = parse_body({"endif"}, "if", opened);
    }
    return n;
  }

  NodePtr parse_for(uint32_t opened) {
    auto n = make(NK::For, opened);
    auto target = parse_sequence(true);
    if (target->kind != NK::Ident && target->kind != NK::Tuple)
      fail_at("expected a name or tuple as the loop variable", target->offset);
    n->a.push_back(std::move(target));
    expect_ident("in", "after the loop variable");
    auto iter = parse_expression();
    if (iter->kind == NK::Select) {  // `for x in xs if cond`
      n->a.push_back(std::move(iter->a[0]));
      n->a.push_back(std::move(iter->a[1]));
    } else {
      n->a.push_back(std::move(iter));
    }
    expect(Tok::CloseStmt, "after for loop header");
    n->b = parse_body({"endfor", "else"}, "for", opened);
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStmt, "after 'else'");
      n->c = parse_body({"endfor"}, "for", opened);
    }
    return n;
  }

  // expr[, expr...] -> a single expression or a Tuple.
  NodePtr parse_sequence(bool primary) {
    uint32_t off = here();
    NodePtr first = primary ? parse_primary() : parse_expression();
    if (!is(Tok::Comma)) return first;
    auto tuple = make(NK::Tuple, off);
    tuple->a.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++cur_;
      tuple->a.push_back(primary ? parse_primary() : parse_expression());
    }
    return tuple;
  }

  NodePtr parse_expression() {
    DepthGuard g(*this);
    return parse_if_expression();
  }

  NodePtr parse_if_expression() {
    auto value = parse_or();
    if (!is_ident("if")) return value;
    uint32_t off = here();
    ++cur_;
    auto test = parse_or();
    if (is_ident("else")) {
      ++cur_;
      auto n = make(NK::Ternary, off);
      n->a.push_back(std::move(test));
      n->a.push_back(std::move(value));
      n->a.push_back(parse_expression());
      return n;
    }
    auto n = make(NK::Select, off);
    n->a.push_back(std::move(value));
    n->a.push_back(std::move(test));
    return n;
  }

  NodePtr binary(std::string op, uint32_t off, NodePtr l, NodePtr r) {
    auto n = make(NK::Binary, off);
    n->text = std::move(op);
    n->a.push_back(std::move(l));
    n->a.push_back(std::move(r));
    return n;
  }

  NodePtr parse_or() {
    auto left = parse_and();
    ChainGuard chain(*this);
    while (is_ident("or")) {
      chain.link();
      uint32_t off = t_[cur_++].offset;
      left = binary("or", off, std::move(left), parse_and());
    }
    return left;
  }
  NodePtr parse_and() {
    auto left = parse_not();
    ChainGuard chain(*this);
    while (is_ident("and")) {
      chain.link();
      uint32_t off = t_[cur_++].offset;
      left = binary("and", off, std::move(left), parse_not());
    }
    return left;
  }
  NodePtr parse_not() {
    if (!is_ident("not")) return parse_comparison();
    DepthGuard g(*this);
    auto n = make(NK::Unary, t_[cur_++].offset);
    n->text = "not";
    n->a.push_back(parse_not());
    return n;
  }
  NodePtr parse_comparison() {
    auto left = parse_additive();
    ChainGuard chain(*this);
    while (true) {
      uint32_t off = here();
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_ident("in") || is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        return left;
      }
      chain.link();
      left = binary(op, off, std::move(left), parse_additive());
    }
  }
  NodePtr parse_additive() {
    auto left = parse_multiplicative();
    ChainGuard chain(*this);
    while (is(Tok::Additive)) {
      chain.link();
      const Token& t = t_[cur_++];
      left = binary(t.value, t.offset, std::move(left), parse_multiplicative());
    }
    return left;
  }
  NodePtr parse_multiplicative() {
    auto left = parse_power();
    ChainGuard chain(*this);
    while (is(Tok::Multiplicative)) {
      chain.link();
      const Token& t = t_[cur_++];
      left = binary(t.value, t.offset, std::move(left), parse_power());
    }
    return left;
  }
  NodePtr parse_power() {
    auto left = parse_test();
    ChainGuard chain(*this);
    while (is(Tok::Power)) {
      chain.link();
      const Token& t = t_[cur_++];
      left = binary("**", t.offset, std::move(left), parse_test());
    }
    return left;
  }

  // True when the next token can start the single argument of `x is test arg`.
  bool starts_test_argument() const {
    if (is(Tok::Number) || is(Tok::String) || is(Tok::LBracket)) return true;
    static const std::set<std::string, std::less<>> keywords = {"and", "or", "not", "in", "is", "if", "else"};
    return is(Tok::Ident) && !keywords.count(t_[cur_].value);
  }

  NodePtr parse_test() {
    auto operand = parse_filter();
    ChainGuard chain(*this);
    while (is_ident("is")) {
      chain.link();
      uint32_t off = t_[cur_++].offset;
      auto n = make(NK::Test, off);
      if (is_ident("not")) {
        n->flag = true;
        ++cur_;
      }
      if (!is(Tok::Ident)) fail("expected a test name after 'is', found " + describe_current());
      n->text = t_[cur_++].value;
      if (is(Tok::LParen))
        n->b = parse_args(false);
      else if (starts_test_argument())
        n->b.push_back(parse_primary());
      n->a.push_back(std::move(operand));
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr parse_filter() {
    auto operand = parse_unary_sign();
    ChainGuard chain(*this);
    while (is(Tok::Pipe)) {
      chain.link();
      ++cur_;
      if (!is(Tok::Ident)) fail("expected a filter name after '|', found " + describe_current());
      auto n = make(NK::Filter, t_[cur_].offset);
      n->text = t_[cur_++].value;
      if (is(Tok::LParen)) {
        n->flag = true;
        n->b = parse_args(false);
      }
      n->a.push_back(std::move(operand));
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr parse_unary_sign() {
    if ((is(Tok::Unary) || is(Tok::Additive)) && (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      DepthGuard g(*this);
      auto n = make(NK::Unary, t_[cur_].offset);
      n->text = t_[cur_++].value;
      n->a.push_back(parse_unary_sign());
      return n;
    }
    return parse_call_member(parse_primary());
  }

  // Postfix chain: .name, [index or slice], (call arguments).
  NodePtr parse_call_member(NodePtr object) {
    ChainGuard chain(*this);
    while (is(Tok::Dot) || is(Tok::LBracket) || is(Tok::LParen)) {
      chain.link();
      const Token& t = t_[cur_];
      if (t.type == Tok::LParen) {
        auto call = make(NK::Call, object->offset);  // errors point at the callee
        call->a.push_back(std::move(object));
        call->b = parse_args(false);
        object = std::move(call);
        continue;
      }
      ++cur_;
      auto m = make(NK::Member, t.offset);
      m->a.push_back(std::move(object));
      if (t.type == Tok::LBracket) {
        m->flag = true;
        m->a.push_back(parse_subscript());
        expect(Tok::RBracket, "to close '['");
      } else {
        if (!is(Tok::Ident) && !(is(Tok::Number) && t_[cur_].value.find('.') == std::string::npos))
          fail("expected a name after '.', found " + describe_current());
        auto prop = make(is(Tok::Ident) ? NK::Ident : NK::Literal, here());
        if (prop->kind == NK::Ident)
          prop->text = t_[cur_].value;
        else
          prop->literal = Value(static_cast<int64_t>(std::strtoll(t_[cur_].value.c_str(), nullptr, 10)));
        ++cur_;
        m->a.push_back(std::move(prop));
      }
      object = std::move(m);
    }
    return object;
  }

  // Inside [...]: an index expression or a slice start:stop:step.
  NodePtr parse_subscript() {
    uint32_t off = here();
    NodeList parts;
    bool slice = false;
    while (!is(Tok::RBracket)) {
      if (cur_ >= t_.size()) fail("unclosed '['");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          ++cur_;
          slice = true;
        }
      }
    }
    if (parts.empty()) fail("expected an index or slice inside '[]'");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) fail_at("slice takes at most 3 parts", off);
    auto n = make(NK::Slice, off);
    parts.resize(3);
    n->a = std::move(parts);
    return n;
  }

  // (a, b=1, *xs, **kw). In a macro signature (`params`), only names and name=default.
  NodeList parse_args(bool params) {
    expect(Tok::LParen, "to open an argument list");
    NodeList args;
    std::set<std::string> names;
    bool saw_keyword = false;
    while (!is(Tok::RParen)) {
      if (cur_ >= t_.size()) fail("unclosed '(' in argument list");
      uint32_t off = here();
      bool kw_spread = is(Tok::Power), spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (kw_spread || spread) {
        if (params) fail("argument unpacking is not allowed in a macro signature");
        ++cur_;
        auto n = make(kw_spread ? NK::KwSpread : NK::Spread, off);
        n->a.push_back(parse_expression());
        args.push_back(std::move(n));
      } else {
        auto arg = parse_expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NK::Ident) fail_at("expected a name before '='", off);
          auto kw = make(NK::Kwarg, off);
          kw->text = arg->text;
          kw->a.push_back(parse_expression());
          arg = std::move(kw);
          saw_keyword = true;
        } else if (saw_keyword) {
          fail_at(
              params ? "non-default parameter follows a default one" : "positional argument follows keyword argument",
              off);
        }
        if (params) {
          if (arg->kind != NK::Ident && arg->kind != NK::Kwarg) fail_at("expected a parameter name", off);
          if (!names.insert(arg->text).second) fail_at("duplicate parameter '" + arg->text + "'", off);
        }
        args.push_back(std::move(arg));
      }
      if (is(Tok::Comma))
        ++cur_;
      else if (!is(Tok::RParen))
        fail("expected ',' or ')' in argument list, found " + describe_current());
    }
    ++cur_;
    return args;
  }

  NodePtr parse_primary() {
    DepthGuard g(*this);
    if (cur_ >= t_.size()) fail("unexpected end of template in an expression");
    const Token& t = t_[cur_++];
    switch (t.type) {
      case Tok::Number: {
        auto n = make(NK::Literal, t.offset);
        if (t.value.find('.') != std::string::npos) {
          n->literal = Value(std::strtod(t.value.c_str(), nullptr));
        } else {
          errno = 0;
          long long v = std::strtoll(t.value.c_str(), nullptr, 10);
          n->literal = errno == ERANGE ? Value(std::strtod(t.value.c_str(), nullptr)) : Value(static_cast<int64_t>(v));
        }
        return n;
      }
      case Tok::String: {  // adjacent string literals concatenate
        auto n = make(NK::Literal, t.offset);
        std::string s = t.value;
        while (is(Tok::String)) s += t_[cur_++].value;
        n->literal = Value(std::move(s));
        return n;
      }
      case Tok::Ident: {
        auto n = make(NK::Ident, t.offset);
        n->text = t.value;
        return n;
      }
      case Tok::LParen: {
        auto e = parse_sequence(false);
        expect(Tok::RParen, "to close '(' opened at " + line_col(src_, t.offset));
        return e;
      }
      case Tok::LBracket: {
        auto n = make(NK::List, t.offset);
        while (!is(Tok::RBracket)) {
          if (cur_ >= t_.size()) fail_at("unclosed '['", t.offset);
          n->a.push_back(parse_expression());
          if (is(Tok::Comma))
            ++cur_;
          else if (!is(Tok::RBracket))
            fail("expected ',' or ']' in list, found " + describe_current());
        }
        ++cur_;
        return n;
      }
      case Tok::LBrace: {
        auto n = make(NK::Dict, t.offset);
        while (!is(Tok::RBrace)) {
          if (cur_ >= t_.size()) fail_at("unclosed '{'", t.offset);
          n->a.push_back(parse_expression());
          expect(Tok::Colon, "between key and value in a dict literal");
          n->b.push_back(parse_expression());
          if (is(Tok::Comma))
            ++cur_;
          else if (!is(Tok::RBrace))
            fail("expected ',' or '}' in dict literal, found " + describe_current());
        }
        ++cur_;
        return n;
      }
      default: --cur_; fail("unexpected " + describe_current() + " in an expression");
    }
  }
};

}  // namespace

NodeList parse(std::string_view source, const std::vector<Token>& tokens) {
  return Parser(source, tokens).parse_program();
}

}  // namespace nanovllm::jinja
