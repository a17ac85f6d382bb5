// `weft plot` through the real CLI: the PNG is a PNG of the asked size whose
// curve pixels lie where the losses map (read back with cairo), the SVG parses
// as XML (expat) and holds the loss polyline at the mapped coordinates, the
// tick labels span the losses, and bad input writes nothing.
#include <cairo.h>
#include <expat.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "weft/io/json.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using io::Json;

struct CliRun {
  int status;
  std::string out;
};

CliRun weft(const std::string& args) {
  const std::string cmd = std::string(WEFT_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Loss of the synthetic run at `step`, and its validation loss.
double loss_at(int step) { return 2.0 + 3.0 * std::exp(-step / 10.0); }
double val_at(int step) { return loss_at(step) + 0.3; }
constexpr int kSteps = 40;

class Plot : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_plot_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream m(dir_ / "m.jsonl");
    // A resumed run writes step 5 twice: the last line counts.
    m << "{\"step\":5,\"loss\":9.0,\"lr\":0.001}\n";
    for (int s = 1; s <= kSteps; ++s) {
      m << "{\"step\":" << s << ",\"loss\":" << loss_at(s);
      if (s % 10 == 0) m << ",\"val_loss\":" << val_at(s);
      m << ",\"lr\":0.001}\n";
      if (s == 20) m << "\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `weft plot` with --json and returns the layout it reports.
  Json plot(const std::string& out, const std::string& extra = "") {
    CliRun r = weft("plot " + (dir_ / "m.jsonl").string() + " -o " + (dir_ / out).string() +
                    " --width 640 --height 400 --json " + extra);
    EXPECT_EQ(r.status, 0) << r.out;
    return io::parse_json(r.out);
  }

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

// Pixel position of (step, loss) from the layout the command reported.
double map_x(const Json& l, double step) {
  const Json& x = l.at("x");
  const double f =
      (step - x.at("min").as_double()) / (x.at("max").as_double() - x.at("min").as_double());
  return l.at("plot").at("left").as_double() +
         f * (l.at("plot").at("right").as_double() - l.at("plot").at("left").as_double());
}
double map_y(const Json& l, double v) {
  const Json& y = l.at("y");
  double lo = y.at("min").as_double(), hi = y.at("max").as_double();
  double f = y.at("log").as_bool() ? std::log(v / lo) / std::log(hi / lo) : (v - lo) / (hi - lo);
  return l.at("plot").at("bottom").as_double() -
         f * (l.at("plot").at("bottom").as_double() - l.at("plot").at("top").as_double());
}

// The y axis's tick labels read back as numbers span the losses drawn.
void expect_ticks_span_losses(const Json& l) {
  const auto& labels = l.at("y").at("labels").as_array();
  ASSERT_GE(labels.size(), 3u);
  std::vector<double> values;
  for (const Json& s : labels) values.push_back(std::stod(s.as_string()));
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
  double lo = 1e9, hi = -1e9;
  for (int s = 1; s <= kSteps; ++s) {
    lo = std::min(lo, loss_at(s));
    hi = std::max(hi, s % 10 == 0 ? val_at(s) : loss_at(s));
  }
  // The labels reach past the losses on both sides, by less than the span.
  EXPECT_LE(values.front(), lo + 0.35 * (hi - lo));
  EXPECT_GE(values.back(), hi - 0.35 * (hi - lo));
  EXPECT_GE(values.front(), lo - (hi - lo));
  EXPECT_LE(values.back(), hi + (hi - lo));
  EXPECT_LE(l.at("y").at("min").as_double(), lo);
  EXPECT_GE(l.at("y").at("max").as_double(), hi);
}

struct Colour {
  int r, g, b;
};
constexpr Colour kLoss{0x1f, 0x77, 0xb4}, kVal{0xd6, 0x27, 0x28};

// Rows of column x whose pixel is near `c`.
std::vector<int> rows_of(cairo_surface_t* s, int x, Colour c) {
  const unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s), h = cairo_image_surface_get_height(s);
  std::vector<int> rows;
  for (int y = 0; y < h; ++y) {
    uint32_t px;
    std::memcpy(&px, data + y * stride + x * 4, 4);
    const int r = (px >> 16) & 0xff, g = (px >> 8) & 0xff, b = px & 0xff;
    if (std::abs(r - c.r) + std::abs(g - c.g) + std::abs(b - c.b) < 60) rows.push_back(y);
  }
  return rows;
}

bool near_any(const std::vector<int>& rows, double y, double tolerance) {
  for (int r : rows)
    if (std::abs(r - y) <= tolerance) return true;
  return false;
}

void expect_png_curves(const fs::path& png, const Json& l) {
  std::ifstream in(png, std::ios::binary);
  std::string head(24, '\0');
  in.read(head.data(), 24);
  ASSERT_EQ(head.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  ASSERT_EQ(head.substr(12, 4), "IHDR");
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(head[at + i]);
    return v;
  };
  EXPECT_EQ(be32(16), 640u);
  EXPECT_EQ(be32(20), 400u);

  cairo_surface_t* s = cairo_image_surface_create_from_png(png.c_str());
  ASSERT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
  ASSERT_EQ(cairo_image_surface_get_width(s), 640);
  // Every step's column has loss-coloured pixels where its loss maps (the
  // first and last columns sit on the frame: one pixel inside).
  int columns_with_curve = 0;
  for (int step = 1; step <= kSteps; ++step) {
    const double x = map_x(l, step) + (step == 1 ? 1 : step == kSteps ? -1 : 0);
    const auto rows = rows_of(s, static_cast<int>(std::lround(x)), kLoss);
    EXPECT_TRUE(near_any(rows, map_y(l, loss_at(step)), 3))
        << "step " << step << ": no loss pixel near row " << map_y(l, loss_at(step));
    columns_with_curve += !rows.empty();
  }
  EXPECT_EQ(columns_with_curve, kSteps);
  // The validation points (a dot at each) where their losses map.
  for (int step = 10; step <= kSteps; step += 10) {
    const double x = map_x(l, step) - (step == kSteps ? 2 : 0);
    EXPECT_TRUE(
        near_any(rows_of(s, static_cast<int>(std::lround(x)), kVal), map_y(l, val_at(step)), 3))
        << "no val loss dot at step " << step;
  }
  cairo_surface_destroy(s);
}

TEST_F(Plot, PngHoldsTheCurvesWhereTheLossesMap) {
  const Json l = plot("loss.png");
  EXPECT_EQ(l.at("loss_points").as_int(), kSteps);
  EXPECT_EQ(l.at("val_loss_points").as_int(), 4);
  EXPECT_FALSE(l.at("y").at("log").as_bool());
  expect_ticks_span_losses(l);
  expect_png_curves(dir_ / "loss.png", l);
  EXPECT_EQ(files(), (std::vector<std::string>{"loss.png", "m.jsonl"}));
}

TEST_F(Plot, LogScale) {
  const Json l = plot("log.png", "--log-y --title 'log loss'");
  EXPECT_TRUE(l.at("y").at("log").as_bool());
  expect_ticks_span_losses(l);
  expect_png_curves(dir_ / "log.png", l);
}

// The SVG's elements as expat reports them: name and attributes.
struct Element {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::string attr(const std::string& key) const {
    for (const auto& [k, v] : attrs)
      if (k == key) return v;
    return {};
  }
};

TEST_F(Plot, SvgParsesAndHoldsTheLossPolyline) {
  const Json l = plot("loss.svg");
  expect_ticks_span_losses(l);
  std::ifstream in(dir_ / "loss.svg");
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();

  std::vector<Element> elements;
  XML_Parser parser = XML_ParserCreate(nullptr);
  XML_SetUserData(parser, &elements);
  XML_SetStartElementHandler(parser, [](void* user, const XML_Char* name, const XML_Char** atts) {
    Element e{name, {}};
    for (int i = 0; atts[i]; i += 2) e.attrs.emplace_back(atts[i], atts[i + 1]);
    static_cast<std::vector<Element>*>(user)->push_back(std::move(e));
  });
  const bool parsed =
      XML_Parse(parser, svg.data(), static_cast<int>(svg.size()), 1) == XML_STATUS_OK;
  EXPECT_TRUE(parsed) << XML_ErrorString(XML_GetErrorCode(parser)) << " at line "
                      << XML_GetCurrentLineNumber(parser);
  XML_ParserFree(parser);
  ASSERT_FALSE(elements.empty());
  EXPECT_EQ(elements[0].name, "svg");
  EXPECT_EQ(elements[0].attr("width"), "640pt");

  // The loss polyline: the longest path stroked in the loss colour.
  std::vector<std::pair<double, double>> points;
  for (const Element& e : elements) {
    if (e.name != "path" ||
        e.attr("style").find("stroke:rgb(12.156863%,46.666667%,70.588235%)") == std::string::npos)
      continue;
    std::vector<std::pair<double, double>> pts;
    std::istringstream d(e.attr("d"));
    std::string op;
    double x, y;
    while (d >> op >> x >> y) pts.emplace_back(x, y);
    if (pts.size() > points.size()) points = pts;
  }
  ASSERT_EQ(points.size(), static_cast<size_t>(kSteps));
  for (int step = 1; step <= kSteps; ++step) {
    EXPECT_NEAR(points[step - 1].first, map_x(l, step), 0.01) << "step " << step;
    EXPECT_NEAR(points[step - 1].second, map_y(l, loss_at(step)), 0.01) << "step " << step;
  }
}

TEST_F(Plot, BadInputIsOneLineAndWritesNothing) {
  std::ofstream(dir_ / "empty.jsonl") << "{\"step\":1,\"lr\":0.1}\n\n";
  std::ofstream(dir_ / "broken.jsonl") << "{\"step\":1,\"loss\":2.0}\n{\"step\":2,\"loss\":\n";
  const std::vector<std::string> before = files();
  struct Case {
    std::string args, message;
  };
  const std::string m = (dir_ / "m.jsonl").string(), out = (dir_ / "out.png").string();
  for (const Case& c : std::vector<Case>{
           {"plot " + (dir_ / "missing.jsonl").string() + " -o " + out, "no such file"},
           {"plot " + (dir_ / "empty.jsonl").string() + " -o " + out, "has no line with a"},
           {"plot " + (dir_ / "broken.jsonl").string() + " -o " + out, "line 2: invalid JSON"},
           {"plot " + m + " -o " + (dir_ / "out.pdf").string(), "must end in .png or .svg"},
           {"plot " + m, "give the picture to write"},
           {"plot " + m + " -o " + (dir_ / "no-dir" / "x.png").string(), "cannot write"},
           {"plot " + m + " -o " + out + " --width 10", "--width 10"},
       }) {
    const CliRun r = weft(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("weft: error: ", 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
    EXPECT_EQ(files(), before) << c.args;
  }
}

TEST_F(Plot, HelpNamesEveryOption) {
  const CliRun r = weft("plot --help");
  EXPECT_EQ(r.status, 0);
  for (const char* s :
       {"usage: weft plot", "--output", "--title", "--width", "--height", "--log-y"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

}  // namespace
}  // namespace weft
