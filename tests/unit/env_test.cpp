// Parsing of environment variables: sizes, whole numbers, seconds and flags, and errors that
// name the variable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "iris/host/env.hpp"
#include "iris/host/error.hpp"
#include "unit/helpers/scoped_env.hpp"

namespace {

using namespace std::chrono_literals;
using iris::Errc;
using testing::HasSubstr;

// The message of the iris::Error that `call` throws, checking that it is kInvalidArgument.
template <class Call>
std::string invalid_argument_message(Call&& call) {
  try {
    call();
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), Errc::kInvalidArgument) << error.what();
    return error.message();
  }
  ADD_FAILURE() << "no iris::Error was thrown";
  return {};
}

TEST(EnvParseSize, AcceptsPlainNumbersAndBinarySuffixes) {
  using iris::env::parse_size;
  EXPECT_EQ(parse_size("0", "X"), 0u);
  EXPECT_EQ(parse_size("1073741824", "X"), 1073741824u);
  EXPECT_EQ(parse_size("512MiB", "X"), 512ull << 20);
  EXPECT_EQ(parse_size("2G", "X"), 2ull << 30);
  EXPECT_EQ(parse_size("2gb", "X"), 2ull << 30);
  EXPECT_EQ(parse_size("1k", "X"), 1024u);
  EXPECT_EQ(parse_size(" 4 KiB ", "X"), 4096u);
  EXPECT_EQ(parse_size("3T", "X"), 3ull << 40);
  EXPECT_EQ(parse_size("7B", "X"), 7u);
}

TEST(EnvParseSize, RejectsAnythingElseNamingTheVariable) {
  for (const char* bad : {"", "abc", "12Q", "-1", "1.5G", "G", "99999999999T", "1bb", "1kbb",
                          "1kibib", "1e30", "0x10", "99999999999999999999999"}) {
    const std::string message =
        invalid_argument_message([&] { iris::env::parse_size(bad, "IRIS_HEAP_SIZE"); });
    EXPECT_THAT(message, HasSubstr("IRIS_HEAP_SIZE")) << bad;
    EXPECT_THAT(message, HasSubstr(std::string("'") + bad + "'")) << bad;
  }
}

TEST(EnvParseInt, AcceptsWholeNumbersOnly) {
  using iris::env::parse_int;
  EXPECT_EQ(parse_int("42", "X"), 42);
  EXPECT_EQ(parse_int(" -7 ", "X"), -7);
  for (const char* bad : {"", "4.2", "42x", "x", "99999999999999999999"})
    EXPECT_THAT(invalid_argument_message([&] { parse_int(bad, "IRIS_RANK"); }),
                HasSubstr("IRIS_RANK"))
        << bad;
}

TEST(EnvParseSeconds, AcceptsWholeAndFractionalSeconds) {
  using iris::env::parse_seconds;
  EXPECT_EQ(parse_seconds("30", "X"), 30s);
  EXPECT_EQ(parse_seconds("0.5", "X"), 500ms);
  EXPECT_EQ(parse_seconds("0", "X"), 0s);
  EXPECT_EQ(parse_seconds(" 2.25 ", "X"), 2250ms);
  EXPECT_EQ(parse_seconds("1e3", "X"), 1000s);
  EXPECT_EQ(parse_seconds("9.2e9", "X"), std::chrono::seconds(9'200'000'000));
  // Hex, a leading '+', and anything that does not fit in 64-bit nanoseconds are refused.
  for (const char* bad : {"", "-1", "abc", "5s", "inf", "nan", "0x10", "0x1p3", "+5", "1e10",
                          "1e30", "1e400", "-0.5"}) {
    const std::string message =
        invalid_argument_message([&] { parse_seconds(bad, "IRIS_BOOTSTRAP_TIMEOUT"); });
    EXPECT_THAT(message, HasSubstr("IRIS_BOOTSTRAP_TIMEOUT")) << bad;
    EXPECT_THAT(message, HasSubstr("seconds")) << bad;
  }
}

TEST(EnvParseFlag, AcceptsTheUsualSpellings) {
  using iris::env::parse_flag;
  for (const char* yes : {"1", "true", "TRUE", "yes", "on", " On "})
    EXPECT_TRUE(parse_flag(yes, "X")) << yes;
  for (const char* no : {"0", "false", "No", "off"}) EXPECT_FALSE(parse_flag(no, "X")) << no;
  for (const char* bad : {"", "2", "maybe", "enabled"})
    EXPECT_THAT(invalid_argument_message([&] { parse_flag(bad, "IRIS_DEBUG_CHECKS"); }),
                HasSubstr("IRIS_DEBUG_CHECKS"))
        << bad;
}

TEST(EnvGetters, UseTheFallbackOnlyWhenUnsetOrEmpty) {
  iris::test::ScopedEnv env;
  env.unset("IRIS_TEST_VARIABLE");
  EXPECT_FALSE(iris::env::get("IRIS_TEST_VARIABLE").has_value());
  EXPECT_EQ(iris::env::get_size("IRIS_TEST_VARIABLE", 5), 5u);
  EXPECT_EQ(iris::env::get_int("IRIS_TEST_VARIABLE", -3), -3);
  EXPECT_EQ(iris::env::get_seconds("IRIS_TEST_VARIABLE", 7s), 7s);
  EXPECT_TRUE(iris::env::get_flag("IRIS_TEST_VARIABLE", true));

  env.set("IRIS_TEST_VARIABLE", "");
  EXPECT_FALSE(iris::env::get("IRIS_TEST_VARIABLE").has_value());
  EXPECT_EQ(iris::env::get_int("IRIS_TEST_VARIABLE", 11), 11);

  env.set("IRIS_TEST_VARIABLE", "2");
  EXPECT_EQ(iris::env::get("IRIS_TEST_VARIABLE"), "2");
  EXPECT_EQ(iris::env::get_size("IRIS_TEST_VARIABLE", 5), 2u);
  EXPECT_EQ(iris::env::get_int("IRIS_TEST_VARIABLE", 5), 2);
  EXPECT_EQ(iris::env::get_seconds("IRIS_TEST_VARIABLE", 5s), 2s);

  env.set("IRIS_TEST_VARIABLE", "lots");
  EXPECT_THAT(invalid_argument_message([] { iris::env::get_size("IRIS_TEST_VARIABLE", 5); }),
              HasSubstr("IRIS_TEST_VARIABLE: cannot parse 'lots'"));
  EXPECT_THAT(invalid_argument_message([] { iris::env::get_flag("IRIS_TEST_VARIABLE", false); }),
              HasSubstr("IRIS_TEST_VARIABLE"));
}

TEST(EnvCheckEnvironment, AcceptsAGoodEnvironmentAndNamesTheFirstBadVariable) {
  iris::test::ScopedEnv env;
  for (const char* name : {"IRIS_BOOTSTRAP", "IRIS_RANK", "IRIS_WORLD_SIZE", "IRIS_LOCAL_RANK",
                           "IRIS_LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                           "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                           "PMI_RANK", "PMI_SIZE", "MASTER_PORT", "IRIS_BOOTSTRAP_PORT"})
    env.unset(name);
  env.set("IRIS_HEAP_SIZE", "2GiB").set("IRIS_WAIT_TIMEOUT", "0").set("IRIS_DEBUG_CHECKS", "on");
  env.set("IRIS_HEAP_TRANSPORT", "vmm")
      .set("IRIS_DEVICE", "3")
      .set("IRIS_BOOTSTRAP_TIMEOUT", "0.5");
  env.set("RANK", "1").set("WORLD_SIZE", "2").set("MASTER_PORT", "29500");
  iris::env::check_environment();
  env.set("IRIS_WAIT_TIMEOUT", "1e10");
  EXPECT_THAT(invalid_argument_message([] { iris::env::check_environment(); }),
              HasSubstr("IRIS_WAIT_TIMEOUT: cannot parse '1e10'"));
  env.set("IRIS_WAIT_TIMEOUT", "1");
  env.set("MASTER_PORT", "65535");
  EXPECT_THAT(invalid_argument_message([] { iris::env::check_environment(); }),
              HasSubstr("MASTER_PORT='65535' is out of range"));
  env.set("MASTER_PORT", "29500");
  env.unset("WORLD_SIZE");
  EXPECT_THAT(invalid_argument_message([] { iris::env::check_environment(); }),
              HasSubstr("RANK is set but WORLD_SIZE is not: torchrun sets both"));
  // Under iris-run only its own variables count: a stray RANK is not read, so not refused.
  env.set("IRIS_BOOTSTRAP", "unix:@iris-env-test").set("IRIS_RANK", "0");
  env.set("IRIS_WORLD_SIZE", "1");
  iris::env::check_environment();
  env.set("MASTER_PORT", "65535").set("IRIS_BOOTSTRAP_PORT", "29600");
  env.unset("IRIS_BOOTSTRAP").unset("IRIS_RANK").unset("IRIS_WORLD_SIZE").set("WORLD_SIZE", "2");
  iris::env::check_environment();  // MASTER_PORT + 1 is not used when the port is given
}

}  // namespace
