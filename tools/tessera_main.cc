// The tessera command line (see kUsage in cli_args.cc): main dispatches to the commands.
#include <iostream>
#include <stdexcept>
#include <string>

#include "cli.h"
#include "omp_wait_defaults.h"

using namespace tessera::cli;  // NOLINT: the commands and CliError

#include <unistd.h>

#include <cstring>

/// `tessera serve ...` runs tessera-serve beside this program (its own target: the
/// CLI stays free of the HTTP and gRPC stacks) with the same arguments.
[[noreturn]] static void exec_serve(char** argv) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  std::string dir = n > 0 ? self.substr(0, static_cast<size_t>(n)) : std::string(argv[0]);
  dir = dir.substr(0, dir.rfind('/') + 1);
  const std::string serve = dir + "tessera-serve";
  argv[1] = const_cast<char*>(serve.c_str());
  execv(serve.c_str(), argv + 1);
  std::cerr << "tessera: error: cannot run " << serve << ": " << std::strerror(errno) << "\n";
  std::exit(1);
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "serve") exec_serve(argv);
  tessera::cli::apply_omp_wait_defaults(argv);
  try {
    Args args = parse_args(argc, argv);
    for (const std::string& plugin : args.plugins) check(tsr_load_backend_plugin(plugin.c_str(), nullptr));
    if (args.command == "run") return command_run(args);
    if (args.command == "info") return command_info(args);
    if (args.command == "bench") return command_bench(args);
    if (args.command == "compile") return command_compile(args);
    if (args.command == "partition") return command_partition(args);
    if (args.command == "check") return command_check(args);
    if (args.command == "quantize") return command_quantize(args);
    if (args.command == "tune") return command_tune(args);
    if (args.command == "backends") return command_backends();
    throw CliError("unknown command '" + args.command + "'\n" + kUsage);
  } catch (const std::exception& e) {
    std::cerr << "tessera: error: " << e.what() << "\n";
    return 1;
  }
}
