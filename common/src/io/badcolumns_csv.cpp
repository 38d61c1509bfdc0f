// SPDX-License-Identifier: BSD-3-Clause
// The calibnight badcolumns table as astropy's CSV writer stores it (desispec writes it with
// Table.write; datamodel 4.5 and 4.7): a header line of column names, then one line per row,
// fields separated by commas and quoted with '"' only where they need it.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "ex2d/badcolumns.hpp"

namespace ex2d {

namespace {

std::vector<std::string> split_fields(const std::string& line)
{
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
            fields.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    for (std::string& field : fields) {
        const auto first = field.find_first_not_of(" \t");
        const auto last = field.find_last_not_of(" \t");
        field = first == std::string::npos ? "" : field.substr(first, last - first + 1);
    }
    return fields;
}

bool parse_finite(const std::string& text, double& value)
{
    if (text.empty()) return false;
    char* end = nullptr;
    errno = 0;
    value = std::strtod(text.c_str(), &end);
    return errno == 0 && end == text.c_str() + text.size() && std::isfinite(value);
}

}  // namespace

Result<BadColumns> read_badcolumns_csv(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        return Status::io(path + ": no such file (bad-column table)");
    }
    std::ifstream in(path);
    if (!in) return Status::io(path + ": cannot open (bad-column table)");
    BadColumns table;
    table.source = path;
    std::vector<std::string> header;
    int column_index = -1;
    int value_index = -1;
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
        const std::vector<std::string> fields = split_fields(line);
        const std::string where = path + ": line " + std::to_string(line_number) + ": ";
        if (header.empty()) {
            header = fields;
            for (std::size_t i = 0; i < header.size(); ++i) {
                if (header[i] == "COLUMN") column_index = int(i);
                if (header[i] == "ELEC_PER_SEC") value_index = int(i);
            }
            if (column_index < 0 || value_index < 0) {
                return Status::format(where + "the header '" + line + "' lacks column " +
                                      (column_index < 0 ? "COLUMN" : "ELEC_PER_SEC") +
                                      " (a bad-column table needs COLUMN and ELEC_PER_SEC)");
            }
            continue;
        }
        if (fields.size() != header.size()) {
            return Status::format(where + std::to_string(fields.size()) +
                                  " fields, the header has " + std::to_string(header.size()));
        }
        double column = 0;
        double value = 0;
        if (!parse_finite(fields[std::size_t(column_index)], column)) {
            return Status::format(where + "COLUMN '" + fields[std::size_t(column_index)] +
                                  "' is not a finite number");
        }
        if (!parse_finite(fields[std::size_t(value_index)], value)) {
            return Status::format(where + "ELEC_PER_SEC '" + fields[std::size_t(value_index)] +
                                  "' is not a finite number");
        }
        table.column.push_back(column);
        table.elec_per_sec.push_back(value);
    }
    if (in.bad()) return Status::io(path + ": read error (bad-column table)");
    if (header.empty()) {
        return Status::format(path +
                              ": no header line (a bad-column table needs COLUMN and "
                              "ELEC_PER_SEC)");
    }
    return table;
}

Status write_badcolumns_csv(const std::string& path, const BadColumns& table,
                            const std::string& camera)
{
    if (table.column.size() != table.elec_per_sec.size()) {
        throw Error("write_badcolumns_csv: COLUMN and ELEC_PER_SEC differ in length");
    }
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary, std::ios::trunc);
        if (!out) return Status::io(path + ": cannot write (bad-column table)");
        out << "CAMERA,COLUMN,ELEC_PER_SEC\n";
        char line[128];
        for (std::size_t i = 0; i < table.column.size(); ++i) {
            std::snprintf(line, sizeof line, "%s,%.17g,%.17g\n", camera.c_str(), table.column[i],
                          table.elec_per_sec[i]);
            out << line;
        }
        out.close();
        if (!out) {
            std::filesystem::remove(temporary, ec);
            return Status::io(path + ": cannot write (bad-column table)");
        }
    }
    std::filesystem::rename(temporary, path, ec);
    if (ec) {
        std::filesystem::remove(temporary, ec);
        return Status::io(path + ": cannot rename into place: " + ec.message());
    }
    return Status::ok();
}

}  // namespace ex2d
