// SPDX-License-Identifier: MIT
#include <ensemblefit/model/formula.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <numbers>
#include <string_view>
#include <system_error>
#include <utility>

namespace ef {
namespace {

enum class Tok {
    number,
    name,
    plus,
    minus,
    star,
    slash,
    power,  // '^' or '**'
    lparen,
    rparen,
    lbracket,
    rbracket,
    comma,
    end,
};

struct Token {
    Tok kind = Tok::end;
    int column = 1;          // 1-based
    std::string_view text;   // the token as written (empty at the end)
    double value = 0.0;      // for numbers
};

struct Function {
    std::string_view name;
    FormulaOpCode code;
    int arity;
};

constexpr std::array<Function, 9> kFunctions{{
    {"exp", FormulaOpCode::exp, 1},
    {"log", FormulaOpCode::log, 1},
    {"sqrt", FormulaOpCode::sqrt, 1},
    {"sin", FormulaOpCode::sin, 1},
    {"cos", FormulaOpCode::cos, 1},
    {"tan", FormulaOpCode::tan, 1},
    {"atan", FormulaOpCode::atan, 1},
    {"abs", FormulaOpCode::abs, 1},
    {"pow", FormulaOpCode::pow, 2},
}};

constexpr std::string_view kPi = "pi";

// Bounds the parser's recursion, which (unlike the evaluation stack) grows with redundant
// parentheses and unary signs: a hostile or generated formula must give an error, not a crash.
constexpr int kMaxNesting = 256;

const Function* find_function(std::string_view name) {
    for (const Function& f : kFunctions)
        if (f.name == name) return &f;
    return nullptr;
}

bool is_ident_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int index_of(const std::vector<std::string>& names, std::string_view name) {
    const auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Appends piecewise: GCC 12 gives a false -Wrestrict at -O3 for "'" + std::string(s) (PR 105329).
std::string quoted(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '\'';
    out += s;
    out += '\'';
    return out;
}

std::string join(const std::vector<std::string>& names) {
    if (names.empty()) return "none";
    std::string out;
    for (std::size_t k = 0; k < names.size(); ++k) {
        if (k > 0) out += ", ";
        out += names[k];
    }
    return out;
}

/// Splits the formula into tokens on demand, so the first error reported is the leftmost one.
class Lexer {
   public:
    explicit Lexer(std::string_view text) : text_(text) { advance(); }

    const Token& peek() const { return tok_; }
    Token next() {
        Token t = tok_;
        advance();
        return t;
    }

   private:
    void advance() {
        while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
        tok_ = Token{};
        tok_.column = static_cast<int>(pos_) + 1;
        if (pos_ >= text_.size()) return;

        const std::size_t start = pos_;
        const char c = text_[pos_];
        if (is_digit(c) || (c == '.' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))) {
            scan_number();
            return;
        }
        if (is_ident_start(c)) {
            while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
            tok_.kind = Tok::name;
            tok_.text = text_.substr(start, pos_ - start);
            return;
        }
        ++pos_;
        switch (c) {
            case '+': tok_.kind = Tok::plus; break;
            case '-': tok_.kind = Tok::minus; break;
            case '/': tok_.kind = Tok::slash; break;
            case '^': tok_.kind = Tok::power; break;
            case '(': tok_.kind = Tok::lparen; break;
            case ')': tok_.kind = Tok::rparen; break;
            case '[': tok_.kind = Tok::lbracket; break;
            case ']': tok_.kind = Tok::rbracket; break;
            case ',': tok_.kind = Tok::comma; break;
            case '*':
                if (pos_ < text_.size() && text_[pos_] == '*') {
                    ++pos_;
                    tok_.kind = Tok::power;
                } else {
                    tok_.kind = Tok::star;
                }
                break;
            default: {
                const auto u = static_cast<unsigned char>(c);
                std::string shown;
                if (u >= 0x20 && u < 0x7f) {
                    shown = quoted(std::string_view(&c, 1));
                } else {
                    static constexpr char kHex[] = "0123456789abcdef";
                    shown = std::string("byte 0x") + kHex[u >> 4] + kHex[u & 0xf];
                }
                throw FormulaError(tok_.column, "unexpected character " + shown);
            }
        }
        tok_.text = text_.substr(start, pos_ - start);
    }

    // Digits [. digits] [e|E [+|-] digits], or . digits ...; a number glued to letters, digits
    // or a second '.' (2x, 1.2.3, 1e) is rejected rather than split into confusing tokens.
    void scan_number() {
        const std::size_t start = pos_;
        while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '.') {
            ++pos_;
            while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            std::size_t q = pos_ + 1;
            if (q < text_.size() && (text_[q] == '+' || text_[q] == '-')) ++q;
            if (q < text_.size() && is_digit(text_[q])) {
                pos_ = q;
                while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
            }
        }
        std::size_t stop = pos_;
        while (stop < text_.size() && (is_ident_char(text_[stop]) || text_[stop] == '.')) ++stop;
        if (stop != pos_) {
            throw FormulaError(tok_.column, "malformed number " +
                                                quoted(text_.substr(start, stop - start)));
        }
        tok_.kind = Tok::number;
        tok_.text = text_.substr(start, pos_ - start);
        // from_chars, unlike strtod, ignores the C locale's decimal separator.
        const auto res = std::from_chars(text_.data() + start, text_.data() + pos_, tok_.value);
        if (res.ec != std::errc{} || res.ptr != text_.data() + pos_) {
            throw FormulaError(tok_.column,
                               "number " + quoted(tok_.text) + " is out of range for a double");
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    Token tok_;
};

std::string describe(const Token& t) {
    return t.kind == Tok::end ? std::string("end of formula") : quoted(t.text);
}

Tok closer_of(Tok open) { return open == Tok::lparen ? Tok::rparen : Tok::rbracket; }

/**
 * Recursive-descent parser emitting postfix code:
 *
 *     expr    := term (('+' | '-') term)*
 *     term    := unary (('*' | '/') unary)*
 *     unary   := ('-' | '+') unary | power
 *     power   := primary (('^' | '**') unary)?
 *     primary := number | name | function group | group
 *     group   := '(' expr ')' | '[' expr ']'
 *
 * `power` takes a `unary` on its right, which makes '^' right associative, lets the exponent
 * carry a sign (2^-1), and leaves a leading minus outside the power (-x^2 == -(x^2)).
 *
 * With null name lists the parser runs in collecting mode (formula_names): every identifier is
 * accepted and recorded in order of first use.
 */
class Parser {
   public:
    Parser(std::string_view text, const std::vector<std::string>* params,
           const std::vector<std::string>* vars)
        : lex_(text.substr(0, std::min(text.size(), kFormulaMaxLength + 1))), length_(text.size()),
          params_(params), vars_(vars) {}

    FormulaProgram parse() {
        if (length_ > kFormulaMaxLength)
            throw FormulaError(static_cast<int>(kFormulaMaxLength) + 1,
                               "formula too long (" + std::to_string(length_) + " characters; the limit is " +
                               std::to_string(kFormulaMaxLength) + ")");
        if (lex_.peek().kind == Tok::end) throw FormulaError(1, "empty formula");
        parse_expr();
        const Token& t = lex_.peek();
        if (t.kind != Tok::end) fail_unexpected(t);
        return std::move(prog_);
    }

    std::vector<std::string> take_names() { return std::move(names_); }

   private:
    /// Counts one level of parser recursion for as long as it lives.
    class Nest {
       public:
        Nest(Parser& p, int column) : p_(p) {
            if (++p_.nesting_ > kMaxNesting) {
                throw FormulaError(column, "formula too deeply nested (more than " +
                                               std::to_string(kMaxNesting) + " levels)");
            }
        }
        ~Nest() { --p_.nesting_; }
        Nest(const Nest&) = delete;
        Nest& operator=(const Nest&) = delete;

       private:
        Parser& p_;
    };

    [[noreturn]] static void fail_unexpected(const Token& t) {
        if (t.kind == Tok::end) throw FormulaError(t.column, "unexpected end of formula");
        throw FormulaError(t.column, "unexpected " + describe(t));
    }

    void parse_expr() {
        parse_term();
        for (;;) {
            const Tok k = lex_.peek().kind;
            if (k != Tok::plus && k != Tok::minus) return;
            lex_.next();
            parse_term();
            emit(k == Tok::plus ? FormulaOpCode::add : FormulaOpCode::sub);
        }
    }

    void parse_term() {
        parse_unary();
        for (;;) {
            const Tok k = lex_.peek().kind;
            if (k != Tok::star && k != Tok::slash) return;
            lex_.next();
            parse_unary();
            emit(k == Tok::star ? FormulaOpCode::mul : FormulaOpCode::div);
        }
    }

    void parse_unary() {
        const Nest nest(*this, lex_.peek().column);
        const Tok k = lex_.peek().kind;
        if (k == Tok::minus || k == Tok::plus) {
            lex_.next();
            parse_unary();
            if (k == Tok::minus) emit(FormulaOpCode::neg);
            return;
        }
        parse_power();
    }

    void parse_power() {
        parse_primary();
        if (lex_.peek().kind != Tok::power) return;
        lex_.next();
        parse_unary();
        // x^2, the commonest power, as one multiplication (pow costs a log and an exp).
        const FormulaOp last = prog_.code.back();
        if (last.code == FormulaOpCode::push_const && prog_.constants[static_cast<size_t>(last.arg)] == 2.0) {
            prog_.code.pop_back();
            --depth_;
            emit(FormulaOpCode::square);
            return;
        }
        emit(FormulaOpCode::pow);
    }

    void parse_primary() {
        const Token t = lex_.next();
        switch (t.kind) {
            case Tok::number: emit(FormulaOpCode::push_const, constant(t.value)); return;
            case Tok::name: parse_name(t); return;
            case Tok::lparen:
            case Tok::lbracket:
                parse_expr();
                expect_close(t);
                return;
            default: fail_unexpected(t);
        }
    }

    void expect_close(const Token& open) {
        const Tok want = closer_of(open.kind);
        const Token t = lex_.next();
        if (t.kind == want) return;
        const std::string close = want == Tok::rparen ? "')'" : "']'";
        const std::string where = "opened at column " + std::to_string(open.column);
        if (t.kind == Tok::end) throw FormulaError(t.column, "missing " + close + " " + where);
        throw FormulaError(t.column,
                           "unexpected " + describe(t) + " (expected " + close + " " + where + ")");
    }

    void parse_name(const Token& t) {
        const Tok after = lex_.peek().kind;
        const bool call = after == Tok::lparen || after == Tok::lbracket;
        if (const Function* f = find_function(t.text)) {
            if (!call) {
                throw FormulaError(t.column, "function " + quoted(t.text) +
                                                 " needs its argument in parentheses, e.g. " +
                                                 std::string(t.text) + "(x)");
            }
            parse_call(t, *f);
            return;
        }
        if (call) {
            // Collecting mode cannot tell a parameter from a misspelt function, so there only
            // pi counts as a known name.
            const bool declared = !collecting() && (index_of(*params_, t.text) >= 0 ||
                                                    index_of(*vars_, t.text) >= 0);
            const bool known = declared || t.text == kPi;
            if (known) {
                throw FormulaError(t.column, quoted(t.text) + " is not a function (write " +
                                                 std::string(t.text) + "*(...) to multiply)");
            }
            throw FormulaError(t.column, "unknown function " + quoted(t.text));
        }
        if (t.text == kPi) {
            emit(FormulaOpCode::push_const, constant(std::numbers::pi));
            return;
        }
        if (collecting()) {
            int k = index_of(names_, t.text);
            if (k < 0) {
                k = static_cast<int>(names_.size());
                names_.emplace_back(t.text);
            }
            emit(FormulaOpCode::push_param, k);
            return;
        }
        const int p = index_of(*params_, t.text);
        const int v = index_of(*vars_, t.text);
        if (p >= 0 && v >= 0) {
            throw FormulaError(t.column, "name " + quoted(t.text) +
                                             " is both a parameter and a variable");
        }
        if (p >= 0) {
            emit(FormulaOpCode::push_param, p);
        } else if (v >= 0) {
            emit(FormulaOpCode::push_var, v);
        } else {
            throw FormulaError(t.column, "unknown name " + quoted(t.text) + " (parameters: " +
                                             join(*params_) + "; variables: " + join(*vars_) +
                                             ")");
        }
    }

    void parse_call(const Token& name, const Function& f) {
        const Token open = lex_.next();
        int args = 0;
        if (lex_.peek().kind != closer_of(open.kind)) {
            parse_expr();
            ++args;
            while (lex_.peek().kind == Tok::comma) {
                lex_.next();
                parse_expr();
                ++args;
            }
        }
        expect_close(open);
        if (args != f.arity) {
            throw FormulaError(name.column,
                               "function " + quoted(name.text) + " takes " +
                                   std::to_string(f.arity) +
                                   (f.arity == 1 ? " argument" : " arguments") + ", not " +
                                   std::to_string(args));
        }
        emit(f.code);
    }

    bool collecting() const { return params_ == nullptr; }

    int constant(double value) {
        // Literals repeat (2*pi twice in a seasonal model); sharing the slot is exact.
        auto& cs = prog_.constants;
        const auto it = std::find(cs.begin(), cs.end(), value);
        if (it != cs.end()) return static_cast<int>(it - cs.begin());
        cs.push_back(value);
        return static_cast<int>(cs.size()) - 1;
    }

    // Tracks the evaluation stack exactly as FormulaModel will run it.
    void emit(FormulaOpCode code, int arg = 0) {
        switch (code) {
            case FormulaOpCode::push_const:
            case FormulaOpCode::push_param:
            case FormulaOpCode::push_var: ++depth_; break;
            case FormulaOpCode::add:
            case FormulaOpCode::sub:
            case FormulaOpCode::mul:
            case FormulaOpCode::div:
            case FormulaOpCode::pow: --depth_; break;
            default: break;
        }
        prog_.max_stack = std::max(prog_.max_stack, depth_);
        prog_.code.push_back(FormulaOp{code, arg});
    }

    Lexer lex_;
    std::size_t length_;  // the whole text's, which the lexer sees only up to the limit
    const std::vector<std::string>* params_;
    const std::vector<std::string>* vars_;
    FormulaProgram prog_;
    std::vector<std::string> names_;
    int depth_ = 0;
    int nesting_ = 0;
};

// A declared name equal to a function or to pi could never be referred to in a formula.
void check_reserved(const std::vector<std::string>& names, const char* what) {
    for (const std::string& n : names) {
        if (n == kPi || find_function(n) != nullptr) {
            throw FormulaError(1, std::string(what) + " name " + quoted(n) +
                                      " is reserved for a function or constant");
        }
    }
}

}  // namespace

FormulaProgram compile_formula(const std::string& text,
                               const std::vector<std::string>& param_names,
                               const std::vector<std::string>& var_names) {
    check_reserved(param_names, "parameter");
    check_reserved(var_names, "variable");
    Parser parser(text, &param_names, &var_names);
    FormulaProgram prog = parser.parse();
    if (prog.max_stack > kFormulaMaxStack) {
        throw FormulaError(1, "formula too deeply nested (needs an evaluation stack of " +
                                  std::to_string(prog.max_stack) + ", the limit is " +
                                  std::to_string(kFormulaMaxStack) + ")");
    }
    prog.text = text;
    return prog;
}

std::vector<std::string> formula_names(const std::string& text) {
    Parser parser(text, nullptr, nullptr);
    parser.parse();
    return parser.take_names();
}

}  // namespace ef
