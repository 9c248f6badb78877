// Expectations on tessera errors that check the kind, not only that something
// was thrown: EXPECT_THROW(stmt, Error) also passes on an internal error (a
// bug), and a bad model or input must give a user error instead.
//
//   EXPECT_USER_ERROR(run_one_op(spec), "out of range");
//   EXPECT_UNSUPPORTED_ERROR(import(model), "FancyNewOp");
//   EXPECT_INTERNAL_ERROR(check_partition(graph, broken), "");  // a broken invariant
//
// Each passes only when the statement throws a tessera::Error of that kind
// whose message contains the substring ("" accepts any message). Header only,
// so every test folder can use it (layer tests include it as "unit/expect_error.h").
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string_view>

#include "ir/error.h"

namespace tessera::testing {

inline const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUser: return "user";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kInternal: return "internal";
  }
  return "unknown";
}

/// Success when `statement` throws an Error of `kind` whose message contains `substring`.
inline ::testing::AssertionResult throws_error_of_kind(const std::function<void()>& statement, ErrorKind kind,
                                                       std::string_view substring) {
  try {
    statement();
  } catch (const Error& e) {
    if (e.kind() != kind) {
      return ::testing::AssertionFailure() << "threw an error of kind " << error_kind_name(e.kind()) << ", expected kind "
                                           << error_kind_name(kind) << ": " << e.what();
    }
    if (std::string_view(e.what()).find(substring) == std::string_view::npos) {
      return ::testing::AssertionFailure() << "the error of kind " << error_kind_name(kind) << " does not mention '"
                                           << substring << "': " << e.what();
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-tessera exception: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw something that is not an exception";
  }
  return ::testing::AssertionFailure() << "threw nothing, expected an error of kind " << error_kind_name(kind);
}

}  // namespace tessera::testing

#define TESSERA_EXPECT_ERROR_KIND_(check, statement, kind, substring) \
  check(::tessera::testing::throws_error_of_kind([&] { statement; }, kind, substring)) << #statement

#define EXPECT_USER_ERROR(statement, substring) \
  TESSERA_EXPECT_ERROR_KIND_(EXPECT_TRUE, statement, ::tessera::ErrorKind::kUser, substring)
#define ASSERT_USER_ERROR(statement, substring) \
  TESSERA_EXPECT_ERROR_KIND_(ASSERT_TRUE, statement, ::tessera::ErrorKind::kUser, substring)
#define EXPECT_UNSUPPORTED_ERROR(statement, substring) \
  TESSERA_EXPECT_ERROR_KIND_(EXPECT_TRUE, statement, ::tessera::ErrorKind::kUnsupported, substring)
#define EXPECT_INTERNAL_ERROR(statement, substring) \
  TESSERA_EXPECT_ERROR_KIND_(EXPECT_TRUE, statement, ::tessera::ErrorKind::kInternal, substring)
