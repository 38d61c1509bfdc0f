// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

extern char** environ;

namespace ex2d::service {
namespace {

constexpr const char* kEnvPrefix = "EX2D_";
constexpr const char* kRedacted = "<redacted>";

const ConfigKey* find_key(const std::string& name)
{
    for (const ConfigKey& key : config_keys()) {
        if (key.name == name) return &key;
    }
    return nullptr;
}

std::string section_of(const std::string& name)
{
    return name.substr(0, name.find('.'));
}

/// Sections in the order of config_keys().
std::vector<std::string> sections()
{
    std::vector<std::string> result;
    for (const ConfigKey& key : config_keys()) {
        std::string section = section_of(key.name);
        if (std::find(result.begin(), result.end(), section) == result.end()) {
            result.push_back(section);
        }
    }
    return result;
}

bool is_section(const std::string& name)
{
    const auto all = sections();
    return std::find(all.begin(), all.end(), name) != all.end();
}

std::string upper(std::string text)
{
    for (char& c : text) c = char(std::toupper(static_cast<unsigned char>(c)));
    return text;
}

std::string lower(std::string text)
{
    for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

std::string trim(const std::string& text)
{
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

/// Shortest text that reads back as the same double; whole numbers without an exponent.
std::string format_number(double value)
{
    if (value == std::floor(value) && std::fabs(value) < 1e18) {
        return std::to_string(static_cast<long long>(value));
    }
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    return std::string(buffer, result.ptr);
}

std::string env_name(const std::string& key)
{
    std::string name = kEnvPrefix + upper(key);
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
}

const char* type_name(ConfigType type)
{
    switch (type) {
        case ConfigType::string:
            return "STRING";
        case ConfigType::integer:
            return "INTEGER";
        case ConfigType::number:
            return "NUMBER";
        case ConfigType::boolean:
            return "BOOLEAN";
    }
    return "VALUE";
}

bool has_bounds(const ConfigKey& key)
{
    return key.min > -1e299 || key.max < 1e299;
}

std::string bounds_text(const ConfigKey& key)
{
    return "[" + format_number(key.min) + ", " + format_number(key.max) + "]";
}

std::string join(const std::vector<std::string>& items)
{
    std::string result;
    for (const auto& item : items) result += (result.empty() ? "" : ", ") + item;
    return result;
}

/// {true, the canonical text of `value`} or {false, what is wrong with it}.
std::pair<bool, std::string> normalize(const ConfigKey& key, const std::string& value)
{
    const std::string text = trim(value);
    switch (key.type) {
        case ConfigType::string:
            if (!key.choices.empty() &&
                std::find(key.choices.begin(), key.choices.end(), value) == key.choices.end()) {
                return {false, "must be one of " + join(key.choices) + ", not '" + value + "'"};
            }
            return {true, value};
        case ConfigType::boolean: {
            const std::string word = lower(text);
            if (word == "true" || word == "yes" || word == "on" || word == "1")
                return {true, "true"};
            if (word == "false" || word == "no" || word == "off" || word == "0") {
                return {true, "false"};
            }
            return {false, "not a boolean (true/false, yes/no, on/off, 1/0): '" + value + "'"};
        }
        case ConfigType::integer: {
            const char* begin = text.c_str() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
            const char* end = text.c_str() + text.size();
            long long parsed = 0;
            const auto result = std::from_chars(begin, end, parsed);
            if (text.empty() || result.ec != std::errc() || result.ptr != end) {
                return {false, "not an integer: '" + value + "'"};
            }
            if (double(parsed) < key.min || double(parsed) > key.max) {
                return {false, "out of range " + bounds_text(key) + ": " + text};
            }
            return {true, std::to_string(parsed)};
        }
        case ConfigType::number: {
            const char* begin = text.c_str() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
            const char* end = text.c_str() + text.size();
            double parsed = 0;
            const auto result = std::from_chars(begin, end, parsed);
            if (text.empty() || result.ec != std::errc() || result.ptr != end ||
                !std::isfinite(parsed)) {
                return {false, "not a number: '" + value + "'"};
            }
            if (parsed < key.min || parsed > key.max) {
                return {false, "out of range " + bounds_text(key) + ": " + text};
            }
            return {true, format_number(parsed)};
        }
    }
    return {false, "unsupported type"};
}

Status problem(const std::string& source, const std::string& key, const std::string& what)
{
    return Status::invalid(source + ": " + key + ": " + what);
}

/// An error for the first EX2D_<SECTION>_* variable, in name order, that names no key: CLI11
/// reads only the variables of declared keys, and a misspelt one must not be ignored. Other
/// EX2D_* variables (used by the tools) are not configuration.
Status check_variables_name_keys()
{
    std::vector<std::string> names;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string text = *entry;
        if (text.rfind(kEnvPrefix, 0) == 0) names.push_back(text.substr(0, text.find('=')));
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        for (const std::string& section : sections()) {
            const std::string section_prefix = kEnvPrefix + upper(section) + "_";
            if (name.rfind(section_prefix, 0) != 0) continue;
            const std::string key = section + "." + lower(name.substr(section_prefix.size()));
            if (find_key(key) == nullptr) return problem("environment " + name, key, "unknown key");
            break;
        }
    }
    return Status::ok();
}

/// The key's value as printed: strings double-quoted, secrets as "<redacted>".
void emit_value(YAML::Emitter& out, const ConfigKey& key, const std::string& value)
{
    if (key.secret && !value.empty()) {
        out << YAML::DoubleQuoted << kRedacted;
    } else if (key.type == ConfigType::string) {
        out << YAML::DoubleQuoted << value;
    } else {
        out << value;
    }
}

std::string yaml_value(const ConfigKey& key, const std::string& value)
{
    YAML::Emitter out;
    emit_value(out, key, value);
    return out.c_str();
}

}  // namespace

Config::Config()
{
    for (const ConfigKey& key : config_keys()) values_[key.name] = key.default_value;
}

Status Config::set(const std::string& key, const std::string& value, const std::string& source)
{
    const ConfigKey* spec = find_key(key);
    if (spec == nullptr) return problem(source, key, "unknown key");
    auto [ok, text] = normalize(*spec, value);
    if (!ok) return problem(source, key, text);
    values_[key] = std::move(text);
    return Status::ok();
}

Status Config::apply_yaml(const std::string& text, const std::string& source)
{
    try {
        const YAML::Node root = YAML::Load(text);
        if (root.IsNull()) return Status::ok();
        if (!root.IsMap()) return Status::invalid(source + ": not a map of sections");
        for (const auto& section : root) {
            const std::string name = section.first.as<std::string>();
            if (!is_section(name)) return problem(source, name, "unknown section");
            if (section.second.IsNull()) continue;
            if (!section.second.IsMap()) return problem(source, name, "not a map of keys");
            for (const auto& entry : section.second) {
                const std::string key = name + "." + entry.first.as<std::string>();
                if (find_key(key) == nullptr) return problem(source, key, "unknown key");
                std::string value;
                if (entry.second.IsScalar()) {
                    value = entry.second.Scalar();
                } else if (!entry.second.IsNull()) {
                    return problem(source, key, "not a single value");
                }
                EX2D_RETURN_NOT_OK(set(key, value, source));
            }
        }
    } catch (const YAML::Exception& e) {
        return Status::invalid(source + ": " + e.what());
    }
    return Status::ok();
}

Status Config::load(int argc, const char* const* argv)
{
    const std::string source = "command line";
    CLI::App app;
    app.set_help_flag();  // help_text() lists the keys with their types, bounds and variables
    app.allow_extras();   // reported below, with the argument named
    std::string config_file;
    app.add_flag("-h,--help", help_);
    app.add_flag("--print-config", print_config_);
    app.add_option("--config", config_file)->envname("EX2D_CONFIG");
    std::map<std::string, std::string> given;
    std::vector<std::pair<const ConfigKey*, const CLI::Option*>> key_options;
    for (const ConfigKey& key : config_keys()) {
        const CLI::Option* option = app.add_option("--" + key.name, given[key.name])
                                        ->envname(env_name(key.name))
                                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        key_options.emplace_back(&key, option);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ArgumentMismatch& e) {
        // CLI11's message starts with the option's name, which cannot contain ':'.
        const std::string what = e.what();
        return problem(source, what.substr(0, what.find(':')), "missing value");
    } catch (const CLI::ParseError& e) {
        return Status::invalid(source + ": " + e.what());
    }
    const std::vector<std::string> extras = app.remaining();
    if (!extras.empty()) {
        const std::string& first = extras.front();
        if (first.size() > 2 && first.rfind("--", 0) == 0) {
            return problem(source, first.substr(0, first.find('=')), "unknown flag");
        }
        return problem(source, first, "unexpected argument");
    }

    if (!config_file.empty()) {
        // An ifstream opens a folder and reads nothing; that would silently mean "defaults".
        std::error_code ec;
        if (std::filesystem::is_directory(config_file, ec)) {
            return Status::io(config_file + ": the configuration file is a folder");
        }
        std::ifstream in(config_file);
        if (!in) {
            return Status::io(config_file +
                              ": cannot read the configuration file: " + std::strerror(errno));
        }
        std::stringstream text;
        text << in.rdbuf();
        EX2D_RETURN_NOT_OK(apply_yaml(text.str(), config_file));
    }

    EX2D_RETURN_NOT_OK(check_variables_name_keys());
    // CLI11 reads a key's variable only where the command line did not give the key, and
    // parse_order() lists what came from the command line: the rest came from the variables.
    const auto& on_command_line = app.parse_order();
    const auto given_on_command_line = [&on_command_line](const CLI::Option* option) {
        return std::find(on_command_line.begin(), on_command_line.end(), option) !=
               on_command_line.end();
    };
    for (const auto& [key, option] : key_options) {
        if (option->count() == 0 || given_on_command_line(option)) continue;
        EX2D_RETURN_NOT_OK(set(key->name, given[key->name], "environment " + env_name(key->name)));
    }
    for (const auto& [key, option] : key_options) {
        if (given_on_command_line(option))
            EX2D_RETURN_NOT_OK(set(key->name, given[key->name], source));
    }
    return Status::ok();
}

std::string Config::get_string(const std::string& key) const
{
    const auto found = values_.find(key);
    if (found == values_.end()) throw Error("unknown configuration key " + key);
    if (read_log_ != nullptr) read_log_->insert(key);
    return found->second;
}

long long Config::get_int(const std::string& key) const
{
    const ConfigKey* spec = find_key(key);
    if (spec == nullptr || spec->type != ConfigType::integer) {
        throw Error("configuration key " + key + " is not an integer key");
    }
    return std::stoll(get_string(key));
}

double Config::get_double(const std::string& key) const
{
    const ConfigKey* spec = find_key(key);
    if (spec == nullptr ||
        (spec->type != ConfigType::number && spec->type != ConfigType::integer)) {
        throw Error("configuration key " + key + " is not a number key");
    }
    const std::string text = get_string(key);
    double value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

bool Config::get_bool(const std::string& key) const
{
    const ConfigKey* spec = find_key(key);
    if (spec == nullptr || spec->type != ConfigType::boolean) {
        throw Error("configuration key " + key + " is not a boolean key");
    }
    return get_string(key) == "true";
}

std::string Config::to_yaml() const
{
    // yaml-cpp writes a comment after the value before it, so each key's help ends its line.
    YAML::Emitter out;
    out << YAML::Comment("ex2d fleet configuration (effective values)") << YAML::Newline
        << YAML::BeginMap;
    for (const std::string& section : sections()) {
        out << YAML::Key << section << YAML::Value << YAML::BeginMap;
        for (const ConfigKey& key : config_keys()) {
            if (section_of(key.name) != section) continue;
            out << YAML::Key << key.name.substr(section.size() + 1) << YAML::Value;
            emit_value(out, key, values_.at(key.name));
            out << YAML::Comment(key.help);
        }
        out << YAML::EndMap;
    }
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

std::string Config::help_text(const std::string& program) const
{
    std::string out = "Usage: " + program +
                      " [--config FILE] [--print-config] [--help] [--SECTION.KEY VALUE]...\n\n"
                      "Values come from the defaults, then the YAML file (--config FILE or\n"
                      "EX2D_CONFIG), then environment variables EX2D_SECTION_KEY, then flags\n"
                      "--section.key VALUE or --section.key=VALUE (later wins).\n\nKeys:\n";
    for (const ConfigKey& key : config_keys()) {
        out += "  --" + key.name + " " + type_name(key.type) + "  (default " +
               yaml_value(key, key.default_value);
        if (key.type != ConfigType::string && has_bounds(key)) out += ", " + bounds_text(key);
        if (!key.choices.empty()) out += ", one of " + join(key.choices);
        out += "; " + env_name(key.name) + ")\n      " + key.help + "\n";
    }
    return out;
}

}  // namespace ex2d::service
