// SPDX-License-Identifier: BSD-3-Clause
// write_new_file: every byte written as given, whatever the size and the buffer's alignment
// (large files go around the page cache with O_DIRECT, through a bounce buffer for the parts
// that are not block-aligned, and are cut back to their size), and a file that exists is
// never overwritten.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "file_output.hpp"
#include "test_paths.hpp"

namespace {

std::vector<std::uint8_t> read_all(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FileOutput, EveryByteWhateverTheSizeAndAlignment)
{
    ex2d::test::TempDir dir;
    constexpr std::size_t kMiB = std::size_t(1) << 20;
    std::vector<std::uint8_t> source(20 * kMiB + 8192);
    for (std::size_t i = 0; i < source.size(); ++i)
        source[i] = std::uint8_t((i * 2654435761u) >> 13);
    // The vector's storage is not page-aligned; offsets into a page-aligned copy are, or not.
    void* aligned_raw = std::aligned_alloc(4096, source.size());
    ASSERT_NE(aligned_raw, nullptr);
    auto* aligned = static_cast<std::uint8_t*>(aligned_raw);
    std::copy(source.begin(), source.end(), aligned);
    struct Case {
        const char* name;
        std::size_t offset;  ///< into the aligned copy
        std::size_t size;
    };
    const Case cases[] = {
        {"small, through the cache", 0, 100 * 1024},
        {"1 MiB, aligned", 0, kMiB},
        {"aligned start, unaligned tail", 0, 17 * kMiB + 123},
        {"unaligned start", 7, kMiB + 1234},
        {"unaligned, several bounce buffers", 4095, 20 * kMiB + 5},
        {"empty", 0, 0},
    };
    int n = 0;
    for (const Case& c : cases) {
        const std::string path = dir.file("out-" + std::to_string(n++) + ".fits");
        const ex2d::Status s = ex2d::fits::write_new_file(path, path, aligned + c.offset, c.size);
        ASSERT_TRUE(s.is_ok()) << c.name << ": " << s.to_string();
        const std::vector<std::uint8_t> back = read_all(path);
        ASSERT_EQ(back.size(), c.size) << c.name;
        EXPECT_TRUE(std::equal(back.begin(), back.end(), source.begin() + c.offset)) << c.name;
    }
    std::free(aligned_raw);
}

TEST(FileOutput, AnExistingFileIsNeverOverwritten)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("taken.fits");
    std::ofstream(path) << "old";
    std::vector<std::uint8_t> data(2 << 20, 7);
    const ex2d::Status s = ex2d::fits::write_new_file("frame.fits", path, data.data(), data.size());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("frame.fits: cannot create the file"), std::string::npos)
        << s.message();
    EXPECT_EQ(read_all(path).size(), 3u);
}

}  // namespace
