// weft: train transformer models with tensor parallelism.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "weft/core/error.h"
#include "weft/kernels/cpu_support.h"

namespace {

void print_overview() {
  std::cout << "usage: weft <command> [options]\n\n"
               "weft trains transformer models with tensor parallelism on CPUs (oneDNN\n"
               "kernels; ranks as threads or MPI processes). Run `weft <command> --help`\n"
               "for details.\n\n"
               "commands:\n";
  for (const auto& c : weft::cli::commands()) {
    std::cout << "  " << c.name << std::string(c.name.size() < 18 ? 18 - c.name.size() : 1, ' ')
              << c.summary << "\n";
  }
  std::cout << "\n  weft help CMD      the same as weft CMD --help\n"
               "  weft --version     the version, the CPU and the kernel path of each dtype\n";
}

// OpenMP threads wait for work by spinning, and libgomp reads how long from
// the environment when it loads, before main. weft's default is a short spin
// (GOMP_SPINCOUNT=1000): as fast as libgomp's long default on an idle machine
// and about 35% faster when another process shares the cores (README,
// "Threads"). Unless the user chose a policy, weft runs itself again with it
// set; WEFT_OMP_WAIT records that the value is weft's. If the executable
// cannot be run again, the run goes on with libgomp's default.
bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

void choose_openmp_wait(char** argv) {
  if (env_set("OMP_WAIT_POLICY") || env_set("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", "1000", 1);
  setenv("WEFT_OMP_WAIT", "default", 1);
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");
  unsetenv("WEFT_OMP_WAIT");
}

}  // namespace

int main(int argc, char** argv) {
  choose_openmp_wait(argv);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--version") {
    std::cout << "weft " << WEFT_VERSION << "\n" << weft::kernels::describe_cpu_support() << "\n";
    return 0;
  }
  // `weft help train` is `weft train --help`.
  if (args.size() > 1 && args[0] == "help") {
    args.erase(args.begin());
    args.push_back("--help");
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_overview();
    return args.empty() ? 2 : 0;
  }
  size_t words = 0;
  const weft::cli::Command* command = weft::cli::find_command(args, words);
  try {
    if (!command) {
      std::string group = args[0];
      bool is_group = false;
      for (const auto& c : weft::cli::commands()) {
        if (c.name.starts_with(group + " ")) {
          is_group = true;
          break;
        }
      }
      if (is_group) {
        std::cerr << "weft " << group << ": choose one of:\n";
        for (const auto& c : weft::cli::commands())
          if (c.name.starts_with(group + " "))
            std::cerr << "  weft " << c.name << "  " << c.summary << "\n";
        return (args.size() > 1 && args[1] != "--help" && args[1] != "-h") || args.size() == 1 ? 2
                                                                                               : 0;
      }
      WEFT_FAIL("unknown command '{}'; run `weft --help` for the list", args[0]);
    }
    return command->run(
        std::vector<std::string>(args.begin() + static_cast<long>(words), args.end()));
  } catch (const weft::cli::HelpShown&) {
    return 0;
  } catch (const weft::Error& e) {
    std::cerr << "weft: error: " << e.what() << "\n";
    if (std::getenv("WEFT_DEBUG")) std::cerr << "  (raised at " << e.where() << ")\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "weft: internal error: " << e.what() << "\n";
    return 1;
  }
}
