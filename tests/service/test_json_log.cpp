// SPDX-License-Identifier: BSD-3-Clause
// JSON logs: every line written to stdout by ex2d::logger() parses as one JSON object with the
// documented fields, whatever the message holds.
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "ex2d/logging.hpp"
#include "ex2d/service/json_log.hpp"

namespace {

using ex2d::service::json_escape;
using ex2d::service::LogContext;
using ex2d::service::ScopedLogContext;

/// Runs `body` with stdout (fd 1) redirected to a file and returns the lines written.
template <typename Body>
std::vector<std::string> capture_stdout(Body body)
{
    const std::string path =
        ::testing::TempDir() + "ex2d_json_log_" + std::to_string(::getpid()) + ".txt";
    std::fflush(stdout);
    const int saved = ::dup(STDOUT_FILENO);
    const int file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(file, STDOUT_FILENO);
    ::close(file);
    body();
    ex2d::logger()->flush();
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);

    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::remove(path.c_str());
    return lines;
}

TEST(JsonLogTest, EscapesQuotesBackslashesAndControlCharacters)
{
    EXPECT_EQ(json_escape("plain"), "plain");
    EXPECT_EQ(json_escape("a\"b\\c"), "a\\\"b\\\\c");
    EXPECT_EQ(json_escape("line1\nline2\t\r"), "line1\\nline2\\t\\r");
    EXPECT_EQ(json_escape("\b\f"), "\\b\\f");
    EXPECT_EQ(json_escape(std::string("nul\0x", 5)), "nul\\u0000x");
    EXPECT_EQ(json_escape("\x01 \x1f"), "\\u0001 \\u001f");
    EXPECT_EQ(json_escape("del\x7f"), "del\x7f");  // not a control character in JSON
}

// Invalid UTF-8 becomes U+FFFD (written as UTF-8): one per byte that cannot start a
// sequence, one per sequence cut short.
TEST(JsonLogTest, ReplacesInvalidUtf8)
{
    EXPECT_EQ(json_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xad"),
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xad");  // valid UTF-8 kept as is
    EXPECT_EQ(json_escape("bad\xff byte"), "bad\xef\xbf\xbd byte");
    EXPECT_EQ(json_escape("cut \xe2\x82"), "cut \xef\xbf\xbd");
    EXPECT_EQ(json_escape("cut \xe2\x82 mid"), "cut \xef\xbf\xbd mid");
    EXPECT_EQ(json_escape("overlong \xc0\xaf"), "overlong \xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(json_escape("surrogate \xed\xa0\x80"),
              "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(json_escape("\xff\n"), "\xef\xbf\xbd\\n");
    for (const std::string bad : {"\xff", "\xe2\x82", "\xc0\xaf", "\xf5\x80\x80\x80"}) {
        const std::string line = "\"" + json_escape("x" + bad + "\"y") + "\"";
        ASSERT_NO_THROW(EXPECT_EQ(nlohmann::json::parse(line).get<std::string>().back(), 'y'))
            << line;
    }
}

TEST(JsonLogTest, ScopedContextNestsAndRestores)
{
    EXPECT_TRUE(ex2d::service::current_log_context().job.empty());
    {
        ScopedLogContext outer(LogContext{"job-1", "20261123", "00012345", "b1", 2});
        EXPECT_EQ(ex2d::service::current_log_context().job, "job-1");
        {
            ScopedLogContext inner(LogContext{"job-2", "", "", "r3", 0});
            EXPECT_EQ(ex2d::service::current_log_context().job, "job-2");
            EXPECT_EQ(ex2d::service::current_log_context().attempt, 0);
        }
        EXPECT_EQ(ex2d::service::current_log_context().camera, "b1");
        EXPECT_EQ(ex2d::service::current_log_context().attempt, 2);
    }
    EXPECT_TRUE(ex2d::service::current_log_context().job.empty());
}

TEST(JsonLogTest, EveryLineIsOneJsonObjectWithTheFields)
{
    const std::string nasty = "path \"/data/a b\\c.fits\"\nsecond line\ttab \x01 caf\xc3\xa9";
    const auto lines = capture_stdout([&] {
        ex2d::service::init_json_logging("worker", "worker \"w1\"", "debug");
        ex2d::logger()->info("{}", nasty);
        {
            ScopedLogContext context(LogContext{"00012345-b1", "20261123", "00012345", "b1", 3});
            ex2d::logger()->warn("frame {} late", 7);
        }
        ex2d::logger()->debug("debug line");
        ex2d::logger()->trace("not shown at level debug");
        ex2d::logger()->error("broken \xff byte");
        ex2d::logger()->critical("{{braces}} {}", 1);
    });
    ASSERT_EQ(lines.size(), 5u);

    std::vector<nlohmann::json> records;
    for (const auto& line : lines) {
        ASSERT_NO_THROW(records.push_back(nlohmann::json::parse(line))) << line;
        const auto& r = records.back();
        ASSERT_TRUE(r.is_object());
        EXPECT_TRUE(std::regex_match(r.at("ts").get<std::string>(),
                                     std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
            << r.at("ts");
        EXPECT_EQ(r.at("role"), "worker");
        EXPECT_EQ(r.at("name"), "worker \"w1\"");
        EXPECT_FALSE(r.at("host").get<std::string>().empty());
        EXPECT_EQ(r.at("pid"), ::getpid());
    }
    EXPECT_EQ(records[0].at("level"), "info");
    EXPECT_EQ(records[0].at("msg"), nasty);
    EXPECT_FALSE(records[0].contains("job"));
    EXPECT_FALSE(records[0].contains("attempt"));

    EXPECT_EQ(records[1].at("level"), "warning");
    EXPECT_EQ(records[1].at("msg"), "frame 7 late");
    EXPECT_EQ(records[1].at("job"), "00012345-b1");
    EXPECT_EQ(records[1].at("night"), "20261123");
    EXPECT_EQ(records[1].at("expid"), "00012345");
    EXPECT_EQ(records[1].at("camera"), "b1");
    EXPECT_EQ(records[1].at("attempt"), 3);

    EXPECT_EQ(records[2].at("level"), "debug");
    EXPECT_FALSE(records[2].contains("job"));
    EXPECT_EQ(records[3].at("level"), "error");
    EXPECT_EQ(records[3].at("msg"), "broken \xef\xbf\xbd byte");
    EXPECT_EQ(records[4].at("level"), "critical");
    EXPECT_EQ(records[4].at("msg"), "{braces} 1");
}

TEST(JsonLogTest, LevelFiltersLines)
{
    const auto lines = capture_stdout([] {
        ex2d::service::init_json_logging("reader", "r", "warn");
        ex2d::logger()->info("dropped");
        ex2d::logger()->warn("kept");
    });
    ASSERT_EQ(lines.size(), 1u);
    const auto record = nlohmann::json::parse(lines[0]);
    EXPECT_EQ(record.at("msg"), "kept");
    EXPECT_EQ(record.at("role"), "reader");
    EXPECT_EQ(ex2d::logger()->flush_level(), spdlog::level::info);
    EXPECT_EQ(ex2d::logger()->sinks().size(), 1u);
}

}  // namespace
