// The tessera command line (see kUsage in cli_args.cc): main dispatches to the commands.
#include <iostream>
#include <stdexcept>
#include <string>

#include "cli.h"
#include "omp_wait_defaults.h"

using namespace tessera::cli;  // NOLINT: the commands and CliError

int main(int argc, char** argv) {
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
