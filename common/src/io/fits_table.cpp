// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/fits_table.hpp"

#include "fits_util.hpp"

namespace ex2d {

Result<std::vector<long long>> read_int_column(const FitsTableBlob& table,
                                               const std::string& column)
{
    const std::string what = "in-memory table";
    fits::BlobReader reader;
    EX2D_RETURN_NOT_OK(reader.open(table, what));
    fitsfile* f = reader.get();
    int status = 0;
    int colnum = 0;
    long long nrows = 0;
    if (fits_get_colnum(f, CASEINSEN, const_cast<char*>(column.c_str()), &colnum, &status)) {
        fits_clear_errmsg();
        return Status::format(what + ": no column named " + column);
    }
    int typecode = 0;
    long repeat = 0;
    long width = 0;
    fits_get_coltype(f, colnum, &typecode, &repeat, &width, &status);
    fits_get_num_rowsll(f, &nrows, &status);
    if (status) return fits::io_error(what, "cannot read column " + column, status);
    if (repeat != 1 || typecode == TSTRING || typecode == TFLOAT || typecode == TDOUBLE) {
        return Status::format(what + ": column " + column + " is not a scalar integer column");
    }
    std::vector<long long> values(size_t(nrows), 0);
    int anynul = 0;
    if (nrows > 0 && fits_read_col(f, TLONGLONG, colnum, 1, 1, nrows, nullptr, values.data(),
                                   &anynul, &status)) {
        return fits::io_error(what, "cannot read column " + column, status);
    }
    return values;
}

Status or_int_column_bits(FitsTableBlob& table, const std::string& column, long first_row,
                          const std::vector<long long>& bits)
{
    const std::string what = "in-memory table";
    EX2D_ASSIGN_OR_RETURN(std::vector<long long> values, read_int_column(table, column));
    const std::size_t end = std::size_t(first_row) + bits.size();
    if (first_row < 0 || values.size() < end) {
        return Status::format(what + ": " + std::to_string(values.size()) + " rows, rows [" +
                              std::to_string(first_row) + ", " + std::to_string(end) +
                              ") of column " + column + " asked for");
    }
    for (std::size_t i = 0; i < bits.size(); ++i) values[std::size_t(first_row) + i] |= bits[i];
    fits::BlobReader reader;
    EX2D_RETURN_NOT_OK(reader.open(table, what));
    int colnum = 0;
    int status = 0;
    fits_get_colnum(reader.get(), CASEINSEN, const_cast<char*>(column.c_str()), &colnum, &status);
    auto bytes = fits::write_memory_file(what, [&](fitsfile* mem) {
        fits_create_img(mem, BYTE_IMG, 0, nullptr, &status);
        fits_copy_hdu(reader.get(), mem, 0, &status);
        if (!values.empty()) {
            fits_write_col(mem, TLONGLONG, colnum, 1, 1, (long long)values.size(), values.data(),
                           &status);
        }
        return status;
    });
    if (!bytes.is_ok()) return bytes.status();
    table.fits_bytes = std::move(bytes).value();
    return Status::ok();
}

Result<FitsHeader> read_table_header(const FitsTableBlob& table)
{
    const std::string what = "in-memory table";
    fits::BlobReader reader;
    EX2D_RETURN_NOT_OK(reader.open(table, what));
    return fits::read_header(reader.get(), what);
}

}  // namespace ex2d
