// SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include <filesystem>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

namespace ex2d::test {

/// A real DESI PSF from ../shared/data, or "" when the folder is absent.
inline std::string shared_psf(const std::string& name)
{
    std::filesystem::path p = std::filesystem::path(EX2D_SHARED_DATA_DIR) / name;
    return std::filesystem::exists(p) ? p.string() : std::string();
}

/// A fresh temporary folder, removed at the end of the test.
class TempDir {
public:
    TempDir()
    {
        auto base = std::filesystem::temp_directory_path();
        for (int i = 0;; ++i) {
            path_ = base / ("ex2d-test-" + std::to_string(::getpid()) + "-" + std::to_string(i));
            if (std::filesystem::create_directory(path_)) break;
        }
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace ex2d::test

/// Skips the current test when the real DESI PSF `name` is not available.
// var is the name of the variable declared: it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define EX2D_REQUIRE_SHARED_PSF(var, name)                                                  \
    const std::string var = ::ex2d::test::shared_psf(name);                                 \
    if (var.empty()) {                                                                      \
        GTEST_SKIP() << "../shared/data/" << (name) << " not found: real-PSF test skipped"; \
    }
// NOLINTEND(bugprone-macro-parentheses)
