// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fits_header.hpp
/// A FITS header held in memory as its 80-character cards, so that headers travel with frames
/// (preproc IMAGE header -> frame FLUX header) without a file behind them.
///
/// ex2d::core carries headers (a PSF's, for provenance) but reads no card: the accessors
/// below are defined in ex2d::io (fits_header.cpp, with CFITSIO's card rules), which a
/// caller of them links.

#include <optional>
#include <string>
#include <vector>

namespace ex2d {

class FitsHeader {
public:
    /// Cards as read from the file, each exactly 80 characters (no END card).
    std::vector<std::string> cards;

    bool has(const std::string& key) const;
    /// String value without quotes and trailing blanks; nullopt if absent.
    std::optional<std::string> get_string(const std::string& key) const;
    /// Numeric value (integer or floating); nullopt if absent or not numeric.
    std::optional<double> get_double(const std::string& key) const;
    std::optional<long long> get_int(const std::string& key) const;

    /// Replace the card of `key` (or append one) with a string / number / integer value.
    void set_string(const std::string& key, const std::string& value,
                    const std::string& comment = "");
    void set_double(const std::string& key, double value, const std::string& comment = "");
    void set_int(const std::string& key, long long value, const std::string& comment = "");
    void erase(const std::string& key);
};

}  // namespace ex2d
