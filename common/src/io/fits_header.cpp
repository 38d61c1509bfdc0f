// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/fits_header.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fitsio.h>

#include "ex2d/status.hpp"
#include "fits_util.hpp"

namespace ex2d {

namespace {

constexpr size_t kCardLength = 80;
/// Characters of a quoted string value that fit on one card after "KEYWORD = " / "CONTINUE  ".
constexpr size_t kMaxQuotedContent = 68;

std::string trim_right(std::string s)
{
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

std::string upper(std::string s)
{
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string pad_card(std::string card)
{
    card.resize(kCardLength, ' ');
    return card;
}

/// A writable copy of a card for cfitsio's parsers, which take char*.
std::array<char, FLEN_CARD> card_buffer(const std::string& card)
{
    std::array<char, FLEN_CARD> buffer{};
    card.copy(buffer.data(), std::min(card.size(), buffer.size() - 1));
    return buffer;
}

struct ParsedValue {
    bool quoted = false;
    std::string text;  ///< unquoted string (trailing blanks removed) or the literal token
};

/// The value of a card as cfitsio's fits_parse_value splits it from the comment (quotes, a '/'
/// inside a string, HIERARCH), or nullopt for cards without a value (COMMENT, HISTORY, blank).
/// A CONTINUE card has no value indicator; like cfitsio's own long-string reader, it is parsed
/// under a dummy keyword.
std::optional<ParsedValue> card_value(const std::string& card)
{
    auto buffer = card_buffer(card);
    if (card.compare(0, 10, "CONTINUE  ") == 0) std::memcpy(buffer.data(), "D2345678= ", 10);
    char value[FLEN_VALUE] = {0};
    char comment[FLEN_COMMENT] = {0};
    int status = 0;
    if (ffpsvc(buffer.data(), value, comment, &status) != 0 || value[0] == '\0') {
        return std::nullopt;
    }
    char type = 0;
    if (ffdtyp(value, &type, &status) != 0 || type != 'C') return ParsedValue{false, value};
    // Between the quotes, a doubled quote stands for one, and trailing blanks are padding.
    ParsedValue v{true, ""};
    const std::string quoted(value);
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
        v.text += quoted[i];
        if (quoted[i] == '\'' && quoted[i + 1] == '\'') ++i;
    }
    v.text = trim_right(v.text);
    return v;
}

long find_card(const std::vector<std::string>& cards, const std::string& key)
{
    const std::string wanted = upper(key);
    for (size_t i = 0; i < cards.size(); ++i) {
        if (upper(fits::card_keyword(cards[i])) == wanted) return long(i);
    }
    return -1;
}

std::optional<ParsedValue> find_value(const std::vector<std::string>& cards, const std::string& key)
{
    long i = find_card(cards, key);
    if (i < 0) return std::nullopt;
    return card_value(cards[size_t(i)]);
}

std::string make_card(const std::string& key, std::string value, const std::string& comment)
{
    char card[FLEN_CARD] = {0};
    int status = 0;
    if (ffmkky(key.c_str(), value.data(), comment.c_str(), card, &status)) {
        std::string msg = fits::error_text("FITS header", "cannot make a card for " + key, status);
        throw Error(msg);
    }
    return pad_card(card);
}

std::string quote(const std::string& escaped)
{
    std::string q = escaped;
    if (q.size() < 8) q.resize(8, ' ');  // FITS fixed-format strings are at least 8 wide
    return "'" + q + "'";
}

std::string escape(const std::string& s)
{
    std::string out;
    for (char c : s) {
        out += c;
        if (c == '\'') out += '\'';
    }
    return out;
}

/// One card, or a card plus CONTINUE cards (long-string convention) for long strings. Not
/// cfitsio's fits_write_key_longstr: it writes into an open file only, and cfitsio 4.2 splits a
/// run of quotes into cards that do not parse and ends a HIERARCH key's first card without '&'.
/// Nor its string quoting (ffs2c), which is not part of its public interface.
std::vector<std::string> string_cards(const std::string& key, const std::string& value,
                                      const std::string& comment)
{
    std::string escaped = escape(value);
    if (escaped.size() <= kMaxQuotedContent - 2) return {make_card(key, quote(escaped), comment)};
    // Split the unescaped string so that no doubled quote is cut in two; each piece but the
    // last ends with '&' to announce a continuation.
    std::vector<std::string> pieces;
    std::string piece;
    for (char c : value) {
        std::string e = c == '\'' ? "''" : std::string(1, c);
        if (piece.size() + e.size() + 1 > kMaxQuotedContent - 2) {
            pieces.push_back(piece + "&");
            piece.clear();
        }
        piece += e;
    }
    pieces.push_back(piece);
    std::vector<std::string> cards;
    cards.push_back(make_card(key, "'" + pieces[0] + "'", ""));
    for (size_t i = 1; i < pieces.size(); ++i) {
        std::string card = "CONTINUE  '" + pieces[i] + "'";
        if (i + 1 == pieces.size() && !comment.empty() && card.size() + 3 < kCardLength) {
            card += " / " + comment;
        }
        cards.push_back(pad_card(card.substr(0, kCardLength)));
    }
    return cards;
}

/// Shortest text that reads back as exactly `value`, always with a decimal point so that
/// FITS readers take it as a real number.
std::string format_double(double value)
{
    char buf[64];
    for (int precision = 15; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*G", precision, value);
        if (std::strtod(buf, nullptr) == value) break;
    }
    std::string s(buf);
    if (s.find('.') == std::string::npos) {
        size_t e = s.find('E');
        if (e == std::string::npos)
            s += ".0";
        else
            s.insert(e, ".0");
    }
    return s;
}

std::optional<double> parse_double(std::string text)
{
    if (text.empty()) return std::nullopt;
    std::replace(text.begin(), text.end(), 'D', 'E');
    std::replace(text.begin(), text.end(), 'd', 'e');
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || errno == ERANGE) return std::nullopt;
    return v;
}

}  // namespace

namespace fits {

std::string card_keyword(const std::string& card)
{
    auto buffer = card_buffer(card);
    char name[FLEN_CARD] = {0};
    int length = 0;
    int status = 0;
    ffgknm(buffer.data(), name, &length, &status);
    return name;
}

}  // namespace fits

bool FitsHeader::has(const std::string& key) const
{
    return find_card(cards, key) >= 0;
}

std::optional<std::string> FitsHeader::get_string(const std::string& key) const
{
    long i = find_card(cards, key);
    if (i < 0) return std::nullopt;
    auto v = card_value(cards[size_t(i)]);
    if (!v) return std::nullopt;
    std::string text = v->text;
    // Long-string convention: a value ending in '&' continues on the next CONTINUE card.
    for (size_t next = size_t(i) + 1;
         v->quoted && !text.empty() && text.back() == '&' && next < cards.size() &&
         fits::card_keyword(cards[next]) == "CONTINUE";
         ++next) {
        text.pop_back();
        auto continued = card_value(cards[next]);
        if (continued) text += continued->text;
    }
    return text;
}

std::optional<double> FitsHeader::get_double(const std::string& key) const
{
    auto v = find_value(cards, key);
    if (!v || v->quoted) return std::nullopt;
    return parse_double(v->text);
}

std::optional<long long> FitsHeader::get_int(const std::string& key) const
{
    auto v = find_value(cards, key);
    if (!v || v->quoted || v->text.empty()) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    long long n = std::strtoll(v->text.c_str(), &end, 10);
    if (end == v->text.c_str() + v->text.size() && errno == 0) return n;
    // A real with an integral value ("5543.") is accepted as that integer.
    auto d = parse_double(v->text);
    if (d && std::isfinite(*d) && std::floor(*d) == *d && std::fabs(*d) < 9.0e18) {
        return static_cast<long long>(*d);
    }
    return std::nullopt;
}

namespace {

void replace_cards(std::vector<std::string>& cards, const std::string& key,
                   std::vector<std::string> replacement)
{
    long i = find_card(cards, key);
    if (i < 0) {
        cards.insert(cards.end(), replacement.begin(), replacement.end());
        return;
    }
    auto first = cards.begin() + i;
    auto last = first + 1;
    while (last != cards.end() && fits::card_keyword(*last) == "CONTINUE") ++last;
    first = cards.erase(first, last);
    cards.insert(first, replacement.begin(), replacement.end());
}

}  // namespace

void FitsHeader::set_string(const std::string& key, const std::string& value,
                            const std::string& comment)
{
    replace_cards(cards, key, string_cards(key, value, comment));
}

void FitsHeader::set_double(const std::string& key, double value, const std::string& comment)
{
    if (!std::isfinite(value)) {
        // FITS has no literal for NaN or infinities; keep the information as a string.
        set_string(key, std::isnan(value) ? "NaN" : (value > 0 ? "Inf" : "-Inf"), comment);
        return;
    }
    replace_cards(cards, key, {make_card(key, format_double(value), comment)});
}

void FitsHeader::set_int(const std::string& key, long long value, const std::string& comment)
{
    replace_cards(cards, key, {make_card(key, std::to_string(value), comment)});
}

void FitsHeader::erase(const std::string& key)
{
    for (long i = find_card(cards, key); i >= 0; i = find_card(cards, key)) {
        auto first = cards.begin() + i;
        auto last = first + 1;
        while (last != cards.end() && fits::card_keyword(*last) == "CONTINUE") ++last;
        cards.erase(first, last);
    }
}

}  // namespace ex2d
