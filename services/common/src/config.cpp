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

#include <yaml-cpp/yaml.h>

#include "ex2d/service/json_log.hpp"

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

std::string yaml_value(const ConfigKey& key, const std::string& value)
{
    if (key.secret && !value.empty()) return std::string("\"") + kRedacted + "\"";
    if (key.type != ConfigType::string) return value;
    return "\"" + json_escape(value) + "\"";
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
    std::string config_file;
    std::vector<std::pair<std::string, std::string>> flags;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            help_ = true;
            continue;
        }
        if (arg == "--print-config") {
            print_config_ = true;
            continue;
        }
        if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
            return Status::invalid(source + ": " + arg + ": unexpected argument");
        }
        std::string name = arg.substr(2);
        std::string value;
        const auto equals = name.find('=');
        if (equals != std::string::npos) {
            value = name.substr(equals + 1);
            name.resize(equals);
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return problem(source, arg, "missing value");
        }
        if (name == "config") {
            config_file = value;
        } else if (find_key(name) == nullptr) {
            return problem(source, "--" + name, "unknown flag");
        } else {
            flags.emplace_back(name, value);
        }
    }

    if (config_file.empty()) {
        const char* from_env = std::getenv("EX2D_CONFIG");
        if (from_env != nullptr) config_file = from_env;
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

    // The environment in name order, so that the first error is the same on every run. Other
    // EX2D_* variables (used by the tools) are ignored unless they look like one of our keys.
    std::vector<std::pair<std::string, std::string>> env;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string text = *entry;
        const auto equals = text.find('=');
        if (equals == std::string::npos || text.rfind(kEnvPrefix, 0) != 0) continue;
        env.emplace_back(text.substr(0, equals), text.substr(equals + 1));
    }
    std::sort(env.begin(), env.end());
    const std::string prefix = kEnvPrefix;
    for (const auto& [name, value] : env) {
        if (name == "EX2D_CONFIG") continue;
        for (const std::string& section : sections()) {
            const std::string section_prefix = prefix + upper(section) + "_";
            if (name.rfind(section_prefix, 0) != 0) continue;
            const std::string key = section + "." + lower(name.substr(section_prefix.size()));
            const std::string env_source = "environment " + name;
            if (find_key(key) == nullptr) return problem(env_source, key, "unknown key");
            EX2D_RETURN_NOT_OK(set(key, value, env_source));
            break;
        }
    }

    for (const auto& [name, value] : flags) EX2D_RETURN_NOT_OK(set(name, value, source));
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
    std::string out = "# ex2d fleet configuration (effective values)\n";
    std::string current;
    for (const ConfigKey& key : config_keys()) {
        const std::string section = section_of(key.name);
        if (section != current) {
            out += "\n" + section + ":\n";
            current = section;
        }
        out += "  # " + key.help + "\n";
        out += "  " + key.name.substr(section.size() + 1) + ": " +
               yaml_value(key, values_.at(key.name)) + "\n";
    }
    return out;
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
