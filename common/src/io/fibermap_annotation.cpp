// SPDX-License-Identifier: BSD-3-Clause
#include "fibermap_annotation.hpp"

#include <cctype>
#include <vector>

#include "ex2d/logging.hpp"
#include "fits_util.hpp"

namespace ex2d::fits {
namespace {

/// TFORM without a repeat count of 1 ("1K" and "K" are the same type).
std::string normalised_tform(std::string tform)
{
    while (!tform.empty() && tform.back() == ' ') tform.pop_back();
    if (tform.size() > 1 && tform[0] == '1' && std::isalpha(static_cast<unsigned char>(tform[1]))) {
        tform.erase(0, 1);
    }
    return tform;
}

std::string join(const std::vector<std::string>& names)
{
    std::string text;
    for (const std::string& n : names) text += (text.empty() ? "" : ",") + n;
    return text;
}

/// Reads a string keyword; `found` is false where it does not exist.
Status read_string_key(fitsfile* f, const std::string& path, const std::string& key,
                       std::string& value, std::string* comment, bool& found)
{
    char text[FLEN_VALUE] = "";
    char note[FLEN_COMMENT] = "";
    int status = 0;
    fits_read_key(f, TSTRING, key.c_str(), text, note, &status);
    found = status == 0;
    if (status == KEY_NO_EXIST) {
        fits_clear_errmsg();
        return Status::ok();
    }
    if (status) return io_error(path, "FIBERMAP: cannot read " + key, status);
    value = text;
    if (comment) *comment = note;
    return Status::ok();
}

/// Sets TUNITn as desispec does: inserted after TFORMn when absent, replaced when different.
Status set_unit(fitsfile* f, const std::string& path, int column, const FibermapColumn& known)
{
    const std::string tunit = "TUNIT" + std::to_string(column);
    const std::string comment = known.name + " units";
    std::string unit;
    bool found = false;
    EX2D_RETURN_NOT_OK(read_string_key(f, path, tunit, unit, nullptr, found));
    int status = 0;
    if (!found) {
        char card[FLEN_CARD];
        // Reading TFORMn leaves the header position there, so the insertion follows it.
        fits_read_card(f, ("TFORM" + std::to_string(column)).c_str(), card, &status);
        fits_insert_key_str(f, tunit.c_str(), known.unit.c_str(), comment.c_str(), &status);
    } else if (unit != known.unit) {
        logger()->warn("event=fibermap_unit_replaced file={} column={} unit=\"{}\" expected=\"{}\"",
                       path, known.name, unit, known.unit);
        fits_update_key_str(f, tunit.c_str(), known.unit.c_str(), comment.c_str(), &status);
    }
    if (status) return io_error(path, "FIBERMAP: cannot write " + tunit, status);
    return Status::ok();
}

}  // namespace

Status annotate_fibermap(fitsfile* f, const std::string& path, const FibermapColumns& table)
{
    int ncols = 0;
    int status = 0;
    if (fits_get_num_cols(f, &ncols, &status)) {
        return io_error(path, "FIBERMAP: cannot count its columns", status);
    }
    std::vector<std::string> unknown, mistyped;
    for (int column = 1; column <= ncols; ++column) {
        const std::string ttype = "TTYPE" + std::to_string(column);
        std::string name, comment, tform;
        bool found = false;
        EX2D_RETURN_NOT_OK(read_string_key(f, path, ttype, name, &comment, found));
        const FibermapColumn* known = found ? table.find(name) : nullptr;
        if (known == nullptr) {
            unknown.push_back(found ? name : ttype);
            continue;
        }
        EX2D_RETURN_NOT_OK(
            read_string_key(f, path, "TFORM" + std::to_string(column), tform, nullptr, found));
        if (!known->tform.empty() && normalised_tform(tform) != normalised_tform(known->tform)) {
            mistyped.push_back(name + ":" + tform + "!=" + known->tform);
        }
        if (!known->unit.empty()) EX2D_RETURN_NOT_OK(set_unit(f, path, column, *known));
        if (comment != known->description &&
            fits_modify_comment(f, ttype.c_str(), known->description.c_str(), &status)) {
            return io_error(path, "FIBERMAP: cannot write the comment of " + ttype, status);
        }
    }
    if (!unknown.empty()) {
        logger()->warn("event=fibermap_columns_unknown file={} table=\"{}\" columns={}", path,
                       table.source, join(unknown));
    }
    if (!mistyped.empty()) {
        logger()->warn("event=fibermap_types_unexpected file={} table=\"{}\" columns={}", path,
                       table.source, join(mistyped));
    }
    return Status::ok();
}

}  // namespace ex2d::fits
