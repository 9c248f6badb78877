// Tessera's one error mechanism: exceptions inside the core, converted to a
// status at the C API boundary. UserError is for bad models, bad inputs and bad
// artifacts (the caller can fix them); InternalError is a bug in Tessera.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera {

enum class ErrorKind { kUser, kUnsupported, kInternal };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream stream;
  (stream << ... << std::forward<Args>(args));
  return stream.str();
}

/// A mistake in the model, the input or the artifact: the user can fix it.
template <typename... Args>
[[noreturn]] void throw_user_error(Args&&... args) {
  throw Error(ErrorKind::kUser, str_cat(std::forward<Args>(args)...));
}

/// Something valid that Tessera does not implement (yet).
template <typename... Args>
[[noreturn]] void throw_unsupported(Args&&... args) {
  throw Error(ErrorKind::kUnsupported, str_cat(std::forward<Args>(args)...));
}

/// A broken invariant inside Tessera: a bug.
template <typename... Args>
[[noreturn]] void throw_internal_error(Args&&... args) {
  throw Error(ErrorKind::kInternal, str_cat(std::forward<Args>(args)...));
}

#define TESSERA_CHECK(cond, ...)                                 \
  do {                                                           \
    if (!(cond)) ::tessera::throw_user_error(__VA_ARGS__);       \
  } while (0)

}  // namespace tessera
