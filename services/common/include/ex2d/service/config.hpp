// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file config.hpp
/// The fleet's one configuration format. Every key is declared once (config_keys.cpp) with
/// its type, default and comment; config/ex2d.yaml lists the same keys. Values come, later
/// winning, from the defaults, the YAML file (--config FILE or EX2D_CONFIG), environment
/// variables EX2D_<SECTION>_<KEY> (e.g. EX2D_REDIS_PORT) and command-line flags
/// --section.key VALUE or --section.key=VALUE (CLI11 parses them and reads the variables). An
/// unknown key or a bad value anywhere is an error that names the key and where it came from.
/// A variable that is empty, or whose key the command line gives, is not read; an empty value
/// is given as --section.key "".

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ex2d/status.hpp"

namespace ex2d::service {

enum class ConfigType { string, integer, number, boolean };

/// One configuration key, e.g. {"redis.port", integer, "6379", "Redis TCP port"}.
struct ConfigKey {
    std::string name;  ///< "section.key"
    ConfigType type = ConfigType::string;
    std::string default_value;  ///< as it would be written in YAML
    std::string help;           ///< one line, also the comment in config/ex2d.yaml
    bool secret = false;        ///< masked in --print-config and logs
    double min = -1e300;        ///< inclusive bounds for integer and number keys
    double max = 1e300;
    std::vector<std::string> choices;  ///< allowed values of a string key; empty = any
};

/// Every key of every role, in the order of config/ex2d.yaml.
const std::vector<ConfigKey>& config_keys();

class Config {
public:
    /// The defaults of config_keys().
    Config();

    /// Applies the YAML file, the environment and the flags in argv (argv[0] is skipped).
    /// Recognised flags besides the keys: --config FILE, --print-config, --help.
    /// Unknown flags, unknown keys and bad values return invalid_argument naming them.
    Status load(int argc, const char* const* argv);
    /// Applies a YAML document (the file's text) as `source` for messages.
    Status apply_yaml(const std::string& text, const std::string& source);
    /// Sets one key from text (validated against its type and bounds).
    Status set(const std::string& key, const std::string& value, const std::string& source);

    std::string get_string(const std::string& key) const;
    long long get_int(const std::string& key) const;
    double get_double(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    /// From now on, adds the name of every key a get_* reads to `log` (null: stops), so that
    /// a test can check that the settings structs (settings.hpp) read every declared key.
    void record_reads(std::set<std::string>* log) { read_log_ = log; }

    bool print_config_requested() const { return print_config_; }
    bool help_requested() const { return help_; }

    /// The effective configuration as YAML (sections, comments), secrets as "<redacted>".
    std::string to_yaml() const;
    /// Help text listing every key, its default and comment.
    std::string help_text(const std::string& program) const;

private:
    std::map<std::string, std::string> values_;
    bool print_config_ = false;
    bool help_ = false;
    std::set<std::string>* read_log_ = nullptr;
};

}  // namespace ex2d::service
