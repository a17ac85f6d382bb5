// `weft topology`: print the process groups of a parallel grid.
#include <iostream>
#include <sstream>

#include "cli.h"
#include "weft/comm/grid.h"
#include "weft/comm/world.h"
#include "weft/core/error.h"

namespace {

weft::cli::Options topology_options() {
  weft::cli::Options opts(
      "weft topology [options]",
      "Prints every group of every dimension of a tensor-parallel x context-parallel x\n"
      "expert-parallel x GTP x data-parallel x pipeline-parallel grid, as `weft train` lays it\n"
      "out. Ranks are laid out with the first name\n"
      "of --order varying fastest, so with --world 8 --tp 4 the TP groups are [0,1,2,3]\n"
      "[4,5,6,7] and the DP groups [0,4] [1,5] [2,6] [3,7]. The dp size is inferred when not\n"
      "given; cp, ep, gtp and pp appear only when given (or named in --order). With --pp the\n"
      "embedding groups follow: the first and last stage of each pipeline, over which a tied\n"
      "head's gradient is summed.");
  opts.option("world", "N", "", "world size (default: the mpirun world when run under mpirun)")
      .option("tp", "T", "1", "tensor-parallel size")
      .option("cp", "C", "", "context-parallel size (each sequence split over C ranks)")
      .option("ep", "E", "", "expert-parallel size (MoE experts split over E ranks)")
      .option("gtp", "G", "", "generalized tensor-parallel size")
      .option("dp", "D", "", "data-parallel size (default: inferred)")
      .option("pp", "P", "", "pipeline-parallel size (stages; the slowest dimension by default)")
      .option("order", "ORDER", "tp-cp-ep-gtp-dp-pp", "dimension order, fastest-varying first")
      .flag("json", "print one JSON object");
  return opts;
}

int topology(const std::vector<std::string>& args) {
  weft::cli::Options opts = topology_options();
  opts.parse(args);

  int world = 0;
  if (opts.given("world")) {
    world = static_cast<int>(opts.integer("world"));
  } else if (const int launched = weft::comm::launcher_world_size(); launched > 0) {
    world = launched;
  } else {
    WEFT_FAIL("give the world size, e.g. `weft topology --world 8 --tp 4`");
  }
  WEFT_CHECK(world >= 1, "--world must be at least 1, got {}", world);

  std::vector<std::pair<std::string, int>> sizes;
  std::string order;
  if (opts.given("order")) {
    order = opts.str("order");
    for (const char* name : {"tp", "cp", "ep", "gtp", "dp", "pp"})
      if (opts.given(name)) sizes.emplace_back(name, static_cast<int>(opts.integer(name)));
  } else {
    // The default order keeps the dimensions that were asked for.
    order = "tp";
    sizes.emplace_back("tp", static_cast<int>(opts.integer("tp")));
    for (const char* name : {"cp", "ep", "gtp"}) {
      if (!opts.given(name)) continue;
      order += std::string("-") + name;
      sizes.emplace_back(name, static_cast<int>(opts.integer(name)));
    }
    order += "-dp";
    if (opts.given("dp")) sizes.emplace_back("dp", static_cast<int>(opts.integer("dp")));
    if (opts.given("pp")) {
      order += "-pp";
      sizes.emplace_back("pp", static_cast<int>(opts.integer("pp")));
    }
  }
  weft::comm::GridLayout layout(world, order, sizes);
  // A tied head's embedding groups: the ends of each pipeline.
  std::vector<std::vector<int>> embedding;
  if (layout.has("pp") && layout.size("pp") > 1) {
    for (const auto& g : layout.groups("pp")) embedding.push_back({g.front(), g.back()});
  }

  if (opts.flag_set("json")) {
    std::ostringstream out;
    out << "{\"world\":" << world << ",\"order\":\"" << layout.order() << "\",\"dims\":{";
    for (size_t i = 0; i < layout.names().size(); ++i) {
      const auto& name = layout.names()[i];
      out << (i ? "," : "") << '"' << name << "\":" << layout.size(name);
    }
    out << "},\"groups\":{";
    for (size_t i = 0; i < layout.names().size(); ++i) {
      const auto& name = layout.names()[i];
      out << (i ? "," : "") << '"' << name << "\":[";
      auto groups = layout.groups(name);
      for (size_t g = 0; g < groups.size(); ++g)
        out << (g ? "," : "") << weft::format("{}", groups[g]);
      out << ']';
    }
    out << "}";
    if (!embedding.empty()) {
      out << ",\"embedding\":[";
      for (size_t g = 0; g < embedding.size(); ++g)
        out << (g ? "," : "") << weft::format("{}", embedding[g]);
      out << ']';
    }
    out << "}";
    std::cout << out.str() << "\n";
    return 0;
  }

  std::cout << "world " << world << ", order " << layout.order() << ":";
  for (const auto& name : layout.names()) std::cout << " " << name << " " << layout.size(name);
  std::cout << "\n";
  for (const auto& name : layout.names()) {
    auto groups = layout.groups(name);
    std::cout << "\n"
              << name << " groups (" << groups.size() << " of " << layout.size(name)
              << " ranks):\n";
    for (size_t g = 0; g < groups.size(); ++g)
      std::cout << "  " << name << "[" << g << "]  " << weft::format("{}", groups[g]) << "\n";
  }
  if (!embedding.empty()) {
    std::cout << "\nembedding groups (" << embedding.size()
              << ", first and last stage of each pipeline: a tied head's gradient is summed "
                 "over them):\n";
    for (size_t g = 0; g < embedding.size(); ++g)
      std::cout << "  embedding[" << g << "]  " << weft::format("{}", embedding[g]) << "\n";
  }
  std::cout << "\nrank coordinates:\n  rank";
  for (const auto& name : layout.names()) std::cout << "  " << name;
  std::cout << "\n";
  for (int r = 0; r < world; ++r) {
    std::cout << "  " << std::string(r < 10 ? 3 : r < 100 ? 2 : 1, ' ') << r;
    for (const auto& name : layout.names())
      std::cout << std::string(name.size() + 2 - std::to_string(layout.coord(name, r)).size(), ' ')
                << layout.coord(name, r);
    std::cout << "\n";
  }
  return 0;
}

const weft::cli::Register reg("topology",
                              "print the process groups of a TP x EP x GTP x DP x PP grid",
                              topology_options, topology);

}  // namespace
