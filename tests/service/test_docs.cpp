// SPDX-License-Identifier: BSD-3-Clause
// The docs against the code: every configuration key the docs name is one of config_keys()
// (config/ex2d.yaml is checked against them in test_config.cpp), and every ex2d option that
// docs/usage.md documents is in that subcommand's --help. A failure names the key or the
// option and the file.
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

}  // namespace
