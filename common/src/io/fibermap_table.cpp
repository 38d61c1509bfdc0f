// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/fibermap_table.hpp"

#include <fitsio.h>

#include "fibermap_annotation.hpp"
#include "fits_util.hpp"

namespace ex2d {
namespace {

/// Writes one column of every row, converted by cfitsio to the column's own type.
int write_column(fitsfile* fits, int column, const FibermapColumnValues& data, int& status)
{
    if (const auto* text = std::get_if<std::vector<std::string>>(&data.values)) {
        std::vector<std::string> copies = *text;
        std::vector<char*> pointers;
        pointers.reserve(copies.size());
        for (std::string& s : copies) pointers.push_back(s.data());
        return fits_write_col_str(fits, column, 1, 1, (long long)pointers.size(), pointers.data(),
                                  &status);
    }
    if (const auto* numbers = std::get_if<std::vector<double>>(&data.values)) {
        std::vector<double> values = *numbers;
        return fits_write_col(fits, TDOUBLE, column, 1, 1, (long long)values.size(), values.data(),
                              &status);
    }
    std::vector<long long> values = std::get<std::vector<long long>>(data.values);
    return fits_write_col(fits, TLONGLONG, column, 1, 1, (long long)values.size(), values.data(),
                          &status);
}

std::size_t value_count(const FibermapColumnValues& data)
{
    return std::visit([](const auto& values) { return values.size(); }, data.values);
}

}  // namespace

Result<FitsTableBlob> make_fibermap_table(const std::vector<FibermapColumnValues>& columns,
                                          long nrows, const FitsHeader& header,
                                          const std::string& what)
{
    for (const FibermapColumnValues& c : columns) {
        if (value_count(c) != std::size_t(nrows)) {
            return Status::invalid(what + ": column " + c.column.name + " has " +
                                   std::to_string(value_count(c)) + " values for " +
                                   std::to_string(nrows) + " rows");
        }
    }
    std::vector<std::string> names, forms;
    for (const FibermapColumnValues& c : columns) {
        names.push_back(c.column.name);
        forms.push_back(c.column.tform);
    }
    std::vector<char*> name_ptrs, form_ptrs;
    for (std::string& s : names) name_ptrs.push_back(s.data());
    for (std::string& s : forms) form_ptrs.push_back(s.data());
    auto bytes = fits::write_memory_file(what, [&](fitsfile* fits) {
        int status = 0;
        fits_create_img(fits, BYTE_IMG, 0, nullptr, &status);
        fits_create_tbl(fits, BINARY_TBL, nrows, int(names.size()), name_ptrs.data(),
                        form_ptrs.data(), nullptr, "FIBERMAP", &status);
        if (status) return status;
        if (!fits::write_header(fits, what, header).is_ok()) return WRITE_ERROR;
        for (std::size_t c = 0; c < columns.size() && status == 0; ++c) {
            write_column(fits, int(c) + 1, columns[c], status);
        }
        if (status) return status;
        const Status annotated = fits::annotate_fibermap(fits, what, builtin_fibermap_columns());
        return annotated.is_ok() ? 0 : WRITE_ERROR;
    });
    if (!bytes.is_ok()) return bytes.status();
    FitsTableBlob blob;
    blob.fits_bytes = std::move(bytes).value();
    blob.nrows = nrows;
    return blob;
}

}  // namespace ex2d
