// SPDX-License-Identifier: BSD-3-Clause
// The docs against the code: every configuration key the docs name is one of config_keys()
// (config/ex2d.yaml is checked against them in test_config.cpp), and every ex2d option that
// docs/usage.md documents is in that subcommand's --help, and every option of an `ex2d` or
// `ex2dctl` command line the docs show (code blocks and inline code, on any page) is in the
// --help of the (sub)command it follows. A failure names the key or the option and the file.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "ex2d/service/config.hpp"
#include "run_tool.hpp"

namespace {

namespace fs = std::filesystem;

using ex2d::service::config_keys;

const fs::path kSource = EX2D_SOURCE_DIR;

std::string read_text(const fs::path& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

/// The pages that name configuration keys: docs/*.md and the two READMEs.
std::vector<fs::path> doc_pages()
{
    std::vector<fs::path> pages = {kSource / "README.md", kSource / "python" / "README.md"};
    for (const auto& entry : fs::directory_iterator(kSource / "docs")) {
        if (entry.path().extension() == ".md") pages.push_back(entry.path());
    }
    return pages;
}

std::set<std::string> key_names()
{
    std::set<std::string> names;
    for (const auto& key : config_keys()) names.insert(key.name);
    return names;
}

std::set<std::string> sections()
{
    std::set<std::string> out;
    for (const auto& key : config_keys()) out.insert(key.name.substr(0, key.name.find('.')));
    return out;
}

/// "docs/fleet.md:12" for the match at `pos` of a page's text.
std::string where(const fs::path& page, const std::string& text, std::ptrdiff_t pos)
{
    const auto line = std::count(text.begin(), text.begin() + pos, '\n') + 1;
    return fs::relative(page, kSource).string() + ":" + std::to_string(line);
}

std::string join(const std::set<std::string>& words, const std::string& separator)
{
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
    return out;
}

/// Whether `dotted` (e.g. worker.gpu.count) is a value of the Helm chart, which the
/// deployment page documents beside the configuration.
bool is_chart_value(const YAML::Node& values, const std::string& dotted)
{
    std::vector<YAML::Node> path = {values};
    std::stringstream parts(dotted);
    for (std::string part; std::getline(parts, part, '.');) {
        const YAML::Node& node = path.back();
        if (!node.IsMap() || !node[part]) return false;
        path.push_back(node[part]);
    }
    return true;
}

/// A name like reader.key or redis.conf is a file, not a key of section reader or redis.
bool is_file_name(const std::string& dotted)
{
    static const std::set<std::string> suffixes = {"conf", "csv", "fits", "json", "key",
                                                   "log",  "pub", "txt",  "yaml"};
    return suffixes.count(dotted.substr(dotted.rfind('.') + 1)) != 0;
}

// How the docs name configuration keys: `section.key` (also `section.key: value`), flags
// --section.key, variables EX2D_SECTION_KEY and the chart's `config.section.key`. A dotted
// name of a section that is no key must be a chart value or a file name.
TEST(Docs, ConfigurationKeysTheDocsNameExist)
{
    const std::set<std::string> keys = key_names();
    const std::string any = join(sections(), "|");
    std::string any_upper = any;
    for (char& c : any_upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    const std::regex quoted("`([^`\n]+)`");
    const std::regex dotted("(--|config\\.)?((?:" + any +
                            ")(?:\\.[A-Za-z_]+)+)(\\.\\*)?([ :=].*)?");
    const std::regex flag("--((?:" + any + ")\\.[a-z_]+)");
    const std::regex variable("\\bEX2D_((?:" + any_upper + ")_[A-Z0-9_]*[A-Z0-9])\\b");
    const YAML::Node chart = YAML::LoadFile((kSource / "charts" / "ex2d" / "values.yaml").string());
    int named = 0;
    for (const fs::path& page : doc_pages()) {
        const std::string text = read_text(page);
        for (std::sregex_iterator m(text.begin(), text.end(), quoted), end; m != end; ++m) {
            std::smatch d;
            const std::string span = (*m)[1];
            if (!std::regex_match(span, d, dotted)) continue;
            const std::string name = d[2];
            ++named;
            if (keys.count(name) != 0) continue;
            const bool plain = d[1].length() == 0;
            EXPECT_TRUE(plain && (is_chart_value(chart, name) || is_file_name(name)))
                << where(page, text, m->position()) << " names `" << span << "`: " << name
                << " is no configuration key (config_keys())"
                << (plain ? " nor a value of charts/ex2d/values.yaml" : "");
        }
        for (std::sregex_iterator m(text.begin(), text.end(), flag), end; m != end; ++m) {
            ++named;
            EXPECT_EQ(keys.count((*m)[1]), 1u)
                << where(page, text, m->position()) << " names the flag " << (*m)[0]
                << ", which is no configuration key";
        }
        for (std::sregex_iterator m(text.begin(), text.end(), variable), end; m != end; ++m) {
            std::string rest = (*m)[1];
            for (char& c : rest) c = char(std::tolower(static_cast<unsigned char>(c)));
            const std::string section = rest.substr(0, rest.find('_'));
            const std::string name = section + "." + rest.substr(section.size() + 1);
            ++named;
            EXPECT_EQ(keys.count(name), 1u)
                << where(page, text, m->position()) << " names " << (*m)[0] << ", the variable of "
                << name << ", which is no configuration key";
        }
    }
    EXPECT_GT(named, 100) << "the docs' keys were not found: has their form changed?";
}

/// The options of one `ex2d` subcommand as docs/usage.md documents them.
struct Documented {
    std::string subcommand;
    std::string option;
    int line = 0;
};

/// Options in the first column of the option tables (`| option | default | meaning |`),
/// for the subcommand the section's heading names (`ex2d trace-shifts`; else extract, the
/// page's subject), and options in the second column of the command table (`| command |`).
std::vector<Documented> usage_options(const std::string& text)
{
    const std::regex heading_command("`ex2d ([a-z-]+)`");
    const std::regex option("(?:^|[\\s`/,(])(--?[A-Za-z][A-Za-z0-9-]*)");
    const std::regex quoted("`([^`]+)`");
    std::vector<Documented> out;
    std::string section_command = "extract", table;
    std::stringstream lines(text);
    int number = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        std::smatch m;
        if (line.rfind('#', 0) == 0) {
            section_command =
                std::regex_search(line, m, heading_command) ? m[1].str() : std::string("extract");
            table.clear();
            continue;
        }
        if (line.rfind('|', 0) != 0) {
            table.clear();
            continue;
        }
        if (table.empty()) {  // the header row
            table = line.rfind("| option |", 0) == 0    ? "option"
                    : line.rfind("| command |", 0) == 0 ? "command"
                                                        : "other";
            continue;
        }
        std::vector<std::string> cells;
        std::stringstream row(line.substr(1));
        for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
        if (cells.size() < 2 || cells[0].find("---") != std::string::npos) continue;
        std::string command = section_command, options;
        if (table == "option") {
            options = cells[0];
        } else if (table == "command") {
            if (!std::regex_search(cells[0], m, heading_command)) continue;
            command = m[1];
            for (std::sregex_iterator q(cells[1].begin(), cells[1].end(), quoted), end; q != end;
                 ++q) {
                options += " `" + (*q)[1].str() + "`";
            }
        } else {
            continue;
        }
        for (std::sregex_iterator o(options.begin(), options.end(), option), end; o != end; ++o) {
            out.push_back({command, (*o)[1], number});
        }
    }
    return out;
}

TEST(Docs, UsageOptionsAreInTheirSubcommandsHelp)
{
    const std::vector<Documented> documented =
        usage_options(read_text(kSource / "docs" / "usage.md"));
    std::map<std::string, std::string> help;
    for (const Documented& d : documented) {
        if (help.count(d.subcommand) == 0) {
            const auto r = ex2d::test::run_command(d.subcommand + " --help");
            ASSERT_EQ(r.exit_code, 0) << "ex2d " << d.subcommand << " --help:\n" << r.output;
            help[d.subcommand] = r.output;
        }
        const std::regex listed("(^|[\\s,])" + d.option + "([\\s,=]|$)");
        EXPECT_TRUE(std::regex_search(help[d.subcommand], listed))
            << "docs/usage.md:" << d.line << " documents " << d.option << " of ex2d "
            << d.subcommand << ", which `ex2d " << d.subcommand << " --help` does not list";
    }
    EXPECT_GT(documented.size(), 50u) << "docs/usage.md's option tables were not found";
    EXPECT_GE(help.size(), 4u) << "docs/usage.md's subcommands were not found";
}

/// A piece of code the docs show, and where it starts.
struct CommandLine {
    std::string text;
    std::string where;
};

/// Code the docs show: fenced blocks (a line ending in a backslash continues) and inline
/// code spans elsewhere.
std::vector<CommandLine> shown_code(const fs::path& page)
{
    const std::string text = read_text(page);
    const std::regex span("`([^`\n]+)`");
    std::vector<CommandLine> out;
    std::stringstream lines(text);
    bool fenced = false;
    std::string pending;
    int number = 0, pending_line = 0;
    for (std::string line; std::getline(lines, line);) {
        ++number;
        if (line.find("```") != std::string::npos) {
            fenced = !fenced;
            continue;
        }
        const std::string where =
            fs::relative(page, kSource).string() + ":" + std::to_string(number);
        if (!fenced) {
            for (std::sregex_iterator m(line.begin(), line.end(), span), end; m != end; ++m) {
                out.push_back({(*m)[1], where});
            }
            continue;
        }
        if (pending.empty()) pending_line = number;
        if (!line.empty() && line.back() == '\\') {
            pending += line.substr(0, line.size() - 1) + " ";
            continue;
        }
        out.push_back({pending + line,
                       fs::relative(page, kSource).string() + ":" + std::to_string(pending_line)});
        pending.clear();
    }
    return out;
}

/// The subcommands a --help lists under "Subcommands:".
std::set<std::string> listed_subcommands(const std::string& help)
{
    std::set<std::string> out;
    const auto at = help.find("\nSubcommands:\n");
    if (at == std::string::npos) return out;
    std::stringstream lines(help.substr(at + 14));
    const std::regex entry("^  ([a-z][a-z0-9-]*)\\s.*");
    for (std::string line; std::getline(lines, line) && !line.empty();) {
        std::smatch m;
        if (std::regex_match(line, m, entry)) out.insert(m[1]);
    }
    return out;
}

/// Whether `help` lists `option` (as "-s," "--threads" "--log-level TEXT" ...).
bool lists_option(const std::string& help, const std::string& option)
{
    return std::regex_search(help, std::regex("(^|[\\s,])" + option + "([\\s,=:]|$)"));
}

/// The commands of a piece of shell: split at `;`, `&&`, `||`, `|`, `$(` and `(`.
std::vector<std::string> shell_commands(const std::string& code)
{
    std::vector<std::string> out;
    const std::regex separator(";|&&|\\|\\||\\||\\$\\(|\\(|\\bdo\\b|\\bthen\\b");
    std::sregex_token_iterator part(code.begin(), code.end(), separator, -1), end;
    for (; part != end; ++part) out.push_back(*part);
    return out;
}

// Beyond the option tables: a command line anywhere in the docs, e.g. `ex2d bench -p psf.fits
// --threads 1` or `ex2dctl status --exposure 12345`, uses only options of the command it names,
// or of a command above it that lets them fall through (asked by running it with --help).
// The tool must be the command's program (after variable assignments, sudo, exec or a path);
// a redirection or comment ends the command.
TEST(Docs, CommandLinesTheDocsShowUseRealOptions)
{
    const std::map<std::string, std::string> tools = {{"ex2d", EX2D_TOOL_PATH},
                                                      {"ex2dctl", EX2DCTL_TOOL_PATH}};
    const std::regex invocation(
        "^\\s*(?:[A-Za-z_][A-Za-z0-9_]*=\\S*\\s+)*(?:(?:sudo|exec|time)\\s+)*"
        "(?:\\S*/)?(ex2dctl|ex2d)((?:\\s+[^>#]*)?)$");
    const std::regex token("\\S+");
    const std::regex option_form("^(--?[A-Za-z][A-Za-z0-9-]*)(=.*)?$");
    std::map<std::string, ex2d::test::RunResult> runs;
    const auto run = [&](const std::string& tool, const std::string& args) {
        const std::string key = tool + " " + args;
        if (runs.count(key) == 0) runs[key] = ex2d::test::run_command(args, "", tools.at(tool));
        return runs[key];
    };
    const auto help_of = [&](const std::string& tool, const std::string& path) {
        const auto r = run(tool, path + " --help");
        EXPECT_EQ(r.exit_code, 0) << tool << " " << path << " --help:\n" << r.output;
        return r.output;
    };
    int checked = 0;
    for (const fs::path& page : doc_pages()) {
        for (const CommandLine& code : shown_code(page)) {
            for (const std::string& command : shell_commands(code.text)) {
                std::smatch m;
                if (!std::regex_match(command, m, invocation)) continue;
                const std::string tool = m[1], rest = m[2];
                std::vector<std::string> path;  // the subcommands so far: {"campaign", "pause"}
                const auto joined = [](const std::vector<std::string>& words, std::size_t n) {
                    std::string out;
                    for (std::size_t i = 0; i < n; ++i) out += (i ? " " : "") + words[i];
                    return out;
                };
                bool first = true;
                for (std::sregex_iterator t(rest.begin(), rest.end(), token), tend; t != tend;
                     ++t, first = false) {
                    const std::string word = (*t)[0];
                    const std::string here = joined(path, path.size());
                    std::smatch o;
                    if (std::regex_match(word, o, option_form)) {
                        ++checked;
                        const std::string option = o[1];
                        bool known = lists_option(help_of(tool, here), option);
                        for (std::size_t n = path.size(); !known && n-- > 0;) {
                            known = lists_option(help_of(tool, joined(path, n)), option) &&
                                    run(tool, here + " " + option + " --help")
                                            .output.find("not expected") == std::string::npos;
                        }
                        EXPECT_TRUE(known)
                            << code.where << " shows `" << code.text << "`: " << tool
                            << (here.empty() ? "" : " " + here) << " has no option " << option;
                    } else if (listed_subcommands(help_of(tool, here)).count(word) != 0) {
                        path.push_back(word);
                    } else if (first) {
                        break;  // "ex2d is ...": prose, not a command line
                    }
                }
            }
        }
    }
    EXPECT_GT(checked, 100) << "the docs' command lines were not found: has their form changed?";
}

}  // namespace
